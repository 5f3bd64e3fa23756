package queue

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type testBundle struct {
	s     *Store
	clock *clock
	path  string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	c := &clock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "queue.db")
	s, err := Open(t.Context(), path, Options{Now: c.Now})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return &testBundle{s: s, clock: c, path: path}
}

func mustEnqueue(t *testing.T, s *Store, jobs ...NewJob) []int64 {
	t.Helper()
	ids, err := s.Enqueue(t.Context(), jobs...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return ids
}

func mustClaim(t *testing.T, s *Store, gpu string) *Lease {
	t.Helper()
	l, err := s.Claim(t.Context(), ClaimRequest{GPUType: gpu, Boot: "boot-a", TTL: time.Minute, AgePerSecond: 0})
	if err != nil {
		t.Fatalf("Claim(%s): %v", gpu, err)
	}
	return l
}

func TestStore_ClaimOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	// alice has used an hour of GPU time, bob none.
	mustEnqueue(t, b.s, NewJob{User: "alice", GPUType: "cpu", Payload: []byte("warm")})
	l := mustClaim(t, b.s, "cpu")
	if err := b.s.Finish(ctx, l, Succeeded, time.Hour, ""); err != nil {
		t.Fatal(err)
	}
	ranked := mustEnqueue(t, b.s, NewJob{Class: ClassRanked, User: "bob", GPUType: "cpu"})[0]
	b.clock.Add(time.Second)
	aliceTest := mustEnqueue(t, b.s, NewJob{User: "alice", GPUType: "cpu"})[0]
	b.clock.Add(time.Second)
	bobTest := mustEnqueue(t, b.s, NewJob{User: "bob", GPUType: "cpu"})[0]
	mustEnqueue(t, b.s, NewJob{User: "carol", GPUType: "h200"})

	// Test class first; within it bob (no usage) before alice although
	// alice queued first; the ranked job last; the h200 job never.
	want := []int64{bobTest, aliceTest, ranked}
	for i, w := range want {
		got := mustClaim(t, b.s, "cpu")
		if got.ID != w {
			t.Fatalf("claim %d = job %d, want %d", i, got.ID, w)
		}
	}
	if _, err := b.s.Claim(ctx, ClaimRequest{GPUType: "cpu", Boot: "boot-a", TTL: time.Minute, AgePerSecond: 0}); !errors.Is(err, ErrNoJob) {
		t.Fatalf("Claim on an empty cpu queue: err = %v, want ErrNoJob", err)
	}
}

func TestStore_Ageing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	mustEnqueue(t, b.s, NewJob{User: "heavy", GPUType: "cpu"})
	if err := b.s.Finish(ctx, mustClaim(t, b.s, "cpu"), Succeeded, 10*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	old := mustEnqueue(t, b.s, NewJob{User: "heavy", GPUType: "cpu"})[0]
	b.clock.Add(20 * time.Second)
	mustEnqueue(t, b.s, NewJob{User: "light", GPUType: "cpu"})
	// heavy's 10 s of usage less 20 s waited at 1000 ms/s puts its job ahead.
	l, err := b.s.Claim(ctx, ClaimRequest{GPUType: "cpu", Boot: "boot-a", TTL: time.Minute, AgePerSecond: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != old {
		t.Fatalf("with ageing, claim = job %d (%s), want the heavy user's old job %d", l.ID, l.User, old)
	}
}

func TestStore_Fencing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	id := mustEnqueue(t, b.s, NewJob{User: "u", GPUType: "cpu"})[0]
	first := mustClaim(t, b.s, "cpu")
	if err := b.s.Start(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The lease expires; the reaper requeues; another worker claims.
	b.clock.Add(2 * time.Minute)
	if n, err := b.s.Reap(ctx, "boot-a"); err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v; want 1, nil", n, err)
	}
	second := mustClaim(t, b.s, "cpu")
	if second.ID != id || second.Attempts != 2 {
		t.Fatalf("reclaimed job %d attempt %d, want job %d attempt 2", second.ID, second.Attempts, id)
	}
	// The first holder wakes up: every update it tries is refused.
	if err := b.s.Heartbeat(ctx, first, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("stale Heartbeat: err = %v, want ErrLeaseLost", err)
	}
	if err := b.s.Finish(ctx, first, Succeeded, time.Second, ""); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("stale Finish: err = %v, want ErrLeaseLost", err)
	}
	if err := b.s.Finish(ctx, second, Failed, time.Second, "wrong answer"); err != nil {
		t.Fatalf("Finish by the holder: %v", err)
	}
	j, err := b.s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != Failed || j.Error != "wrong answer" {
		t.Fatalf("job = %s %q, want failed \"wrong answer\"", j.State, j.Error)
	}
}

