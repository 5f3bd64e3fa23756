package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"kernelbox/policies"
)

// Bind is a host path made visible inside the sandbox, read-only unless
// Writable.
type Bind struct {
	Source      string `json:"source"`
	Destination string `json:"destination"` // Source when empty
	Writable    bool   `json:"writable,omitempty"`
}

// Device is a host device node passed into the sandbox, with the matching
// device-cgroup rule (the GPU's nodes come through here).
type Device struct {
	Path  string `json:"path"`
	Type  rune   `json:"type"` // 'c' or 'b'
	Major int64  `json:"major"`
	Minor int64  `json:"minor"`
}

// Spec is one run.
type Spec struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	// WorkDir is a host directory whose contents are copied into the run's
	// work directory (/work, a tmpfs) before it starts; empty for none.
	WorkDir string   `json:"work_dir,omitempty"`
	Binds   []Bind   `json:"binds"`
	Devices []Device `json:"devices,omitempty"`
	Limits  policies.Limits
	// UID and GID run the process; Nobody by default.
	UID, GID int
	// ResultPipe, when set, gives the process an extra descriptor (fd 3) to
	// write a result stream to, and POPCORN_FD=3 in its environment.
	ResultPipe bool
	// ResultTee, when set with ResultPipe, also gets the result stream as it
	// is written, for live progress. It must not fail and must bound what it
	// keeps: the stream is the submission's to flood.
	ResultTee io.Writer `json:"-"`
	// Keep names files of /work to copy into KeepTo after the run (a
	// compiler's output). A run that keeps files gets /work on a host
	// directory of the run instead of a tmpfs, since a tmpfs dies with the
	// container; its files are still bounded by the file-size limit.
	Keep   []string `json:"keep,omitempty"`
	KeepTo string   `json:"keep_to,omitempty"`
	// Mask hides more paths of the run's /proc, as runc masks its defaults:
	// the other GPUs' /proc/driver/nvidia/gpus/BUS directories.
	Mask []string `json:"mask,omitempty"`
	// Loopback lets the run's processes open IP sockets, on the loopback
	// of its own network namespace, the only interface there: the ranks of
	// a multi-GPU problem talk that way.
	Loopback bool `json:"loopback,omitempty"`
	// Gate, when set, holds the run at its start: the process is started
	// at once with one more descriptor, named by KERNELBOX_GO_FD, and Run
	// calls Gate; when it returns nil Run writes one byte there and the
	// wall limit starts counting. The process prepares what needs no
	// device (imports, its own children) and reads the byte before it
	// touches one: a warm start, while the device is still another run's.
	// When Gate fails, the run is killed and Run returns Gate's error.
	Gate func(context.Context) error `json:"-"`
	// Standby, when set instead of Gate, holds a run started before its
	// work is known (a standby harness, problems/standby.go): it starts
	// with WorkDir's files and waits as a gated run does, until Standby
	// returns its Opening. Run then adds the Opening's files to /work,
	// writes its Message after the go byte and takes its wall limit and
	// result tee. A standby's /work is a host directory of the run, as
	// with Keep, so that files can be added while it runs.
	Standby func(context.Context) (Opening, error) `json:"-"`

	workBind string // the host directory behind /work when Keep or Standby is set
}

// Opening is what a standby run (Spec.Standby) learns when its work comes.
type Opening struct {
	// Files is a host directory whose files are added to the run's /work
	// (replacing what is there), owned by the run's uid.
	Files string
	// Message follows the go byte, the write end then closed.
	Message []byte
	// WallTime, when positive, replaces the spec's wall limit.
	WallTime time.Duration
	// ResultTee, when set, gets the result stream from the go on (as
	// Spec.ResultTee, which a standby should leave nil).
	ResultTee io.Writer
}

// Verdict is how a run ended.
type Verdict string

// The verdicts of a run.
const (
	VerdictOK          Verdict = "ok"
	VerdictExit        Verdict = "nonzero_exit"
	VerdictSignal      Verdict = "signal"
	VerdictTimeout     Verdict = "timeout"
	VerdictOOM         Verdict = "oom"
	VerdictOutputLimit Verdict = "output_limit"
	VerdictSandboxErr  Verdict = "sandbox_error"
)

