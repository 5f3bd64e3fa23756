//go:build linux

package sandbox

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseOOMLog(t *testing.T) {
	t.Parallel()
	const id = "kb-57505574351803a4"
	// As this kernel (6.18, cgroup v1) wrote them for a run.
	kill := func(memcg, task string, pid string) string {
		return "3,1201,1127599966,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=" + memcg +
			",mems_allowed=0,oom_memcg=/kernelbox/" + memcg + ",task_memcg=/kernelbox/" + memcg + ",task=" + task + ",pid=" + pid + ",uid=65534\n"
	}
	killed := func(pid, comm, anon string) string {
		return "3,1202,1127599982,-;Memory cgroup out of memory: Killed process " + pid + " (" + comm + ") total-vm:1062536kB, anon-rss:" + anon +
			"kB, file-rss:5248kB, shmem-rss:0kB, UID:65534 pgtables:576kB oom_score_adj:0\n"
	}
	for _, tt := range []struct {
		name    string
		records []string
		most    int
		want    []OOMKill
	}{
		{name: "one kill", most: 8, records: []string{
			"6,1199,1127599000,-;python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n",
			kill(id, "python3", "24849"), killed("24849", "python3", "261120"),
		}, want: []OOMKill{{PID: 24849, Name: "python3", RSS: (261120 + 5248) << 10}}},
		{name: "another run's kill", most: 8, records: []string{
			kill("kb-0000000000000000", "python3", "1"), killed("1", "python3", "10"),
			kill(id, "pt_main_thread", "7"), killed("7", "pt_main_thread", "20"),
		}, want: []OOMKill{{PID: 7, Name: "pt_main_thread", RSS: (20 + 5248) << 10}}},
		// A process names itself: commas and a forged pid in its name
		// change neither its pid nor whose run it was.
		{name: "hostile name", most: 8, records: []string{
			kill(id, "a,pid=1,uid=0", "42"), killed("42", ") total-vm:1kB", "30"),
		}, want: []OOMKill{{PID: 42, Name: "a,pid=1,uid=0", RSS: (30 + 5248) << 10}}},
		// Killed for the budget of all runs (SetBudget), above the run's own.
		{name: "budget", most: 8, records: []string{
			"3,9,9,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,oom_memcg=/kernelbox,task_memcg=/kernelbox/" + id + ",task=python3,pid=9,uid=65534\n",
		}, want: []OOMKill{{PID: 9, Name: "python3", Budget: true}}},
		{name: "bounded", most: 1, records: []string{
			kill(id, "a", "1"), kill(id, "b", "2"),
		}, want: []OOMKill{{PID: 1, Name: "a"}}},
		{name: "no kill line", most: 8, records: []string{killed("3", "x", "1"), "garbage", "6,1,1,-;oom-kill:task=x"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := parseOOMLog(tt.records, id, tt.most)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseOOMLog() (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseOOMLog(f *testing.F) {
	f.Add("3,1,1,-;oom-kill:oom_memcg=/kernelbox/kb-1,task=python3,pid=5,uid=1", "3,2,2,-;Killed process 5 (python3) total-vm:1kB, anon-rss:2kB")
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, k := range parseOOMLog([]string{a, b}, "kb-1", 8) {
			if k.PID <= 0 {
				t.Errorf("parseOOMLog(%q, %q) names pid %d", a, b, k.PID)
			}
		}
	})
}