func TestStore_RecoverEarlierBoot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	ids := mustEnqueue(t, b.s, NewJob{User: "u", GPUType: "cpu"}, NewJob{User: "u", GPUType: "cpu", MaxAttempts: 1})
	for range ids {
		if _, err := b.s.Claim(ctx, ClaimRequest{GPUType: "cpu", Boot: "boot-old", TTL: time.Hour, AgePerSecond: 0}); err != nil {
			t.Fatal(err)
		}
	}
	// The daemon died; the database is reopened by a new boot.
	b.s.Close()
	s, err := Open(ctx, b.path, Options{Now: b.clock.Now})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if n, err := s.Reap(ctx, "boot-new"); err != nil || n != 2 {
		t.Fatalf("Reap = %d, %v; want 2, nil", n, err)
	}
	want := map[int64]State{ids[0]: Queued, ids[1]: Failed}
	for id, st := range want {
		j, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != st {
			t.Errorf("job %d after recovery = %s, want %s", id, j.State, st)
		}
	}
}

func TestStore_RetryAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	id := mustEnqueue(t, b.s, NewJob{User: "u", GPUType: "cpu", MaxAttempts: 2})[0]
	l := mustClaim(t, b.s, "cpu")
	requeued, err := b.s.Retry(ctx, l, 10*time.Second, "sandbox error")
	if err != nil || !requeued {
		t.Fatalf("Retry = %v, %v; want true, nil", requeued, err)
	}
	if _, err := b.s.Claim(ctx, ClaimRequest{GPUType: "cpu", Boot: "boot-a", TTL: time.Minute, AgePerSecond: 0}); !errors.Is(err, ErrNoJob) {
		t.Fatalf("Claim before the retry delay: err = %v, want ErrNoJob", err)
	}
	b.clock.Add(11 * time.Second)
	l = mustClaim(t, b.s, "cpu")
	if requeued, err := b.s.Retry(ctx, l, 0, "sandbox error"); err != nil || requeued {
		t.Fatalf("Retry on the last attempt = %v, %v; want false, nil", requeued, err)
	}
	if j, _ := b.s.Get(ctx, id); j.State != Failed {
		t.Fatalf("job after its last attempt = %s, want failed", j.State)
	}

	id2 := mustEnqueue(t, b.s, NewJob{User: "u", GPUType: "cpu"})[0]
	held := mustClaim(t, b.s, "cpu")
	if err := b.s.Cancel(ctx, id2); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Cancel(ctx, id2); err != nil {
		t.Fatalf("second Cancel: %v, want nil (idempotent)", err)
	}
	if err := b.s.Heartbeat(ctx, held, time.Minute); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Heartbeat after Cancel: err = %v, want ErrLeaseLost", err)
	}
	if err := b.s.Cancel(ctx, 9999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Cancel(9999): err = %v, want ErrNotFound", err)
	}
}

// TestStore_ConcurrentClaims: many workers claim at once through separate
// Stores on one file (as after a restart overlap); every job is leased
// exactly once.
func TestStore_ConcurrentClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const n = 200
	jobs := make([]NewJob, n)
	for i := range jobs {
		jobs[i] = NewJob{User: string(rune('a' + i%20)), GPUType: "cpu"}
	}
	mustEnqueue(t, b.s, jobs...)
	other, err := Open(ctx, b.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		s := b.s
		if w%2 == 1 {
			s = other
		}
		wg.Go(func() {
			for {
				l, err := s.Claim(context.Background(), ClaimRequest{GPUType: "cpu", Boot: "boot-a", TTL: time.Hour, AgePerSecond: 0})
				if errors.Is(err, ErrNoJob) {
					return
				}
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				mu.Lock()
				seen[l.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("job %d claimed %d times", id, c)
		}
	}
}

func TestOpen_RefusesNewerSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.s.db.Exec("UPDATE schema_versions SET version = 999 WHERE component = 'queue'"); err != nil {
		t.Fatal(err)
	}
	b.s.Close()
	_, err := Open(t.Context(), b.path, Options{})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: err = %v, want ErrSchemaTooNew", err)
	}
}

