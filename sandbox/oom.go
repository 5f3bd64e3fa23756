//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"
)

// oomPoll is how often a running run's OOM kill counter is read. A
// counter, not libcontainer's NotifyOOM: its v1 eventfd goroutine blocks
// for ever on an event nobody receives, and a read of one small file a
// quarter second costs nothing beside a run.
const oomPoll = 250 * time.Millisecond

// oomGrace is how long a run lives on after the kernel killed one of its
// processes for memory. The verdict is out of memory from then on,
// whatever the run does; the grace only lets a harness that saw its
// worker die write what it knows and exit. A harness that never notices
// (a multiprocessing.Pool, which waits for ever on a dead worker's task,
// as KernelBot's eval.py does) would otherwise hold the run to its wall
// limit, minutes of a GPU, and then be shown as a timeout.
const oomGrace = 3 * time.Second

// maxVictims bounds the killed processes a Result names: a run that
// forks allocators can have the kernel kill many.
const maxVictims = 8

// oomCounter is the file that counts the container's OOM kills, "" when
// it cannot be found (the run then ends only by itself or its limits).
func (r *Runtime) oomCounter(container *libcontainer.Container) string {
	state, err := container.State()
	if err != nil {
		r.logger.Warn("container state", "container", container.ID(), "err", err)
		return ""
	}
	return oomCounter(state.CgroupPaths)
}

// oomCounter is the file of a run's cgroup that counts its OOM kills
// ("oom_kill N"), "" when the run has no memory controller.
func oomCounter(paths map[string]string) string {
	if cgroups.Mode() == cgroups.Unified {
		if dir, ok := paths[""]; ok {
			return filepath.Join(dir, "memory.events")
		}
		return ""
	}
	if dir, ok := paths["memory"]; ok {
		return filepath.Join(dir, "memory.oom_control")
	}
	return ""
}

// readOOMKills reads the oom_kill line of an oomCounter file.
func readOOMKills(file string) (uint64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "oom_kill "); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no oom_kill line", file)
}

// kmsgPath is the kernel's log.
const kmsgPath = "/dev/kmsg"

// oomVictims finds the processes the kernel's log says it killed in the
// memory cgroup named id (a run's container id, unique per run), at most
// most of them. Only the log names them: the cgroup counts kills, and the
// killed process is gone. The log may be unreadable (no root, a host that
// hides it) or have lost the lines to newer ones; then nothing is found.
func oomVictims(id string, most int) []OOMKill {
	recs, err := kmsgRecords()
	if err != nil {
		return nil
	}
	return parseOOMLog(recs, id, most)
}

// kmsgRecords reads /dev/kmsg from its oldest record to its newest, one
// record a read. The descriptor is a raw one: through os.File, Go's poller
// would wait at the end of the log for a record that may never come,
// instead of returning EAGAIN.
func kmsgRecords() ([]string, error) {
	fd, err := unix.Open(kmsgPath, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", kmsgPath, err)
	}
	defer unix.Close(fd)
	var recs []string
	buf := make([]byte, 8192) // larger than any record (the kernel's limit is 1 KiB of text)
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EPIPE):
			continue // records overwritten under us: the read moved on
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil || n <= 0:
			return recs, nil // EAGAIN: the newest record was read
		}
		recs = append(recs, string(buf[:n]))
	}
}

// parseOOMLog picks out of kernel log records (in /dev/kmsg's format,
// "prio,seq,usec,flags;text") the kills in memory cgroup id. The kernel writes two lines a kill:
//
//	oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=/kernelbox/ID,task_memcg=/kernelbox/ID,task=python3,pid=1234,uid=65534
//	Memory cgroup out of memory: Killed process 1234 (python3) total-vm:..., anon-rss:1048576kB, file-rss:...kB, shmem-rss:...kB, ...
//
// The first names the cgroup; the second, matched by pid, what the process
// held.
func parseOOMLog(records []string, id string, most int) []OOMKill {
	var kills []OOMKill
	for _, rec := range records {
		_, text, found := strings.Cut(rec, ";")
		if !found {
			continue
		}
		text, _, _ = strings.Cut(text, "\n") // continuation lines: device and subsystem
		if rest, ok := strings.CutPrefix(strings.TrimSpace(text), "oom-kill:"); ok {
			kill, memcgs, ok := parseOOMKillLine(rest)
			if !ok || len(kills) >= most || !slices.Contains(memcgs, id) {
				continue
			}
			kills = append(kills, kill)
			continue
		}
		if _, after, ok := strings.Cut(text, "Killed process "); ok {
			var pid int
			if _, err := fmt.Sscanf(after, "%d", &pid); err != nil {
				continue
			}
			for i := range kills {
				if kills[i].PID == pid && kills[i].RSS == 0 {
					kills[i].RSS = rssOf(after)
				}
			}
		}
	}
	return kills
}

// parseOOMKillLine reads the fields of an "oom-kill:" line: the victim
// and the base names of its memory cgroups. The kernel writes task=COMM
// before pid= and uid=, and a process names itself (COMM may hold "," and
// "="), so the cgroups are read before task= and the pid after it.
func parseOOMKillLine(rest string) (kill OOMKill, memcgs []string, ok bool) {
	head, task, found := strings.Cut(rest, ",task=")
	if !found {
		return OOMKill{}, nil, false
	}
	var oomMemcg, taskMemcg string
	for _, kv := range strings.Split(head, ",") {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "oom_memcg":
			oomMemcg = v
		case "task_memcg":
			taskMemcg = v
		}
	}
	memcgs = []string{filepath.Base(oomMemcg), filepath.Base(taskMemcg)}
	// The cgroup out of memory was above the run's: the budget of all.
	kill.Budget = oomMemcg != "" && taskMemcg != "" && oomMemcg != taskMemcg
	i := strings.LastIndex(task, ",pid=")
	if i < 0 {
		return OOMKill{}, nil, false
	}
	pidText, _, _ := strings.Cut(task[i+len(",pid="):], ",")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return OOMKill{}, nil, false
	}
	kill.PID, kill.Name = pid, task[:i]
	return kill, memcgs, true
}

// rssOf sums the anon-rss, file-rss and shmem-rss fields (in kB) of a
// "Killed process" line, in bytes. The fields follow the process's name,
// which it chose: only what follows the last ") total-vm:" counts.
func rssOf(line string) uint64 {
	if i := strings.LastIndex(line, ") total-vm:"); i >= 0 {
		line = line[i:]
	}
	var total uint64
	for _, field := range strings.Split(line, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(field), ":")
		if !ok || (k != "anon-rss" && k != "file-rss" && k != "shmem-rss") {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(v, "kB"), 10, 64); err == nil {
			total += n << 10
		}
	}
	return total
}
