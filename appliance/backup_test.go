package appliance

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// dataBundle is a service and its API over a real store in a data
// directory, the quick problem loaded, and no runner: the tests store and
// finish submissions themselves. No root, no PyTorch.
type dataBundle struct {
	t      *testing.T
	dir    string
	st     *store.Store
	svc    *Service
	server string
	admin  *api.Client
	token  string // the admin's
	ann    *store.User
	bob    *store.User
	bobKey string
	lb     *store.Leaderboard
}

func newDataBundle(t *testing.T, dir string) *dataBundle {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(dir, "kernelbox.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Version = dir, "test"
	svc := newService(cfg, st, st.Queue(), testLogger(t), time.Now, "boot-test")
	if svc.marks, err = checkStore(ctx, dir, st, false, testLogger(t)); err != nil {
		t.Fatal(err)
	}
	b := &dataBundle{t: t, dir: dir, st: st, svc: svc}
	if _, err := os.Stat(AdminTokenFile(dir)); err == nil { // a restored directory: its users are there
		b.open()
		return b
	}
	quick, err := filepath.Abs(filepath.Join("testdata", "quick"))
	if err != nil {
		t.Fatal(err)
	}
	// Under the data directory, as a loaded set is: the backup holds it.
	into := filepath.Join(dir, "problems", "uploads", "quick")
	if err := os.CopyFS(into, os.DirFS(quick)); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.loadProblemSet(ctx, into, api.ProblemLoad{Name: "quick"}, store.LoadOptions{Source: store.SourceUpload, Replace: true}); err != nil {
		t.Fatal(err)
	}
	_, admin, err := st.CreateUser(ctx, "root", api.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(AdminTokenFile(dir), []byte(admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateUser(ctx, "ann", api.RoleContestant); err != nil {
		t.Fatal(err)
	}
	if _, b.bobKey, err = st.CreateUser(ctx, "bob", api.RoleContestant); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(profilesDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(profilesDir(dir), "run-1.ncu-rep"), []byte("a report"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.open()
	return b
}

// open serves the API and looks up what the tests use.
func (b *dataBundle) open() {
	t, ctx := b.t, b.t.Context()
	a, err := newAPI(b.svc, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	b.server = srv.URL
	tok, err := os.ReadFile(AdminTokenFile(b.dir))
	if err != nil {
		t.Fatal(err)
	}
	b.token = strings.TrimSpace(string(tok))
	if b.admin, err = api.NewClient(srv.URL, b.token); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.admin.Close)
	if b.ann, err = b.st.User(ctx, "ann"); err != nil {
		t.Fatal(err)
	}
	if b.bob, err = b.st.User(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if b.lb, err = b.st.Leaderboard(ctx, "quick"); err != nil {
		t.Fatal(err)
	}
}

// submit stores a submission of u's and, unless open, ends its runs with
// what result says; the marks note it, as the service's submit does.
func (b *dataBundle) submit(ctx context.Context, u *store.User, mode, code string, open bool, result func(api.Run) store.RunResult) (*store.Submission, error) {
	cat := api.CategoryTest
	if mode == "leaderboard" {
		cat = api.CategoryRanked
	}
	sub, err := b.st.CreateSubmission(ctx, store.NewSubmission{Leaderboard: b.lb, User: u, FileName: "submission.py", Code: []byte(code),
		GPUType: "cpu", Mode: mode, Category: cat, Language: "python", Secret: mode == "leaderboard"})
	if err != nil {
		return nil, err
	}
	if err := b.svc.marks.note(sub.ID, sub.Runs[len(sub.Runs)-1].ID); err != nil {
		return nil, err
	}
	if open {
		return sub, nil
	}
	for _, r := range sub.Runs {
		if _, err := b.st.StartRun(ctx, r.ID, "lease", "cpu:0"); err != nil {
			return nil, err
		}
		if _, err := b.st.FinishRun(ctx, r.ID, "lease", result(r)); err != nil {
			return nil, err
		}
	}
	return b.st.Submission(ctx, sub.ID)
}

// pass is a passing run scoring score with two benchmarks.
func pass(score float64) func(api.Run) store.RunResult {
	return func(api.Run) store.RunResult {
		rep := fmt.Sprintf(`{"passed":true,"benchmarks":[{"spec":"n: 3","mean_ns":%g,"err_ns":2},{"spec":"n: 10","mean_ns":%g,"err_ns":3}]}`, score*1e9, score*2e9)
		return store.RunResult{Status: api.StatusDone, Passed: true, Score: &score, Report: []byte(rep)}
	}
}

func fail(api.Run) store.RunResult {
	return store.RunResult{Status: api.StatusDone, Reason: "test 1 wrong", Report: []byte(`{"passed":false,"flags":[{"rule":"too_fast"}]}`)}
}

// TestBackup_UnderLoad: a backup taken while submissions pour in holds
// everything committed before it; restored into a fresh directory, the
// service starts on it without --accept-store-loss, tokens work, the
// database is sound, and no id handed out before the backup ended is
// handed out again.
func TestBackup_UnderLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := newDataBundle(t, t.TempDir())
	var before []*store.Submission
	for i, u := range []*store.User{b.ann, b.bob, b.ann} {
		sub, err := b.submit(ctx, u, "leaderboard", fmt.Sprintf("# %d\n", i), false, pass(float64(i+1)/1000))
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, sub)
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var loadErr error
	var loadMu sync.Mutex
	for w := range 3 {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				_, err := b.submit(loadCtx, b.bob, "test", fmt.Sprintf("# load %d %d\n", w, i), i%2 == 0, fail)
				if err != nil && loadCtx.Err() == nil {
					loadMu.Lock()
					loadErr = err
					loadMu.Unlock()
					return
				}
			}
		})
	}
	file := filepath.Join(t.TempDir(), "box.tar.gz")
	out, errOut, code := runCLI(t, "admin", "backup", file, "--server", b.server, "--token", b.token, "--client-config", filepath.Join(b.dir, "client.json"))
	stopLoad()
	wg.Wait()
	if code != 0 {
		t.Fatalf("admin backup = exit %d\n%s%s", code, out, errOut)
	}
	if loadErr != nil {
		t.Fatalf("a submission under load: %v", loadErr)
	}
	t.Logf("admin backup:\n%s", out)
	if !strings.Contains(out, "every checksum verified") {
		t.Errorf("admin backup printed %q; want what it holds", out)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := VerifyBackup(f)
	f.Close()
	if err != nil {
		t.Fatalf("VerifyBackup(the CLI's file) = %v", err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup file's mode is %v; want 0600 (it holds every token's hash)", fi.Mode().Perm())
	}
	// What the backup's end had handed out: a fresh directory knows no
	// later ids (restored over this one, TestRestore_Refusals, it does).
	handedOut := m.Marks
	if last := before[len(before)-1]; handedOut.Submissions < last.ID || handedOut.Runs < last.Runs[len(last.Runs)-1].ID {
		t.Errorf("the backup's marks %+v miss submission %d, committed before it", handedOut, last.ID)
	}

	// Into the data directory the daemon's config names (no --data).
	dir2 := filepath.Join(t.TempDir(), "data")
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgFile, []byte("data: "+dir2+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runCLI(t, "admin", "restore", file, "--config", cfgFile)
	if code != 0 || !strings.Contains(out, "into "+dir2) {
		t.Fatalf("admin restore = exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("admin restore:\n%s", out)
	sum, err := store.Inspect(ctx, filepath.Join(dir2, "kernelbox.db"))
	if err != nil {
		t.Fatalf("the restored database: %v", err)
	}
	if sum.Count != m.Database.Count || sum.StoreID != m.Database.StoreID {
		t.Errorf("restored %+v; the backup's manifest says %+v", sum, m.Database)
	}

	r := newDataBundle(t, dir2) // checkStore without accept: it must take the directory as it is
	for _, want := range before {
		got, err := r.st.Submission(ctx, want.ID)
		if err != nil {
			t.Fatalf("submission %d committed before the backup: %v", want.ID, err)
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(store.Submission{})); diff != "" {
			t.Errorf("restored submission %d differs (-before +restored):\n%s", want.ID, diff)
		}
		if code, err := r.st.Code(ctx, got.SHA256); err != nil || string(code) == "" {
			t.Errorf("code of submission %d: %q, %v", want.ID, code, err)
		}
	}
	bob, err := api.NewClient(r.server, b.bobKey)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if me, err := bob.Me(ctx); err != nil || me.Name != "bob" {
		t.Errorf("bob's token on the restored box: %v, %v", me, err)
	}
	rk, err := r.admin.Ranking(ctx, "quick", "cpu")
	if err != nil || len(rk.Rankings) != 1 || len(rk.Rankings[0].Rows) != 2 {
		t.Errorf("quick's ranking on the restored box = %+v, %v; want ann's and bob's entries", rk, err)
	}
	if _, err := os.Stat(filepath.Join(profilesDir(dir2), "run-1.ncu-rep")); err != nil {
		t.Errorf("the profile: %v", err)
	}
	sub, err := r.submit(ctx, r.ann, "test", "# after\n", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sub.ID <= handedOut.Submissions || sub.Runs[0].ID <= handedOut.Runs {
		t.Errorf("after the restore a submission got id %d (run %d); ids up to %d (runs %d) were handed out before the backup ended",
			sub.ID, sub.Runs[0].ID, handedOut.Submissions, handedOut.Runs)
	}
}

// backupBytes takes a backup of a small box.
func backupBytes(t *testing.T) []byte {
	t.Helper()
	b := newDataBundle(t, t.TempDir())
	if _, err := b.submit(t.Context(), b.ann, "leaderboard", "x = 1\n", false, pass(0.001)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := b.admin.Backup(t.Context(), &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// retar rewrites a backup, each entry through edit (nil drops it).
func retar(t *testing.T, archive []byte, edit func(*tar.Header, []byte) (*tar.Header, []byte)) []byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hdr, body = edit(hdr, body)
		if hdr == nil {
			continue
		}
		hdr.Size = int64(len(body))
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	zw.Close()
	return out.Bytes()
}

// resigned damages a page in the middle of the backup's database and
// redoes its checksum in the manifest: only the database's own check can
// tell.
func resigned(t *testing.T, archive []byte) []byte {
	t.Helper()
	var sum api.BackupFile
	return retar(t, archive, func(h *tar.Header, b []byte) (*tar.Header, []byte) {
		switch h.Name {
		case api.BackupDB:
			b = bytes.Clone(b)
			for i := 4096 * 2; i < 4096*3 && i < len(b); i++ {
				b[i] ^= 0x5a
			}
			h := sha256.Sum256(b)
			sum = api.BackupFile{Name: api.BackupDB, Size: int64(len(b)), SHA256: hex.EncodeToString(h[:])}
		case api.BackupManifest:
			var m api.Manifest
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			for i := range m.Files {
				if m.Files[i].Name == api.BackupDB {
					m.Files[i] = sum
				}
			}
			b, _ = json.Marshal(m)
		}
		return h, b
	})
}

func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

// TestRestore_BadArchives: an archive that is not a whole, sound backup
// is refused with an error saying what is wrong, and the data directory
// is left as it was.
func TestRestore_BadArchives(t *testing.T) {
	t.Parallel()
	good := backupBytes(t)
	tests := []struct {
		name    string
		archive []byte
		want    string
	}{
		{"truncated", good[:len(good)/2], "cut short"},
		{"not gzip", []byte("hello, I am not a backup\n"), "not a gzip file"},
		{"not a tar", gzipped(bytes.Repeat([]byte("garbage "), 200)), "not a tar archive"},
		{"wrong checksum", retar(t, good, func(h *tar.Header, b []byte) (*tar.Header, []byte) {
			if h.Name == "admin-token" {
				b = []byte("kb_forged\n")
			}
			return h, b
		}), "does not match its checksum"},
		{"no manifest", retar(t, good, func(h *tar.Header, b []byte) (*tar.Header, []byte) {
			if h.Name == api.BackupManifest {
				return nil, nil
			}
			return h, b
		}), "no manifest"},
		{"a file outside the manifest", retar(t, good, func(h *tar.Header, b []byte) (*tar.Header, []byte) {
			if h.Name == "admin-token" {
				h.Name = "../../etc/evil"
			}
			return h, b
		}), "not a clean relative path"},
		{"a damaged database", retar(t, good, func(h *tar.Header, b []byte) (*tar.Header, []byte) {
			if h.Name == api.BackupDB {
				b = bytes.Repeat([]byte{0x42}, len(b))
			}
			return h, b
		}), "does not match its checksum"},
		{"a damaged database, checksums redone", resigned(t, good), "not a sound kernelbox database"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			file := filepath.Join(t.TempDir(), "backup.tar.gz")
			if err := os.WriteFile(file, tt.archive, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Restore(t.Context(), file, dir, RestoreOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Restore(%s) = %v; want an error saying %q", tt.name, err, tt.want)
			}
			if !errors.Is(err, api.ErrBadBackup) {
				t.Errorf("Restore(%s) = %v; want it to wrap api.ErrBadBackup", tt.name, err)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if e.Name() != lockFile {
					t.Errorf("after a refused restore the directory holds %s", e.Name())
				}
			}
		})
	}
}

// TestRestore_Refusals: a restore is refused while a daemon holds the
// directory, and over a newer database or another box's unless forced.
func TestRestore_Refusals(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	b := newDataBundle(t, dir)
	if _, err := b.submit(ctx, b.ann, "test", "x = 1\n", false, pass(0.001)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.tar.gz")
	var buf bytes.Buffer
	if err := b.admin.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	newer, err := b.submit(ctx, b.bob, "test", "x = 2\n", false, fail)
	if err != nil {
		t.Fatal(err)
	}

	lock, err := lockDataDir(dir) // what a running daemon holds
	if err != nil {
		t.Fatal(err)
	}
	_, err = Restore(ctx, file, dir, RestoreOptions{Force: true})
	lock.Close()
	if err == nil || !strings.Contains(err.Error(), "in use by") {
		t.Errorf("Restore(a directory a daemon holds) = %v; want a refusal naming the holder", err)
	}
	b.st.Close() // the daemon stops

	if _, err := Restore(ctx, file, dir, RestoreOptions{}); err == nil || !strings.Contains(err.Error(), "newer than the backup") {
		t.Errorf("Restore(over a newer database) = %v; want a refusal", err)
	}
	other := t.TempDir()
	newDataBundle(t, other)
	if _, err := Restore(ctx, file, other, RestoreOptions{}); err == nil || !strings.Contains(err.Error(), "another database") {
		t.Errorf("Restore(over another box's database) = %v; want a refusal", err)
	}

	res, err := Restore(ctx, file, dir, RestoreOptions{Force: true})
	if err != nil {
		t.Fatalf("Restore(--force) = %v", err)
	}
	if res.LostSubmissions != [2]int64{newer.ID, newer.ID} {
		t.Errorf("Restore(--force) lost submissions %v; want %d, made after the backup", res.LostSubmissions, newer.ID)
	}
	r := newDataBundle(t, dir)
	if _, err := r.st.Submission(ctx, newer.ID); api.ErrorCode(err) != api.CodeNotFound {
		t.Errorf("submission %d after going back to the backup: %v; want it gone", newer.ID, err)
	}
	sub, err := r.submit(ctx, r.ann, "test", "x = 3\n", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sub.ID <= newer.ID {
		t.Errorf("after the restore a submission got id %d; %d was handed out before", sub.ID, newer.ID)
	}
}

// TestRestore_Interrupted: a directory whose restore was cut short in the
// swap is refused by the daemon's store check, and a second restore
// finishes it.
func TestRestore_Interrupted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	file := filepath.Join(t.TempDir(), "backup.tar.gz")
	if err := os.WriteFile(file, backupBytes(t), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Restore(ctx, file, dir, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	// Cut short after the first step of the swap: the record says so.
	sm := &storeMarks{path: filepath.Join(dir, marksFile), last: store.Marks{StoreID: restoreIncomplete, Submissions: 9, Runs: 9}}
	if err := sm.write(); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "kernelbox.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = checkStore(ctx, dir, st, false, testLogger(t))
	st.Close()
	if err == nil || !strings.Contains(err.Error(), restoreIncomplete) {
		t.Errorf("checkStore(a restore cut short) = %v; want a refusal", err)
	}
	if _, err := Restore(ctx, file, dir, RestoreOptions{}); err != nil {
		t.Fatalf("Restore(again) = %v", err)
	}
	st, err = store.Open(ctx, filepath.Join(dir, "kernelbox.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := checkStore(ctx, dir, st, false, testLogger(t)); err != nil {
		t.Errorf("checkStore(after the restore finished) = %v", err)
	}
}

// TestRestore_Modes: restored files are the owner's alone (0600), as the
// daemon keeps them, whatever modes the archive recorded (a backup of a
// daemon started by hand under umask 022 records its database as 0644)
// and whatever the umask of the restore. The umask is the process's, so
// each restore runs in a child process (the command line, as an operator
// runs it) under a shell's umask, not in this one, whose tests run in
// parallel.
func TestRestore_Modes(t *testing.T) {
	t.Parallel()
	wide := retar(t, backupBytes(t), func(h *tar.Header, b []byte) (*tar.Header, []byte) {
		h.Mode = 0o644
		return h, b
	})
	for _, tt := range []struct {
		name         string
		umask        string
		archiveModes int64
	}{
		{"umask 022, archive 0644", "022", 0o644},
		{"umask 000, archive 0666", "000", 0o666},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			archive := wide
			if tt.archiveModes != 0o644 {
				archive = retar(t, wide, func(h *tar.Header, b []byte) (*tar.Header, []byte) {
					h.Mode = tt.archiveModes
					return h, b
				})
			}
			file := filepath.Join(t.TempDir(), "backup.tar.gz")
			if err := os.WriteFile(file, archive, 0o600); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cmd := exec.CommandContext(t.Context(), "/bin/sh", "-c", "umask "+tt.umask+` && exec "$0" "$@"`,
				os.Args[0], "-test.run=^$", "--", "admin", "restore", file, "--data", dir)
			cmd.Env = append(os.Environ(), EnvCLI+"=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("kernelbox admin restore under umask %s: %v\n%s", tt.umask, err, out)
			}
			var files []string
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				fi, err := d.Info()
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				files = append(files, rel)
				if got := fi.Mode().Perm(); got != 0o600 {
					t.Errorf("restored %s under umask %s from an archive saying %#o: mode %#o, want 0600", rel, tt.umask, tt.archiveModes, got)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"kernelbox.db", "admin-token"} {
				if !slices.Contains(files, want) {
					t.Errorf("restored files %v lack %s", files, want)
				}
			}
		})
	}
}

// TestBackup_AdminOnly: an organiser may not take a backup or an export.
func TestBackup_AdminOnly(t *testing.T) {
	t.Parallel()
	b := newDataBundle(t, t.TempDir())
	_, tok, err := b.st.CreateUser(t.Context(), "olga", api.RoleOrganiser)
	if err != nil {
		t.Fatal(err)
	}
	org, err := api.NewClient(b.server, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer org.Close()
	if err := org.Backup(t.Context(), io.Discard); api.ErrorCode(err) != api.CodeForbidden {
		t.Errorf("an organiser's Backup = %v; want forbidden", err)
	}
	if err := org.Export(t.Context(), api.ExportQuery{}, io.Discard); api.ErrorCode(err) != api.CodeForbidden {
		t.Errorf("an organiser's Export = %v; want forbidden", err)
	}
}