// TestMigrate_Components: two components share one file, each with its own
// version; a file of the one-component era (its version in user_version)
// is adopted by the component whose tables it holds, not by the others.
func TestMigrate_Components(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "shared.db")
	db, err := OpenDB(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A file as the one-component binary left it: its tables and its
	// version in user_version.
	other := fstest.MapFS{
		"m/0001_notes.sql": {Data: []byte("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);")},
		"m/0002_tags.sql":  {Data: []byte("ALTER TABLE notes ADD COLUMN tag TEXT;")},
		"m/0003_more.sql":  {Data: []byte("CREATE TABLE more (id INTEGER PRIMARY KEY);")},
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); ALTER TABLE notes ADD COLUMN tag TEXT; PRAGMA user_version = 2"); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, db, JobTables, Migrations{Component: "notes", FS: other, Dir: "m", Legacy: "notes"}); err != nil {
		t.Fatalf("Migrate(queue, notes) on a file of the notes era: %v", err)
	}
	if _, err := New(db, Options{}).Depth(ctx); err != nil {
		t.Fatalf("the queue after the migration: %v", err)
	}
	got := map[string]int{}
	rows, err := db.QueryContext(ctx, "SELECT component, version FROM schema_versions")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			t.Fatal(err)
		}
		got[c] = v
	}
	rows.Close()
	want := map[string]int{"queue": 3, "notes": 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schema versions (-want +got):\n%s", diff)
	}
	// A binary of the one-component era reads user_version as its own
	// version, and must find it newer than anything it knows.
	var uv int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&uv); err != nil || uv < 1000 {
		t.Errorf("user_version after the migrations = %d (%v); want at least 1000, so old binaries refuse the file", uv, err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name IN ('jobs', 'more')").Scan(&n); err != nil || n != 2 {
		t.Errorf("tables jobs and more: %d of 2 (%v); want the queue's made and notes' third migration applied", n, err)
	}
}

func TestEnqueue_AllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.s.Enqueue(t.Context(), NewJob{User: "u", GPUType: "cpu"}, NewJob{User: "", GPUType: "cpu"})
	if err == nil {
		t.Fatal("Enqueue with a job lacking a user: err = nil")
	}
	d, err := b.s.Depth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d["cpu"] != 0 {
		t.Fatalf("depth after a refused batch = %d, want 0", d["cpu"])
	}
}

func TestEnqueue_KeyIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := mustEnqueue(t, b.s, NewJob{User: "ann", GPUType: "cpu", Key: "run:1"}, NewJob{User: "ann", GPUType: "cpu", Key: "run:2"})
	again := mustEnqueue(t, b.s, NewJob{User: "ann", GPUType: "cpu", Key: "run:2"}, NewJob{User: "ann", GPUType: "cpu", Key: "run:3"})
	if again[0] != first[1] {
		t.Errorf("Enqueue(run:2) again = id %d, want the stored %d", again[0], first[1])
	}
	d, err := b.s.Depth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d["cpu"] != 3 {
		t.Errorf("Depth = %v, want 3 jobs on cpu (one per key)", d)
	}
	j, err := b.s.Get(t.Context(), again[1])
	if err != nil || j.Key != "run:3" {
		t.Errorf("Get(%d) = %+v, %v; want key run:3", again[1], j, err)
	}
}

