package appliance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/problems"
)

// The shared-directory exchange (slurm.shared_dir): where the cluster's
// nodes cannot reach the coordinator's API (a firewall between the
// compute network and the contest's front) they reach it through the
// filesystem every Slurm cluster shares. It carries what the node API
// carries. The coordinator writes each attempt's job into a directory of
// its own, named for the attempt's token; the node appends its progress
// there and publishes its result with a hard link, which fails when a
// result is there already. The directory goes when the attempt ends, so
// a node that comes back late finds nowhere to write. What keeps others
// out is the Unix user: the directories are the daemon's user's alone,
// and the jobs run as that user.
//
// Only rename, link, append and directory reads are relied on: NFS gives
// close-to-open consistency and an atomic link, and nothing here needs
// more.

const (
	spoolJobFile    = "job.json"
	spoolEventsFile = "events.jsonl"
	spoolResultFile = "result.json"
	// spoolEventsMax bounds what one attempt's events file may hold: the
	// run writes its events, and a flood must not fill the coordinator.
	spoolEventsMax = 64 << 20
	// spoolTick is how often an attempt's directory is looked at: the
	// result's latency, where the API's is none.
	spoolTick = 250 * time.Millisecond
)

// spoolRoot is the coordinator's own part of the shared directory: two
// coordinators (a staging box beside the contest's) may share one, and
// each clears only its own.
func spoolRoot(shared, coordinator string) string {
	return filepath.Join(shared, "kernelbox-"+coordinator)
}

// spoolAttempt is an attempt's directory under root: named for the hash of
// its token, which only the attempt's batch script holds.
func spoolAttempt(root, token string) string {
	sum := sha256.Sum256([]byte(token))
	return filepath.Join(root, hex.EncodeToString(sum[:16]))
}

