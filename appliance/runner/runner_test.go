package runner

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/policies"
	"kernelbox/problems"
	"kernelbox/queue"
	"kernelbox/sandbox/sandboxtest"
)

// fakeQueue hands out its leases once each, to the first claim with room
// for them, and tells the test how each job ended.
type fakeQueue struct {
	mu     sync.Mutex
	leases []*queue.Lease
	ended  chan string // "finished <state> <why>", "retried <why>", "released"
}

func (q *fakeQueue) Claim(_ context.Context, r queue.ClaimRequest) (*queue.Lease, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.leases) == 0 || q.leases[0].GPUs > r.Free {
		return nil, queue.ErrNoJob
	}
	l := q.leases[0]
	q.leases = q.leases[1:]
	return l, nil
}

func (q *fakeQueue) Start(context.Context, *queue.Lease) error                    { return nil }
func (q *fakeQueue) Heartbeat(context.Context, *queue.Lease, time.Duration) error { return nil }
func (q *fakeQueue) Reap(context.Context, string) (int, error)                    { return 0, nil }

func (q *fakeQueue) Finish(_ context.Context, _ *queue.Lease, st queue.State, _ time.Duration, why string) error {
	q.ended <- strings.TrimSpace("finished " + string(st) + " " + why)
	return nil
}

// Retry says no attempts are left: the runner then ends the run itself.
func (q *fakeQueue) Retry(_ context.Context, _ *queue.Lease, _ time.Duration, why string) (bool, error) {
	q.ended <- "retried " + why
	return false, nil
}

func (q *fakeQueue) Release(context.Context, *queue.Lease, string) error {
	q.ended <- "released"
	return nil
}

// fakeStore holds one run and keeps the results stored for it.
type fakeStore struct {
	rc      *store.RunContext
	results chan store.RunResult
}

func (s *fakeStore) StartRun(context.Context, int64, string, string) (bool, error) { return true, nil }
func (s *fakeStore) LoadRun(context.Context, int64) (*store.RunContext, error)     { return s.rc, nil }
func (s *fakeStore) AppendEvent(context.Context, int64, api.Payload) error         { return nil }
func (s *fakeStore) DeletedSubmission(context.Context, int64) (bool, error)        { return false, nil }
func (s *fakeStore) Drains(context.Context) (map[string]string, error)             { return nil, nil }
func (s *fakeStore) SetDrain(context.Context, string, string) error                { return nil }

func (s *fakeStore) FinishRun(_ context.Context, _ int64, _ string, res store.RunResult) (*store.Submission, error) {
	s.results <- res
	return &store.Submission{}, nil
}

// passing is what the quick problem's harness writes for its two tests.
const passing = "test-count: 2\ntest.0.spec: n: 3; seed: 1\ntest.0.status: pass\n" +
	"test.1.spec: n: 10; seed: 2\ntest.1.status: pass\ncheck: pass\n"

// TestRunner_OneJob: a runner built from Deps alone, over fakes of the
// queue, the store and the sandbox (no Service, no database), runs a job
// to its end: a run that passes is stored and its job finished, one the
// box could not carry out is ended as the box's error once the queue has
// no attempts left, and a job without a run fails.
func TestRunner_OneJob(t *testing.T) {
	t.Parallel()
	task, err := problems.LoadTask(filepath.Join("..", "testdata", "quick"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(Payload{Run: 7, Submission: 3})
	for _, tt := range []struct {
		name    string
		step    sandboxtest.Step
		payload []byte
		ended   string // the job's end, as fakeQueue tells it
		result  string // the stored status and reason's start; "" for none
	}{
		{"passes", sandboxtest.OK(passing), payload, "finished succeeded", "done"},
		{"the box's failure", sandboxtest.Broken("runc init failed"), payload, "retried", store.RunError + " the box could not run it"},
		{"no run", sandboxtest.OK(passing), []byte(`{}`), "finished failed bad payload", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			q := &fakeQueue{leases: []*queue.Lease{{Job: queue.Job{ID: 1, GPUs: 1, Attempts: 1, Payload: tt.payload}, Token: "tok"}},
				ended: make(chan string, 4)}
			st := &fakeStore{results: make(chan store.RunResult, 2), rc: &store.RunContext{
				Run:         store.RunRecord{Run: api.Run{ID: 7, Mode: string(problems.ModeTest), GPUType: "cpu"}},
				Submission:  &store.Submission{Submission: api.Submission{ID: 3, FileName: "submission.py"}},
				Leaderboard: &store.Leaderboard{}, Code: []byte("def custom_kernel(xs):\n    return xs\n")}}
			fake := &sandboxtest.Runtime{Script: []sandboxtest.Step{tt.step}}
			r := New(Deps{
				Config: Config{Boot: "boot-test", LeaseTTL: time.Minute, WorkRoot: filepath.Join(dir, "work"),
					ProfilesDir: filepath.Join(dir, "profiles"), IdlePoll: 20 * time.Millisecond},
				Slots: CPUSlots(1, nil), Queue: q, Store: st,
				TasksFunc:     func(*store.Leaderboard) (*problems.Task, error) { return task, nil },
				ReconcileFunc: func(context.Context) error { return nil },
				Launch: func(_ Gang, mode problems.Mode) (problems.Launcher, []string) {
					return NewSandboxLauncher(fake, LauncherSpec{Limits: policies.ForMode(string(mode), 0)})
				},
				Python: &problems.Interpreter{Path: "/usr/bin/python3", Device: "cpu"},
			})
			if err := r.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Stop(time.Second) })
			select {
			case got := <-q.ended:
				if !strings.HasPrefix(got, tt.ended) {
					t.Errorf("the job ended %q, want %q", got, tt.ended)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the job did not end")
			}
			if tt.result == "" {
				return
			}
			select {
			case res := <-st.results:
				if got := res.Status + " " + res.Reason; !strings.HasPrefix(got, tt.result) {
					t.Errorf("stored %q, want it to begin %q", got, tt.result)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no result was stored")
			}
		})
	}
}
