package appliance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// squeueStub answers as squeue would for the jobs it knows, and counts
// the calls and the ids each asked about.
type squeueStub struct {
	mu    sync.Mutex
	known map[string]slurmJob
	calls [][]string
	err   error
	delay time.Duration
}

func (q *squeueStub) ask(ctx context.Context, ids []string) (map[string]slurmJob, error) {
	time.Sleep(q.delay) // squeue takes a while: the others wait on its answer
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, ids)
	if q.err != nil {
		return nil, q.err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	out := map[string]slurmJob{}
	for _, id := range ids {
		if st, ok := q.known[id]; ok {
			out[id] = st
		}
	}
	return out, nil
}

func (q *squeueStub) asked() [][]string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.calls)
}

// Forty runs waiting on their jobs at once cost one squeue, not forty,
// and each reads its own job's state from it.
func TestJobBoard_OneSqueueForAll(t *testing.T) {
	t.Parallel()
	q := &squeueStub{known: map[string]slurmJob{}, delay: 20 * time.Millisecond}
	b := newJobBoard(q.ask, time.Hour)
	var ids []string
	for i := range 40 {
		id := fmt.Sprint(100 + i)
		ids = append(ids, id)
		if i%10 != 9 { // every tenth is one Slurm has forgotten
			q.known[id] = slurmJob{state: "RUNNING", node: "gpu" + id}
		}
		defer b.watch(id)()
	}
	var wg sync.WaitGroup
	got := make([]slurmJob, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := b.state(t.Context(), id)
			if err != nil {
				t.Error(err)
			}
			got[i] = st
		}()
	}
	wg.Wait()
	if calls := q.asked(); len(calls) != 1 || len(calls[0]) != 40 {
		t.Fatalf("squeue calls = %v, want one for the 40 jobs", calls)
	}
	for i, id := range ids {
		want, ok := q.known[id]
		if !ok {
			want = gone
		}
		if got[i] != want {
			t.Errorf("job %s = %+v, want %+v", id, got[i], want)
		}
	}
}

// An answer stands while it is fresh and covered the job; a job watched
// since, a stale answer, an ended watch and an error each show.
func TestJobBoard_Freshness(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := &squeueStub{known: map[string]slurmJob{"1": {state: "PENDING", reason: "Resources"}, "2": {state: "RUNNING", node: "n1"}}}
	b := newJobBoard(q.ask, 2*time.Second)
	clock := time.Now()
	b.now = func() time.Time { return clock } // one goroutine: no lock
	unwatch1 := b.watch("1")
	if st, err := b.state(ctx, "1"); err != nil || st.state != "PENDING" {
		t.Fatalf("job 1 = %+v, %v", st, err)
	}
	_, _ = b.state(ctx, "1")
	if n := len(q.asked()); n != 1 {
		t.Errorf("squeue calls for two looks within the freshness = %d, want 1", n)
	}
	defer b.watch("2")()
	if st, _ := b.state(ctx, "2"); st.node != "n1" {
		t.Errorf("job 2, watched after the answer = %+v, want asked about", st)
	}
	if calls := q.asked(); len(calls) != 2 || !cmp.Equal(calls[1], []string{"1", "2"}) {
		t.Errorf("squeue calls = %v, want a second one for both jobs", calls)
	}
	unwatch1()
	clock = clock.Add(2 * time.Second)
	q.mu.Lock()
	q.known["2"] = slurmJob{state: "COMPLETED", node: "n1"}
	q.mu.Unlock()
	if st, _ := b.state(ctx, "2"); st.state != "COMPLETED" {
		t.Errorf("job 2 once the answer is stale = %+v, want asked again", st)
	}
	if calls := q.asked(); !cmp.Equal(calls[len(calls)-1], []string{"2"}) {
		t.Errorf("the last squeue asked about %v, want job 2 alone (job 1 is no longer watched)", calls[len(calls)-1])
	}

	// A run that ends while squeue runs for it does not leave its end
	// behind as Slurm's answer.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	clock = clock.Add(2 * time.Second)
	if _, err := b.state(cancelled, "2"); err == nil {
		t.Error("a look with its context cancelled: no error")
	}
	if st, err := b.state(ctx, "2"); err != nil || st.state != "COMPLETED" {
		t.Errorf("the next look = %+v, %v; want Slurm asked again", st, err)
	}

	q.mu.Lock()
	q.err = errors.New("squeue: slurm_load_jobs error: Unable to contact slurm controller")
	q.mu.Unlock()
	clock = clock.Add(2 * time.Second)
	if _, err := b.state(ctx, "2"); err == nil {
		t.Error("squeue failing: no error")
	}
}

func TestParseSqueue(t *testing.T) {
	t.Parallel()
	out := "\n41|PENDING|Resources|(null)\n42|RUNNING|None|gpu-a07\n43|NODE_FAIL|NodeDown|gpu-b01\n\n"
	want := map[string]slurmJob{
		"41": {state: "PENDING", reason: "Resources"},
		"42": {state: "RUNNING", reason: "None", node: "gpu-a07"},
		"43": {state: "NODE_FAIL", reason: "NodeDown", node: "gpu-b01"},
	}
	if diff := cmp.Diff(want, parseSqueue(out), cmp.AllowUnexported(slurmJob{})); diff != "" {
		t.Errorf("parseSqueue (-want +got):\n%s", diff)
	}
	if got := parseSqueue(""); len(got) != 0 {
		t.Errorf("parseSqueue of nothing = %v", got)
	}
}

// A squeue that hangs (slurmctld slow to answer) holds no one else: a
// run may still watch or unwatch its job, and one whose context ends
// stops waiting for the answer.
func TestJobBoard_SlowSqueue(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	asked := make(chan struct{})
	ask := func(context.Context, []string) (map[string]slurmJob, error) {
		close(asked)
		<-release
		return map[string]slurmJob{"1": {state: "RUNNING"}}, nil
	}
	b := newJobBoard(ask, time.Hour)
	defer b.watch("1")()
	first := make(chan slurmJob)
	go func() {
		st, _ := b.state(t.Context(), "1")
		first <- st
	}()
	<-asked
	done := make(chan struct{})
	go func() {
		b.watch("2")()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("watch waited on the squeue in flight")
	}
	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan error)
	go func() {
		_, err := b.state(ctx, "1")
		waiting <- err
	}()
	cancel()
	select {
	case err := <-waiting:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a look whose run ended = %v, want its context's end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a look whose run ended still waits on the squeue in flight")
	}
	close(release)
	if st := <-first; st.state != "RUNNING" {
		t.Errorf("the squeue's own caller = %+v, want its answer", st)
	}
}