func TestStore_RunningCapPerUser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	mustEnqueue(t, b.s, NewJob{User: "ann", GPUType: "cpu"}, NewJob{User: "ann", GPUType: "cpu"}, NewJob{User: "bob", GPUType: "cpu"})
	req := ClaimRequest{GPUType: "cpu", Boot: "boot-a", TTL: time.Minute, MaxRunningPerUser: 1}
	var users []string
	for {
		l, err := b.s.Claim(ctx, req)
		if errors.Is(err, ErrNoJob) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, l.User)
	}
	if len(users) != 2 || users[0] == users[1] {
		t.Errorf("claims with a cap of 1 running per user went to %v, want ann and bob once each", users)
	}
	load, err := b.s.UserLoad(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if load != (Load{Queued: 1, Running: 1}) {
		t.Errorf("UserLoad(ann) = %+v, want 1 queued and 1 running", load)
	}
}

func TestStore_ReleaseKeepsAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	mustEnqueue(t, b.s, NewJob{User: "ann", GPUType: "cpu", MaxAttempts: 1})
	for range 3 { // more releases than attempts: none of them counts
		l := mustClaim(t, b.s, "cpu")
		if err := b.s.Start(ctx, l); err != nil {
			t.Fatal(err)
		}
		if err := b.s.Release(ctx, l, "shutting down"); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if err := b.s.Heartbeat(ctx, l, time.Minute); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Heartbeat after Release = %v, want ErrLeaseLost", err)
		}
	}
	l := mustClaim(t, b.s, "cpu")
	if l.Attempts != 1 {
		t.Errorf("attempts after three releases = %d, want 1 (this claim only)", l.Attempts)
	}
}

func TestStore_PositionAndMeanRunTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	// ann has used a minute of GPU time; bob none, so bob's jobs go first.
	mustEnqueue(t, b.s, NewJob{User: "ann", GPUType: "cpu"})
	l := mustClaim(t, b.s, "cpu")
	if err := b.s.Start(ctx, l); err != nil {
		t.Fatal(err)
	}
	b.clock.Add(2 * time.Second)
	if err := b.s.Finish(ctx, l, Succeeded, time.Minute, ""); err != nil {
		t.Fatal(err)
	}
	r := ClassRanked
	ids := mustEnqueue(t, b.s, NewJob{Class: r, User: "ann", GPUType: "cpu"}, NewJob{Class: r, User: "bob", GPUType: "cpu"},
		NewJob{Class: r, User: "bob", GPUType: "cpu"}, NewJob{Class: r, User: "ann", GPUType: "gpu"}, NewJob{Class: ClassTest, User: "ann", GPUType: "cpu"})
	// Claim order on cpu: the test-class job, then bob, bob, then ann's ranked one.
	want := map[int64]int{ids[4]: 0, ids[1]: 1, ids[2]: 2, ids[0]: 3, ids[3]: 0}
	for id, w := range want {
		pos, ok, err := b.s.Position(ctx, id, 0)
		if err != nil || !ok || pos != w {
			t.Errorf("Position(job %d) = %d, %v, %v; want %d", id, pos, ok, err, w)
		}
	}
	if _, ok, _ := b.s.Position(ctx, l.ID, 0); ok {
		t.Errorf("Position(finished job) has a position, want none")
	}
	// Claims must agree with Position.
	for _, id := range []int64{ids[4], ids[1], ids[2], ids[0]} {
		if got := mustClaim(t, b.s, "cpu"); got.ID != id {
			t.Errorf("Claim = job %d, want %d as Position said", got.ID, id)
		}
	}
	mean, err := b.s.MeanRunTime(ctx, "cpu", 10)
	if err != nil || mean != 2*time.Second {
		t.Errorf("MeanRunTime(cpu) = %v, %v; want 2s", mean, err)
	}
}

// TestOpenDB_OwnerOnly: the database and the files SQLite makes beside it
// are 0600 whatever the umask, and a file left wider is narrowed.
func TestOpenDB_OwnerOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kernelbox.db")
	if err := os.WriteFile(path+"-wal", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path+"-wal", 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	db, err := OpenDB(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE t (x)"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "-wal", "-shm"} {
		st, err := os.Stat(path + name)
		if err != nil {
			t.Errorf("stat %s: %v", path+name, err)
		} else if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("mode of kernelbox.db%s = %04o, want 0600", name, got)
		}
	}
}