// openSpool makes the coordinator's part of the shared directory, private
// to the daemon's user (the jobs hold code and secret seeds), and clears
// what an earlier boot left there: its attempts ended with it. The shared
// directory itself must be there: made here, on a filesystem that is not
// mounted, it would be this machine's alone and no node would find a run.
//
// A shared scratch area may be writable by other users, and the part's
// name is public (every job's comment carries the hash): what is there
// must be a directory of this user's, never a link followed, and it is
// cleared through an os.Root, which stays inside it.
func openSpool(root string, log *slog.Logger) error {
	shared := filepath.Dir(root)
	if st, err := os.Stat(shared); err != nil {
		return fmt.Errorf("slurm.shared_dir %s is not here (is the cluster's shared filesystem mounted?): %w", shared, err)
	} else if !st.IsDir() {
		return fmt.Errorf("slurm.shared_dir %s is not a directory", shared)
	}
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("make the coordinator's directory in slurm.shared_dir: %w", err)
	}
	st, err := os.Lstat(root)
	if err != nil {
		return fmt.Errorf("the coordinator's directory in slurm.shared_dir: %w", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !st.IsDir() || !ok || int(sys.Uid) != os.Getuid() {
		return fmt.Errorf("%s is not a directory of this user's (a link, or another user's): not used; remove it", root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("open the coordinator's directory in slurm.shared_dir: %w", err)
	}
	defer r.Close()
	if err := r.Chmod(".", 0o700); err != nil {
		return fmt.Errorf("make the coordinator's directory in slurm.shared_dir private: %w", err)
	}
	entries, err := fs.ReadDir(r.FS(), ".")
	if err != nil {
		return fmt.Errorf("read the coordinator's directory in slurm.shared_dir: %w", err)
	}
	for _, e := range entries {
		if err := r.RemoveAll(e.Name()); err != nil {
			log.Warn("remove an earlier boot's job directory", "dir", e.Name(), "err", err)
		}
	}
	if len(entries) > 0 {
		log.Info("removed an earlier boot's job directories from the shared directory", "dirs", len(entries))
	}
	return nil
}

// spoolOut is one attempt's directory as the coordinator reads it.
type spoolOut struct {
	dir       string
	read      int64 // how far events.jsonl has been read
	maxResult int64
	flooded   bool
}

// publish writes the attempt's job where its node will look.
func publishSpool(root, token string, job api.NodeJob, maxResult int64) (*spoolOut, error) {
	dir := spoolAttempt(root, token)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("shared directory for run %d: %w", job.Run, err)
	}
	out := &spoolOut{dir: dir, maxResult: maxResult}
	job.MaxResult = maxResult
	data, err := json.Marshal(job)
	if err == nil {
		// The events file is there before the node is: a node may append
		// to it and never create it, nor anything in a removed directory.
		err = os.WriteFile(filepath.Join(dir, spoolEventsFile), nil, 0o600)
	}
	if err == nil {
		err = problems.WriteFileAtomic(filepath.Join(dir, spoolJobFile), func(w io.Writer) error {
			_, err := w.Write(data)
			return err
		})
	}
	if err != nil {
		out.remove()
		return nil, fmt.Errorf("shared directory for run %d: %w", job.Run, err)
	}
	return out, nil
}

// remove ends the attempt's directory: renamed away first, so that a
// node still at work finds its path gone at once, then removed (again if
// the node put a file in it meanwhile); what stays is cleared at the
// next start.
func (o *spoolOut) remove() {
	gone := o.dir + ".gone"
	if err := os.Rename(o.dir, gone); err != nil {
		gone = o.dir
	}
	for range 3 {
		if os.RemoveAll(gone) == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// events hands on each whole line appended to the events file since the
// last look.
func (o *spoolOut) events(ctx context.Context, log *slog.Logger, each func(context.Context, api.NodeEvent) error) {
	if o.flooded {
		return
	}
	f, err := os.Open(filepath.Join(o.dir, spoolEventsFile))
	if err != nil {
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() <= o.read {
		return
	}
	if st.Size() > spoolEventsMax {
		o.flooded = true
		log.Warn("the node's events file is over its bound: its progress is no longer followed", "bytes", st.Size())
		return
	}
	buf := make([]byte, st.Size()-o.read)
	n, _ := f.ReadAt(buf, o.read)
	buf = buf[:n]
	end := bytes.LastIndexByte(buf, '\n')
	if end < 0 {
		return // a line still being written
	}
	for _, line := range bytes.Split(buf[:end], []byte("\n")) {
		var ev api.NodeEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			log.Warn("a node's event is not JSON: skipped", "err", err)
			continue
		}
		if err := each(ctx, ev); err != nil {
			log.Warn("a node's event", "err", err)
		}
	}
	o.read += int64(end) + 1
}

// result is the node's report when it is there, nil when it is not yet.
//
// The directory is listed before the report is opened: on NFS a lookup
// that found nothing is cached for the directory's attribute time (30 s
// and more), while opening and reading the directory revalidates it.
// An I/O error is the report's failure only when final (the job has
// ended); before, it may be the filesystem's passing trouble (ESTALE,
// a server failing over), and the next look tries again.
func (o *spoolOut) result(final bool) (*api.NodeResult, error) {
	ioFailed := func(err error) (*api.NodeResult, error) {
		if final {
			return nil, fmt.Errorf("read the node's report in the shared directory: %w", err)
		}
		return nil, nil
	}
	names, err := listDir(o.dir)
	if err != nil {
		return ioFailed(err)
	}
	if !slices.Contains(names, spoolResultFile) {
		return nil, nil
	}
	f, err := os.Open(filepath.Join(o.dir, spoolResultFile))
	if err != nil {
		return ioFailed(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ioFailed(err)
	}
	if st.Size() > o.maxResult {
		return nil, fmt.Errorf("the node's report is %d bytes, over the coordinator's bound of %d (profiler.max_report and the run's output)", st.Size(), o.maxResult)
	}
	var res api.NodeResult
	if err := json.NewDecoder(f).Decode(&res); err != nil {
		return nil, fmt.Errorf("the node's report: %w", err)
	}
	if res.Error == "" && res.Report == nil {
		return nil, errors.New("the node's report holds neither a report nor an error")
	}
	return &res, nil
}

func listDir(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// spoolLink is the node's side of the exchange.
type spoolLink struct {
	dir string
	run int64
	log *slog.Logger
	max int64 // the coordinator's bound on a report, from the job
}

func (l *spoolLink) job(context.Context) (*api.NodeJob, error) {
	data, err := os.ReadFile(filepath.Join(l.dir, spoolJobFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no run %d in the shared directory for this job token (given up, or ended)", l.run)
	}
	if err != nil {
		return nil, fmt.Errorf("read the job in the shared directory: %w", err)
	}
	var j api.NodeJob
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("the job in the shared directory: %w", err)
	}
	if j.Run != l.run {
		return nil, fmt.Errorf("the shared directory holds run %d for this job token, not run %d", j.Run, l.run)
	}
	l.max = j.MaxResult
	return &j, nil
}

// event appends one line: a single write to a file opened for appending,
// which a reader never sees half of on a local filesystem; on NFS the
// reader skips a line it cannot parse.
func (l *spoolLink) event(_ context.Context, ev api.NodeEvent) error {
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(l.dir, spoolEventsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("report an event in the shared directory: %w", err)
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report an event in the shared directory: %w", err)
	}
	return nil
}

// result publishes the report: written aside, then linked into place,
// which fails if a report is there already (the coordinator keeps the
// first) or the directory is gone (the attempt was given up).
func (l *spoolLink) result(_ context.Context, res api.NodeResult) error {
	data, err := json.Marshal(res)
	if err == nil && l.max > 0 && int64(len(data)) > l.max && len(res.Profile) > 0 {
		// As through the API (a 413): the report goes without its Nsight
		// Compute report rather than not at all.
		l.log.Warn("the report is over the coordinator's bound: publishing it without the Nsight Compute report", "bytes", len(data), "bound", l.max)
		res = withoutProfile(res)
		data, err = json.Marshal(res)
	}
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(l.dir, ".result-*")
	if err != nil {
		return fmt.Errorf("write the report for run %d in the shared directory (given up, or ended?): %w", l.run, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync() // on the server before the coordinator can see it
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the report for run %d in the shared directory: %w", l.run, err)
	}
	err = os.Link(tmp.Name(), filepath.Join(l.dir, spoolResultFile))
	if errors.Is(err, fs.ErrExist) {
		l.log.Info("the coordinator had the report already")
		return nil
	}
	if err != nil {
		return fmt.Errorf("publish the report for run %d: %w", l.run, err)
	}
	l.log.Info("reported", "passed", res.Report != nil && res.Report.Passed, "error", res.Error, "via", "shared directory")
	return nil
}

func (l *spoolLink) close() {}