// Result is what a run left behind.
type Result struct {
	ID         string        `json:"id"` // the container's, unique per run
	Verdict    Verdict       `json:"verdict"`
	ExitCode   int           `json:"exit_code"`
	Signal     string        `json:"signal,omitempty"`
	Wall       time.Duration `json:"wall_ns"`
	CPU        time.Duration `json:"cpu_ns"`
	PeakMemory uint64        `json:"peak_memory_bytes"`
	OOMKills   uint64        `json:"oom_kills,omitempty"`
	// OOMKilled are the processes the kernel killed for the memory limit,
	// as its log names them (at most 8): empty where the log cannot be
	// read, while OOMKills still counts them.
	OOMKilled []OOMKill `json:"oom_killed,omitempty"`
	// MemoryLimit is the limit the run had (Limits.Memory), what an OOM
	// verdict's PeakMemory is measured against.
	MemoryLimit uint64 `json:"memory_limit_bytes,omitempty"`
	// TimedOut: the run reached its wall limit, whatever its verdict (an
	// OOM kill before the limit outranks it).
	TimedOut   bool   `json:"timed_out,omitempty"`
	Stdout     []byte `json:"stdout"`
	Stderr     []byte `json:"stderr"`
	ResultData []byte `json:"result,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	Error      string `json:"error,omitempty"` // for sandbox_error
}

// OOMKill is one process the kernel killed for a run's memory limit, as
// its log names it.
type OOMKill struct {
	// PID is the host's pid of the process (not the one the run saw).
	PID  int    `json:"pid"`
	Name string `json:"name"` // the command name (comm), 15 bytes at most
	// RSS is the resident memory it held when it was killed, in bytes.
	RSS uint64 `json:"rss_bytes"`
	// Budget: the kill was for the memory budget of all runs (the
	// runtime's parent cgroup, SetBudget), not for this run's own limit.
	Budget bool `json:"budget,omitempty"`
}

// ErrInvalidSpec is wrapped by every error about a Spec that cannot run.
var ErrInvalidSpec = errors.New("invalid sandbox spec")

// Nobody is the uid and gid of a run whose spec names none (65534, the
// nobody user). A host directory a run must write to (a writable Bind,
// like the daemon's per-user compile cache) has to belong to it.
const Nobody = 65534

var envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// Validate checks a spec without running it; it returns the spec with
// defaults applied.
func Validate(s Spec) (Spec, error) {
	if s.UID == 0 {
		s.UID = Nobody
	}
	if s.GID == 0 {
		s.GID = Nobody
	}
	return s, s.validate()
}

func (s *Spec) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalidSpec)
	}
	if len(s.Args) == 0 {
		return bad("no command")
	}
	if err := s.Limits.Validate(); err != nil {
		return bad("%v", err)
	}
	for _, e := range s.Env {
		if !envRE.MatchString(e) {
			return bad("environment entry %q is not NAME=value", e)
		}
	}
	for _, b := range s.Binds {
		if !filepath.IsAbs(b.Source) || (b.Destination != "" && !filepath.IsAbs(b.Destination)) {
			return bad("bind %s -> %s: paths must be absolute", b.Source, b.Destination)
		}
		if _, err := os.Stat(b.Source); err != nil {
			return bad("bind %s: %v", b.Source, err)
		}
	}
	for _, k := range s.Keep {
		if k == "" || filepath.IsAbs(k) || strings.Contains(k, "..") || strings.ContainsRune(k, '/') {
			return bad("keep %q: must be a plain file name in /work", k)
		}
	}
	if len(s.Keep) > 0 && s.KeepTo == "" {
		return bad("keep without keep_to")
	}
	if s.Gate != nil && s.Standby != nil {
		return bad("a gate and a standby: a run waits for one or the other")
	}
	if s.Standby != nil && s.ResultTee != nil {
		return bad("a standby's result tee comes with its opening")
	}
	for _, m := range s.Mask {
		if !strings.HasPrefix(filepath.Clean(m), "/proc/") || filepath.Clean(m) != m {
			return bad("mask %q: must be a clean path under /proc", m)
		}
	}
	for _, d := range s.Devices {
		if d.Type != 'c' && d.Type != 'b' {
			return bad("device %s: type must be c or b", d.Path)
		}
	}
	if s.UID == 0 || s.GID == 0 {
		return bad("runs as root are not allowed")
	}
	return nil
}

// HostDevice describes the host's device node at path (type and numbers),
// to pass into a run.
func HostDevice(path string) (Device, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return Device{}, err
	}
	d := Device{Path: path, Major: int64(unix.Major(st.Rdev)), Minor: int64(unix.Minor(st.Rdev))}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR:
		d.Type = 'c'
	case unix.S_IFBLK:
		d.Type = 'b'
	default:
		return Device{}, fmt.Errorf("%s is not a device node", path)
	}
	return d, nil
}
