package problems

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// A standby is our Python harness started before its run is known: on
// an idle GPU the runner keeps one waiting, its judge and workers with
// torch (and Triton) imported and nothing else done, so a run that comes
// skips those seconds. The standby waits at its gate like a warm start
// (Launch.Gate), touching no device; when a run is handed to it
// (Launch.Standby), the run's files are added to its working directory,
// and its arguments follow the go byte. Each standby serves one run.

// Opening is what a standby launch learns when its run comes.
type Opening struct {
	// Files is a directory whose files are added to the standby's working
	// directory before it goes (the run's Launch.Dir).
	Files string
	// Argv is the run's harness arguments after the script (the modes and
	// cases files).
	Argv []string
	// Timeout counts from the go, as Launch.Timeout does.
	Timeout time.Duration
	// Progress, when set, gets the result stream from then on.
	Progress io.Writer
}

// Message is what the standby harness reads after the go byte: its
// arguments, as JSON (eval.py --standby).
func (o Opening) Message() []byte {
	b, _ := json.Marshal(struct {
		Argv []string `json:"argv"`
	}{o.Argv})
	return b
}

// StandbyArg is the harness argument that makes eval.py wait for its
// arguments at the gate.
const StandbyArg = "--standby"

// harnessScripts are the bundled harness's files: the standby's working
// directory before its run comes, and what writeJudge lends a KernelBot
// problem. Read once: the library is embedded, and Task.TimedBy asks of
// them on every evaluation and every leaderboard listing.
var harnessScripts = sync.OnceValues(func() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(Library(), "harness", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".py" {
			return err
		}
		b, err := fs.ReadFile(Library(), p)
		files[path.Base(p)] = b
		return err
	})
	return files, err
})

// StandbyLaunch writes the bundled harness into dir (empty) and returns
// the launch of a standby there: python and env as a run of a problem on
// our harness gets them (EvalOptions.Python and .Env), the same output
// limit. The caller sets Cache and Standby.
func StandbyLaunch(dir, python string, env []string, outputLimit int) (Launch, error) {
	if err := writeJudge(dir); err != nil {
		return Launch{}, fmt.Errorf("standby: %w", err)
	}
	return Launch{Dir: dir, Argv: []string{python, "eval.py", StandbyArg}, Env: harnessEnv(&Task{}, EvalOptions{Env: env}),
		OutputLimit: outputLimit}, nil
}

// Adopt hands the run that in launches to the standby sb (a launch from
// StandbyLaunch): the Opening to give it, or why it cannot take the run,
// in which case the run needs a launch of its own. It can when in is our
// harness in one process with its gate (so at most one launch of a run
// is on our Python harness: Evaluate's), started as sb was (interpreter,
// script, environment, output limit, a compile cache or none), with the
// same harness files, and needing nothing a standby lacks (kept files,
// loopback).
func Adopt(sb, in Launch) (Opening, error) {
	switch {
	case in.Gate == nil || in.Standby != nil:
		return Opening{}, errors.New("not a gated run of our harness")
	case len(in.Argv) < 3 || len(sb.Argv) < 2 || in.Argv[0] != sb.Argv[0] || in.Argv[1] != sb.Argv[1]:
		return Opening{}, fmt.Errorf("runs %q, the standby %q", in.Argv, sb.Argv)
	case slices.Contains(in.Argv[2:], string(ModeProfile)):
		return Opening{}, errors.New("a profile run: it runs alone, under other limits")
	case len(in.Keep) > 0 || in.Loopback:
		return Opening{}, errors.New("keeps files or talks over loopback")
	case in.OutputLimit != sb.OutputLimit:
		return Opening{}, fmt.Errorf("output limit %d, the standby's %d", in.OutputLimit, sb.OutputLimit)
	case (in.Cache == "") != (sb.Cache == ""):
		return Opening{}, errors.New("a compile cache where the standby has none, or none where it has one")
	}
	want, got := slices.Sorted(slices.Values(sb.Env)), slices.Sorted(slices.Values(in.Env))
	if !slices.Equal(want, got) {
		return Opening{}, errors.New("another environment")
	}
	entries, err := os.ReadDir(sb.Dir)
	if err != nil {
		return Opening{}, fmt.Errorf("standby: %w", err)
	}
	for _, e := range entries {
		mine, err := os.ReadFile(filepath.Join(sb.Dir, e.Name()))
		if err != nil {
			return Opening{}, fmt.Errorf("standby: %w", err)
		}
		theirs, err := os.ReadFile(filepath.Join(in.Dir, e.Name()))
		if err != nil || !bytes.Equal(mine, theirs) {
			return Opening{}, fmt.Errorf("its %s is not the standby's", e.Name())
		}
	}
	return Opening{Files: in.Dir, Argv: slices.Clone(in.Argv[2:]), Timeout: in.Timeout, Progress: in.Progress}, nil
}

// AddFiles copies the files under src into the directory dst, replacing
// what is there, owned by uid and gid (-1 keeps this process's): a
// standby's run coming in. Only directories and regular files are copied,
// and nothing is written through a link found in dst.
func AddFiles(dst, src string, uid, gid int) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("add files: %w", err)
	}
	defer root.Close()
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		switch {
		case d.IsDir():
			if err := root.Mkdir(rel, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("add files: %w", err)
			}
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("add files: %w", err)
			}
			// Replace, never write into: a link there is removed, not followed.
			if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("add files: %w", err)
			}
			if err := root.WriteFile(rel, b, 0o644); err != nil {
				return fmt.Errorf("add files: %w", err)
			}
		default:
			return nil
		}
		if uid >= 0 {
			if err := root.Lchown(rel, uid, gid); err != nil {
				return fmt.Errorf("add files: %w", err)
			}
		}
		return nil
	})
}
