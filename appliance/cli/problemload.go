package cli

// admin problems load: what a load uploads (a competition's folder, or a
// problem directory with the files its task.yml takes from above it) and
// how its answer is printed.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

func runLoadProblems(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("admin problems load: give one PATH (a competition .yaml or a problem directory)")
	}
	path := c.Args().First()
	st, err := os.Stat(path)
	if err != nil {
		return usageError("admin problems load: %v", err)
	}
	var buf bytes.Buffer
	how := api.ProblemLoad{Replace: c.Bool("replace"), DryRun: c.Bool("dry-run"), GPUs: gpuList(c.StringSlice("gpus"))}
	if c.IsSet("gpus") && len(how.GPUs) == 0 {
		return usageError("admin problems load: --gpus names no GPU type")
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, "task.yml")); err != nil {
			return usageError("admin problems load: %s has no task.yml; give the competition .yaml file for a problem set", path)
		}
		root, entries, err := problemUpload(path)
		if err != nil {
			return usageError("admin problems load: %v", err)
		}
		how.Dir, how.Name = filepath.ToSlash(entries[0]), filepath.Base(filepath.Join(root, entries[0]))
		err = api.PackProblemSet(&buf, root, entries...)
		if err != nil {
			return usageError("admin problems load: %v", err)
		}
	} else {
		how.File = filepath.Base(path)
		if err := api.PackProblemSet(&buf, filepath.Dir(path)); err != nil {
			return usageError("admin problems load: %v", err)
		}
	}
	return clientAction(func(c *cli.Context, cl *api.Client) error {
		loaded, err := cl.LoadProblems(c.Context, &buf, how)
		if err != nil {
			return err
		}
		// Not loaded: refused names exit as refused, problems that did not
		// load as bad input, which wins.
		missed, code := 0, api.ExitRefused
		for _, l := range loaded {
			if !api.Loads(l.Action) && l.Action != api.LoadKept {
				missed++
			}
			if l.Action == api.LoadInvalid {
				code = api.ExitUsage
			}
		}
		err = output(c, loaded, func(w io.Writer) error {
			for _, l := range loaded {
				printLoaded(w, l, how.DryRun)
			}
			return nil
		})
		if err == nil && missed > 0 {
			err = &ExitError{Code: code, Err: fmt.Errorf("%d of %d problems not loaded%s", missed, len(loaded),
				map[bool]string{true: " (a dry run: nothing changed)"}[how.DryRun])}
		}
		return err
	})(c)
}

// maxClimb is how far above a problem directory a directory load takes
// files from: KernelBot's deepest is linalg's ../../pmpp_v2/utils.py.
// Further up lies the organiser's own machine, which a downloaded
// task.yml must not be able to ship to the box.
const maxClimb = 2

// problemUpload says what to upload for one problem directory: the
// directory and every file its task.yml takes from outside it (KernelBot's
// problems share `../eval.py` and `../utils.py` with their family), as
// entries relative to their closest common ancestor, the directory first.
func problemUpload(dir string) (root string, entries []string, err error) {
	t, err := problems.LoadTask(dir)
	if err != nil {
		return "", nil, err
	}
	// Paths are compared as text, so they must be the files' real ones: a
	// symbolic link on the way (../keys -> ~/.ssh) would carry the
	// climb anywhere.
	if t.Dir, err = filepath.EvalSymlinks(t.Dir); err != nil {
		return "", nil, err
	}
	root = t.Dir
	var outside []string
	for _, src := range t.Sources() {
		p := filepath.Join(t.Dir, filepath.FromSlash(src))
		if below(t.Dir, p) {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err != nil || real != p {
			return "", nil, fmt.Errorf("problem %s: %s is reached through a symbolic link, outside the problem set a directory load uploads; copy the file instead", t.Name, src)
		}
		top := t.Dir
		for climb := 0; !below(top, p); climb++ {
			if climb == maxClimb {
				return "", nil, fmt.Errorf("problem %s: %s lies more than %d directories above it, outside the problem set a directory load uploads; load the set's competition file instead", t.Name, src, maxClimb)
			}
			top = filepath.Dir(top)
		}
		rel, _ := filepath.Rel(top, p)
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			if strings.HasPrefix(part, ".") {
				return "", nil, fmt.Errorf("problem %s: %s is a hidden file, outside the problem set a directory load uploads", t.Name, src)
			}
		}
		if len(top) < len(root) {
			root = top
		}
		outside = append(outside, p)
	}
	for _, p := range append([]string{t.Dir}, outside...) {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return "", nil, err
		}
		entries = append(entries, rel)
	}
	return root, entries, nil
}

// below says whether p is dir or lies under it (both clean and absolute).
func below(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// printLoaded writes one line for a problem of a loaded set, and its
// warnings below.
func printLoaded(w io.Writer, l api.LoadedProblem, dryRun bool) {
	verb := l.Action
	if dryRun && api.Loads(l.Action) {
		verb = "would be " + l.Action
	}
	switch {
	case l.Error != "":
		fmt.Fprintf(w, "%s %s: %s\n", verb, l.Leaderboard, l.Error)
	default:
		fmt.Fprintf(w, "%s %s (gpus %s, deadline %s)\n", verb, l.Leaderboard, strings.Join(l.GPUs, ","), deadlineText(l.Deadline))
	}
	for _, warn := range l.Warnings {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
}
