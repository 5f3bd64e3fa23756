package appliance

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeSlurm stands in for sbatch, squeue and scancel (slurm.bin), for the
// slurm executor's tests that need no cluster (make test): sbatch runs the
// batch script at once on this machine, in a session of its own, as
// slurmd would; squeue says RUNNING while that session's leader lives,
// COMPLETED after, or the state a test forces on the job (TIMEOUT,
// NODE_FAIL); scancel sends the session SIGTERM. While the file "down"
// is in its state directory, every command fails as it does with the
// controller out of reach. A test's cleanup kills what its jobs left,
// and nothing else: their sessions, by the pids sbatch kept.
type fakeSlurm struct {
	t          testing.TB
	bin, state string
}

const fakeUnreachable = `if [ -e "$d/down" ]; then basename "$0" >> "$d/failed"
  echo "$(basename "$0"): error: Unable to contact slurm controller (connect failure)" >&2; exit 1; fi
`

func newFakeSlurm(t testing.TB) *fakeSlurm {
	t.Helper()
	dir := t.TempDir()
	f := &fakeSlurm{t: t, bin: filepath.Join(dir, "bin"), state: filepath.Join(dir, "state")}
	for _, d := range []string{f.bin, f.state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	head := "#!/bin/sh\nd=" + shellQuote(f.state) + "\n" + fakeUnreachable
	scripts := map[string]string{
		"sbatch": head + `exec 9>"$d/lock"; flock 9
id=$(( $(cat "$d/next" 2>/dev/null || echo 100) + 1 )); echo $id > "$d/next"
o=/dev/null; for a in "$@"; do case $a in --output=*) o=${a#--output=};; esac; done
o=$(echo "$o" | sed "s/%j/$id/g")
cat > "$d/$id.sh"; echo "$@" > "$d/$id.args"
SLURM_JOB_ID=$id SLURMD_NODENAME=fakenode setsid sh "$d/$id.sh" >"$o" 2>&1 </dev/null 9>&- &
echo $! > "$d/$id.pid"
echo $id
`,
		// The coordinator's start-up listing (--me, no --jobs) finds none.
		"squeue": head + `for a in "$@"; do case $a in --jobs=*) j=${a#--jobs=};; esac; done
[ -n "${j:-}" ] || exit 0
for id in $(echo "$j" | tr , ' '); do
  [ -e "$d/$id.pid" ] || continue
  if [ -e "$d/$id.state" ]; then echo "$id|$(cat "$d/$id.state")|None|fakenode"
  elif kill -0 "$(cat "$d/$id.pid")" 2>/dev/null; then echo "$id|RUNNING|None|fakenode"
  else echo "$id|COMPLETED|None|fakenode"; fi
done
`,
		"scancel": head + `for j in "$@"; do
  echo "$j" >> "$d/scancel.calls"
  [ -e "$d/$j.pid" ] || continue
  if [ -e "$d/$j.state" ]; then echo "scancel: error: Kill job error on job id $j: Job/step already completing or completed" >&2; exit 1; fi
  echo CANCELLED > "$d/$j.state"; kill -TERM -- -"$(cat "$d/$j.pid")" 2>/dev/null
done
exit 0
`,
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(f.bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(f.killJobs)
	return f
}

// config points a coordinator at the fake.
func (f *fakeSlurm) config(c *Config) {
	c.Slurm.Bin = f.bin
	c.Slurm.Poll = 200 * time.Millisecond
}

// down makes the controller unreachable, or brings it back.
func (f *fakeSlurm) down(down bool) {
	p := filepath.Join(f.state, "down")
	if !down {
		_ = os.Remove(p)
		return
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// lines is how many lines the state file name holds (calls logged).
func (f *fakeSlurm) lines(name string) int {
	b, _ := os.ReadFile(filepath.Join(f.state, name))
	return strings.Count(string(b), "\n")
}

// jobs are the ids sbatch gave, in order.
func (f *fakeSlurm) jobs() []string {
	b, err := os.ReadFile(filepath.Join(f.state, "next"))
	if err != nil {
		return nil
	}
	last, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	var ids []string
	for id := 101; id <= last; id++ {
		ids = append(ids, strconv.Itoa(id))
	}
	return ids
}

// pid is the leader of job id's session: the node side.
func (f *fakeSlurm) pid(id string) int {
	b, err := os.ReadFile(filepath.Join(f.state, id+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// alive says whether job id's node side still runs.
func (f *fakeSlurm) alive(id string) bool {
	pid := f.pid(id)
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// end makes squeue say state of job id from now on, as Slurm does when it
// gives a job up; stop also sends its session SIGTERM, as Slurm does at a
// time limit (a node cut off keeps its job running: no signal).
func (f *fakeSlurm) end(id, state string, stop bool) {
	if err := os.WriteFile(filepath.Join(f.state, id+".state"), []byte(state+"\n"), 0o600); err != nil {
		f.t.Fatal(err)
	}
	if pid := f.pid(id); stop && pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
}

// killJobs kills the sessions of this fake's jobs that still run.
func (f *fakeSlurm) killJobs() {
	for _, id := range f.jobs() {
		if pid := f.pid(id); pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// readyz is the coordinator's readiness: its status code and body.
func readyz(t testing.TB, td *testDaemon, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(td.server + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func mustHave(t testing.TB, what, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("%s has no %q:\n%s", what, p, got)
		}
	}
}
