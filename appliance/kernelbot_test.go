package appliance

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/internal/testutil"
	"kernelbox/problems"
)

// TestSubmit_KernelBotDirectives: a file's `#!POPCORN leaderboard` may name
// the problem's directory where the competition file named the leaderboard
// otherwise (vectoradd_py for vectoradd_v2), and a `#!POPCORN gpu` the box
// cannot serve is refused instead of quietly running on another GPU type
// (issue 19).
func TestSubmit_KernelBotDirectives(t *testing.T) {
	t.Parallel()
	svc, st := quickService(t, "quick_v2") // the problem's directory is quick
	ctx := t.Context()
	ann, _, err := st.CreateUser(ctx, "ann", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	body := "def custom_kernel(xs):\n    return [2 * x for x in xs]\n"
	for _, tc := range []struct {
		name, flag, head, want string
	}{
		{"directory name", "", "#!POPCORN leaderboard quick\n", ""},
		{"directory name beside the flag", "quick_v2", "#!POPCORN leaderboard quick\n", ""},
		{"alias as the flag", "quick", "", ""},
		{"another leaderboard", "quick_v2", "#!POPCORN leaderboard vectoradd\n", "#!POPCORN leaderboard is vectoradd but the submission is for quick_v2"},
		{"unknown", "", "#!POPCORN leaderboard nope\n", "nope"},
		{"gpu the box lacks", "", "#!POPCORN leaderboard quick_v2\n#!POPCORN gpu H100\n", "#!POPCORN gpu asks for H100; leaderboard quick_v2 runs here on cpu"},
		{"gpu the box has", "", "#!POPCORN leaderboard quick_v2\n#!POPCORN gpu H100 cpu\n", ""},
	} {
		sub, err := svc.Submit(ctx, ann, api.SubmitRequest{Leaderboard: tc.flag, Mode: "test", FileName: "k.py", Code: []byte(tc.head + body)})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && (sub.Leaderboard != "quick_v2" || sub.GPUType != "cpu"):
			t.Errorf("%s: submitted to %s on %s; want quick_v2 on cpu", tc.name, sub.Leaderboard, sub.GPUType)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestDaemon_KernelBotLayouts: problem directories in reference-kernels'
// layout load one at a time with the files their task.yml takes from
// above (../eval.py, ../../utils.py, a ../template.py), list-valued cases
// reach the problem's own harness, and the competition file over them
// loads whole (issue 19; before, 39 of reference-kernels' 42 directories
// were refused for the `../` files the upload left out).
func TestDaemon_KernelBotLayouts(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	_, ann := td.user("ann")
	fixture := filepath.Join(testutil.RepoRoot(), "problems", "testdata", "kernelbot")
	for _, tc := range []struct{ dir, lb string }{
		{"identity_py", "identity_py"},
		{"linalg/ident_py", "ident_py"},      // ../../eval.py, ../../utils.py
		{"grouped/ident_list", "ident_list"}, // ../eval_grouped.py as eval.py, lists
	} {
		dir := filepath.Join(fixture, filepath.FromSlash(tc.dir))
		if out, errOut, code := td.cli(td.token, "admin", "problems", "load", dir); code != 0 {
			t.Fatalf("admin problems load %s = exit %d\n%s%s", tc.dir, code, out, errOut)
		}
		out, errOut, code := td.cli(ann, "submit", filepath.Join(dir, "submission.py"), "-l", tc.lb, "-m", "test", "--json")
		var res api.SubmitResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.Passed || len(res.Tests) < 2 {
			t.Errorf("submit to %s = exit %d, %+v (%v)\n%s", tc.lb, code, res, err, errOut)
		}
	}
	out, errOut, code := td.cli(ann, "problems", "template", "ident_py", "Python")
	if code != 0 || !strings.Contains(out, "family-level template") {
		t.Errorf("problems template ident_py Python = exit %d, %q; want linalg/template.py\n%s", code, out, errOut)
	}

	out, errOut, code = td.cli(td.token, "admin", "problems", "load", filepath.Join(fixture, "kernelbot.yaml"), "--json")
	var loaded []api.LoadedProblem
	if err := json.Unmarshal([]byte(out), &loaded); err != nil || code != 0 {
		t.Fatalf("admin problems load kernelbot.yaml = exit %d, %v\n%s%s", code, err, out, errOut)
	}
	got := map[string]string{}
	for _, l := range loaded {
		got[l.Leaderboard] = l.Action + " " + strings.Join(l.GPUs, ",")
	}
	want := map[string]string{"identity_v2": "created B200,H100", "ident": "created B200_Nebius", "ident_grouped": "created NVIDIA,B200"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("loaded (-want +got):\n%s", diff)
	}
	// Loaded again onto the GPU types this box has, the set runs here.
	out, errOut, code = td.cli(td.token, "admin", "problems", "load", filepath.Join(fixture, "kernelbot.yaml"), "--replace", "--gpus", "cpu", "--json")
	if err := json.Unmarshal([]byte(out), &loaded); err != nil || code != 0 || len(loaded) != 3 || strings.Join(loaded[1].GPUs, ",") != "cpu" {
		t.Fatalf("load --gpus cpu = exit %d, %+v (%v)\n%s", code, loaded, err, errOut)
	}
	out, errOut, code = td.cli(ann, "submit", filepath.Join(fixture, "grouped", "ident_list", "submission.py"), "-l", "ident_grouped", "-m", "test", "--json")
	var res api.SubmitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.Passed || res.GPU != "cpu" {
		t.Errorf("submit to ident_grouped = exit %d, %+v (%v)\n%s", code, res, err, errOut)
	}
	if _, errOut, code = td.cli(td.token, "admin", "problems", "load", filepath.Join(fixture, "kernelbot.yaml"), "--replace", "--gpus", "H200;rm"); code != api.ExitUsage || !strings.Contains(errOut, `GPU type "H200;rm"`) {
		t.Errorf("load --gpus 'H200;rm' = exit %d, %s; want the type refused by name", code, errOut)
	}

	// A loaded leaderboard is deleted, its submissions only when forced.
	if _, errOut, code = td.cli(td.token, "admin", "leaderboard", "ident_list", "--delete"); code == 0 || !strings.Contains(errOut, "has 1 submissions") {
		t.Errorf("delete ident_list = exit %d, %s; want it refused for its submission", code, errOut)
	}
	out, errOut, code = td.cli(td.token, "admin", "leaderboard", "ident_list", "--delete", "--force")
	if code != 0 || !strings.Contains(out, "deleted leaderboard ident_list and its 1 submissions") {
		t.Errorf("delete --force = exit %d, %q %s", code, out, errOut)
	}
	if out, _, _ = td.cli(ann, "leaderboards"); strings.Contains(out, "ident_list") {
		t.Errorf("leaderboards after the delete still lists ident_list:\n%s", out)
	}
}

// TestService_DeleteMine: a contestant deletes their own submission, not
// another's, and not one under review or marked hacked (its deletion
// would take the evidence); staff delete any.
func TestService_DeleteMine(t *testing.T) {
	t.Parallel()
	svc, st := quickService(t, "quick")
	ctx := t.Context()
	users := map[string]*store.User{}
	for _, n := range []string{"ann", "bob"} {
		u, _, err := st.CreateUser(ctx, n, api.RoleContestant)
		if err != nil {
			t.Fatal(err)
		}
		users[n] = u
	}
	org, _, err := st.CreateUser(ctx, "org", api.RoleOrganiser)
	if err != nil {
		t.Fatal(err)
	}
	submit := func() int64 {
		sub, err := svc.Submit(ctx, users["ann"], api.SubmitRequest{Leaderboard: "quick", Mode: "test", FileName: "k.py",
			Code: []byte("def custom_kernel(xs):\n    return [2 * x for x in xs]\n")})
		if err != nil {
			t.Fatal(err)
		}
		return sub.ID
	}
	mine, hacked := submit(), submit()
	if err := st.SetHacked(ctx, hacked, true); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		who  *store.User
		id   int64
		want string
	}{
		{users["bob"], mine, "no submission"},
		{users["ann"], hacked, "only an organiser may delete it"},
		{users["ann"], mine, ""},
		{org, hacked, ""},
	} {
		err := svc.DeleteMySubmission(ctx, tc.who, tc.id)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s deletes %d = %v; want %q", tc.who.Name, tc.id, err, tc.want)
		}
	}
}

// TestDaemon_ArchiveSubmissions: a multi-file submission, as popcorn-cli
// sends a .tar.gz or .zip, runs with all its files beside the harness,
// through the CLI and through popcorn's upload; its code reads as each
// file under a header; one without the contestant's file is refused at
// submit (issue 19).
func TestDaemon_ArchiveSubmissions(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, t.TempDir(), nil)
	td.loadQuick()
	_, ann := td.user("ann")
	dir := t.TempDir()
	write := func(name string, files map[string]string) string {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for n, body := range files {
			if err := tw.WriteHeader(&tar.Header{Name: "kernel/" + n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			tw.Write([]byte(body))
		}
		tw.Close()
		zw.Close()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("model.tar.gz", map[string]string{
		"submission.py":       "from kernels.double import double\n\n\ndef custom_kernel(xs):\n    return double(xs)\n",
		"kernels/__init__.py": "",
		"kernels/double.py":   "def double(xs):\n    return [2 * x for x in xs]\n",
	})
	out, errOut, code := td.cli(ann, "submit", good, "-l", "quick", "-g", "cpu", "-m", "test", "--json")
	var res api.SubmitResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.Passed {
		t.Fatalf("submit model.tar.gz = exit %d, %+v (%v)\n%s", code, res, err, errOut)
	}
	out, errOut, code = td.cli(ann, "submissions", "show", strconv.FormatInt(res.ID, 10), "--code")
	if code != 0 || !strings.Contains(out, "# ---- kernels/double.py\ndef double(xs):") {
		t.Errorf("submissions show --code = exit %d, %q %s; want the archive's files under headers", code, out, errOut)
	}
	pc := popcornClient{t: t, base: td.server + "/popcorn", id: ann}
	if s := pc.submitAndPoll("quick", "cpu", "test", good); s.Job.Status != "succeeded" {
		t.Errorf("popcorn upload of model.tar.gz = %+v; want succeeded", s)
	}
	bad := write("nosub.tar.gz", map[string]string{"kernel.py": "def custom_kernel(xs):\n    return xs\n"})
	if _, errOut, code = td.cli(ann, "submit", bad, "-l", "quick", "-g", "cpu", "-m", "test"); code != api.ExitUsage || !strings.Contains(errOut, "no submission.py at its top") {
		t.Errorf("submit nosub.tar.gz = exit %d, %s; want refused for its missing submission.py", code, errOut)
	}
}

// TestService_TimedByLabel: a KernelBot problem loads onto our judge and
// says so; one whose task.yml opts into its own harness is labelled
// "timed by the problem's harness (less trusted)" where it loads, on its
// problem page and on its ranking.
func TestService_TimedByLabel(t *testing.T) {
	t.Parallel()
	svc, st := quickService(t, "quick")
	ctx := t.Context()
	ann, _, err := st.CreateUser(ctx, "ann", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join(testutil.RepoRoot(), "problems", "testdata", "kernelbot"))); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(root, "identity_py", "task.yml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("harness: own\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, name, timedBy string
	}{
		{"linalg/ident_py", "ours", problems.TimedByJudge},
		{"identity_py", "theirs", problems.TimedByProblem},
	} {
		loaded, err := svc.loadProblemSet(ctx, root, api.ProblemLoad{Dir: tc.dir, Name: tc.name}, store.LoadOptions{Source: store.SourceUpload})
		if err != nil || len(loaded) != 1 {
			t.Fatalf("load %s = %+v, %v", tc.dir, loaded, err)
		}
		noted := slices.ContainsFunc(loaded[0].Warnings, func(w string) bool { return strings.HasPrefix(w, problems.TimedByNote) })
		if noted != (tc.timedBy == problems.TimedByProblem) {
			t.Errorf("load %s: warnings %q; want the note %q only for the problem's own harness", tc.dir, loaded[0].Warnings, problems.TimedByNote)
		}
		info, err := svc.Leaderboard(ctx, ann, tc.name)
		if err != nil || info.TimedBy != tc.timedBy {
			t.Errorf("Leaderboard(%s).TimedBy = %q, %v; want %q", tc.name, info.TimedBy, err, tc.timedBy)
		}
		rk, err := svc.Ranking(ctx, ann, tc.name, "")
		if err != nil || rk.TimedBy != tc.timedBy {
			t.Errorf("Ranking(%s).TimedBy = %q, %v; want %q", tc.name, rk.TimedBy, err, tc.timedBy)
		}
	}
}
