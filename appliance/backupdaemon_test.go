package appliance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// TestDaemon_BackupRestore: the real daemon, the real sandbox, the CLI.
// A backup taken while contestants submit, restored into a fresh data
// directory, starts a daemon that has everything committed before the
// backup (users, working tokens, the leaderboard and its ranking,
// submissions with code and results), a sound database, and hands out
// only ids above the backup's.
func TestDaemon_BackupRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	ann, annToken := td.user("ann")
	code, err := os.ReadFile(quickSolution("correct/double.py"))
	if err != nil {
		t.Fatal(err)
	}
	var before []*api.SubmissionView
	for _, mode := range []string{"leaderboard", "test"} {
		sub, err := ann.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", GPU: "cpu", Mode: mode, Code: code})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ann.Wait(ctx, sub.ID, nil); err != nil {
			t.Fatal(err)
		}
		view, err := ann.Submission(ctx, sub.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, view)
	}

	// Load: submissions keep coming while the backup is taken; the box
	// may refuse some (its queue cap), never fail.
	bob, _ := td.user("bob")
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var loadErr error
	var mu sync.Mutex
	for range 2 {
		wg.Go(func() {
			for loadCtx.Err() == nil {
				_, err := bob.Submit(loadCtx, api.SubmitRequest{Leaderboard: "quick", GPU: "cpu", Mode: "test", Code: code})
				if err != nil && api.ErrorCode(err) != api.CodeExhausted {
					if loadCtx.Err() == nil {
						mu.Lock()
						loadErr = err
						mu.Unlock()
					}
					return
				}
			}
		})
	}
	file := filepath.Join(t.TempDir(), "box.tar.gz")
	out, errOut, rc := td.cli(td.token, "admin", "backup", file)
	stop()
	wg.Wait()
	if rc != 0 {
		t.Fatalf("admin backup = exit %d\n%s%s", rc, out, errOut)
	}
	if loadErr != nil {
		t.Errorf("a submission under load: %v", loadErr)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := VerifyBackup(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	dir2 := filepath.Join(t.TempDir(), "restored")
	if out, errOut, rc := runCLI(t, "admin", "restore", file, "--data", dir2); rc != 0 {
		t.Fatalf("admin restore = exit %d\n%s%s", rc, out, errOut)
	}
	if _, err := store.Inspect(ctx, filepath.Join(dir2, "kernelbox.db")); err != nil {
		t.Errorf("the restored database: %v", err)
	}
	r := startDaemon(t, dir2, nil) // no --accept-store-loss
	ann2, err := api.NewClient(r.server, annToken)
	if err != nil {
		t.Fatal(err)
	}
	defer ann2.Close()
	if me, err := ann2.Me(ctx); err != nil || me.Name != "ann" {
		t.Fatalf("ann's token on the restored box: %v, %v", me, err)
	}
	users, err := r.admin.Users(ctx)
	if err != nil || len(users) != 3 {
		t.Errorf("users on the restored box = %v, %v; want admin, ann and bob", users, err)
	}
	for _, want := range before {
		got, err := ann2.Submission(ctx, want.ID, true)
		if err != nil {
			t.Fatalf("submission %d: %v", want.ID, err)
		}
		if got.Code != want.Code || got.Status != want.Status || got.Passed != want.Passed || len(got.Runs) != len(want.Runs) {
			t.Errorf("restored submission %d = %+v; before the backup it was %+v", want.ID, got.Submission, want.Submission)
		}
	}
	rk, err := ann2.Ranking(ctx, "quick", "cpu")
	if err != nil || len(rk.Rankings) == 0 || len(rk.Rankings[0].Rows) == 0 {
		t.Errorf("quick's ranking on the restored box = %+v, %v; want ann's entry", rk, err)
	}
	sub, err := ann2.Submit(ctx, api.SubmitRequest{Leaderboard: "quick", GPU: "cpu", Mode: "test", Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if sub.ID <= m.Marks.Submissions {
		t.Errorf("the restored box handed out submission id %d; ids up to %d were handed out before", sub.ID, m.Marks.Submissions)
	}
	if _, err := ann2.Wait(ctx, sub.ID, nil); err != nil {
		t.Errorf("a submission on the restored box: %v", err)
	}

	out, errOut, rc = r.cli(r.token, "admin", "export", "--format", "parquet", "--anonymise", t.TempDir())
	if rc != 0 || !strings.Contains(out, "exported") {
		t.Errorf("admin export on the restored box = exit %d\n%s%s", rc, out, errOut)
	}
}
