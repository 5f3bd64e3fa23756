package appliance

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/store"
	"kernelbox/problems"
)

func TestSlurmConfig_Validate(t *testing.T) {
	t.Parallel()
	good := func() Config {
		c := DefaultConfig()
		c.Executor = ExecutorSlurm
		c.Slurm.Coordinator = "http://kernelbox.cluster:8470"
		c.Slurm.Pools = []SlurmPool{{GRES: "h100", GPUType: "H100", GPUs: 8}, {GPUType: "cpu", GPUs: 4}}
		return c
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // "" for valid
	}{
		{"valid", func(*Config) {}, ""},
		{"unknown executor", func(c *Config) { c.Executor = "k8s" }, "config executor: want local or slurm"},
		{"no coordinator", func(c *Config) { c.Slurm.Coordinator = "" }, "config slurm.coordinator"},
		{"coordinator not a URL", func(c *Config) { c.Slurm.Coordinator = "kernelbox:8470" }, "config slurm.coordinator"},
		{"no pools", func(c *Config) { c.Slurm.Pools = nil }, "config slurm.pools: want at least one pool"},
		{"two pools one type", func(c *Config) { c.Slurm.Pools[1].GPUType = "H100" }, "config slurm.pools[1].gpu_type: H100 is another pool's too"},
		{"pool without type", func(c *Config) { c.Slurm.Pools[0].GPUType = "" }, "config slurm.pools[0].gpu_type"},
		{"pool without GPUs", func(c *Config) { c.Slurm.Pools[0].GPUs = 0 }, "config slurm.pools[0].gpus: want 1 to 4096, got 0"},
		{"gres with a count", func(c *Config) { c.Slurm.Pools[0].GRES = "h100:2" }, "config slurm.pools[0].gres"},
		{"no command", func(c *Config) { c.Slurm.Command = nil }, "config slurm.command"},
		{"relative bin", func(c *Config) { c.Slurm.Bin = "bin" }, "config slurm.bin"},
		{"short time limit", func(c *Config) { c.Slurm.TimeLimit = 0 }, "config slurm.time_limit"},
		{"negative patience", func(c *Config) { c.Slurm.Patience = -time.Second }, "config slurm.patience"},
		{"no patience", func(c *Config) { c.Slurm.Patience = 0 }, ""},
		{"shared dir instead of a coordinator", func(c *Config) { c.Slurm.Coordinator = ""; c.Slurm.SharedDir = "/shared/kernelbox" }, ""},
		{"shared dir and a bad coordinator", func(c *Config) { c.Slurm.Coordinator = "coord"; c.Slurm.SharedDir = "/shared/kernelbox" }, "config slurm.coordinator"},
		{"relative shared dir", func(c *Config) { c.Slurm.SharedDir = "shared" }, "config slurm.shared_dir: want an absolute directory"},
		{"local ignores slurm", func(c *Config) { c.Executor = ExecutorLocal; c.Slurm = SlurmConfig{} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := good()
			tc.change(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestSlurmConfig_File(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "c.yaml")
	body := "executor: slurm\nslurm:\n  coordinator: http://coord:8470\n  pools:\n    - {gres: h100, gpu_type: H100, gpus: 16}\n    - {gpu_tpye: cpu, gpus: 2}\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	err := c.LoadConfigFile(p)
	if err == nil || !strings.Contains(err.Error(), "slurm.pools[1].gpu_tpye") || !strings.Contains(err.Error(), "gpu_type") {
		t.Fatalf("a misspelt key in a pool: %v, want the key by its index and a suggestion", err)
	}
	body = strings.Replace(body, "gpu_tpye", "gpu_type", 1)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c = DefaultConfig()
	if err := c.LoadConfigFile(p); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	slots := c.Slurm.slots()
	if len(slots) != 18 || slots[0].ID != "slurm:H100:0" || slots[0].Device != "cuda" || slots[17].GPUType != "cpu" || slots[17].Device != "cpu" {
		t.Errorf("slots = %d, first %+v, last %+v", len(slots), slots[0], slots[len(slots)-1])
	}
}

// The job token goes to the node in the batch script, never in an
// argument a `ps` on the coordinator or squeue would show; the command's
// arguments are quoted whatever they hold.
func TestSlurm_Script(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Slurm.Coordinator = "http://coord:8470"
	cfg.Slurm.Command = []string{"/opt/kernel box/kernelbox", "--it's"}
	cfg.Slurm.NodeConfig = "/etc/kernelbox/node.yaml"
	s := newSlurm(cfg, "boot1", func(*store.Leaderboard) (*problems.Task, error) { return nil, nil }, testLogger(t))
	got := string(s.script(42, "tok3n"))
	for _, want := range []string{"#!/bin/sh\n", "exec 3<<'KERNELBOX_TOKEN'\ntok3n\nKERNELBOX_TOKEN\n", "exec env -i PATH=", `SLURM_JOB_GPUS="$SLURM_JOB_GPUS"`,
		`'/opt/kernel box/kernelbox' '--it'\''s' 'node' 'run-job' '--coordinator' 'http://coord:8470' '--run' '42' '--token-fd' '3' '--config' '/etc/kernelbox/node.yaml'`} {
		if !strings.Contains(got, want) {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
	// The token is on no command line: only in the here-document's line.
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, "tok3n") && line != "tok3n" {
			t.Errorf("the token shows in %q", line)
		}
	}
	// And the script does hand it over: run it with a stand-in command.
	dir := t.TempDir()
	cfg.Slurm.Command = []string{"/bin/sh", "-c", `read -r tok <&3; echo "token=$tok args=$*" > ` + filepath.Join(dir, "got"), "sh"}
	cfg.Slurm.NodeConfig = ""
	s = newSlurm(cfg, "boot1", func(*store.Leaderboard) (*problems.Task, error) { return nil, nil }, testLogger(t))
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, s.script(7, "tok3n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/sh", script).CombinedOutput(); err != nil {
		t.Fatalf("the script: %v: %s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "got")); err != nil || !strings.HasPrefix(string(b), "token=tok3n args=node run-job --coordinator http://coord:8470 --run 7 --token-fd 3") {
		t.Errorf("the command got %q, %v", b, err)
	}
	// With a shared directory the node is sent there, to the
	// coordinator's own part of it, and not to the API.
	cfg.Slurm.Coordinator, cfg.Slurm.SharedDir = "", "/shared/kb"
	s = newSlurm(cfg, "boot1", func(*store.Leaderboard) (*problems.Task, error) { return nil, nil }, testLogger(t))
	got = string(s.script(7, "tok3n"))
	if !strings.Contains(got, "'node' 'run-job' '--shared-dir' '/shared/kb/kernelbox-"+s.hash+"' '--run' '7'") || strings.Contains(got, "--coordinator") {
		t.Errorf("script with a shared directory:\n%s", got)
	}
}
