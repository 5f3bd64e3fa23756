package appliance

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kernelbox/appliance/api"
	"kernelbox/appliance/runner"
	"kernelbox/problems"
)

func TestConfig_LoadConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := DefaultConfig()
	if err := c.LoadConfigFile(write("data: /srv/kb\ncpu_slots: 4\ngrace: 1m\nrate_limits: {ranked: 5}\n")); err != nil {
		t.Fatalf("LoadConfigFile: %v", err)
	}
	if c.DataDir != "/srv/kb" || c.CPUSlots != 4 || c.Grace != time.Minute || c.RateLimits[api.CategoryRanked] != 5 || c.Listen != DefaultConfig().Listen {
		t.Errorf("loaded config = %+v", c)
	}
	if err := c.LoadConfigFile(write("")); err != nil {
		t.Errorf("an empty file: %v, want no change", err)
	}
	err := c.LoadConfigFile(write("cpu_slot: 4\n"))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "cpu_slot") {
		t.Errorf("a misspelt key: %v, want ErrConfig naming cpu_slot", err)
	}
}

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	c.DataDir = "relative"
	c.CPUSlots = -1
	c.LeaseTTL = time.Millisecond
	c.RateLimits = map[string]int{"bogus": 1}
	c.CgroupParent = "/sys/fs/cgroup/kernelbox" // a path from the hierarchies' root, not of the mount
	c.Measurement.Ceilings = map[string]problems.Ceilings{"H200": {BytesPerSec: 4.8e12, ReadBytesPerSec: -1}}
	err := c.Validate()
	for _, field := range []string{"config data", "config cpu_slots", "config lease_ttl", "config rate_limits", "config cgroup_parent", "config measurement.ceilings"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %v, want an error naming %q", err, field)
		}
	}
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
		t.Errorf("Validate() error %v is not a *ConfigError wrapping ErrConfig", err)
	}
}

// TestConfig_TypedValues: sizes and clock ranges are read once, when the
// file is loaded, and a bad one is refused there with the key's line.
func TestConfig_TypedValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	load := func(body string) (Config, error) {
		p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+".yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := DefaultConfig()
		return c, c.LoadConfigFile(p)
	}
	if c, err := load("budget: {memory: 1073741824}\nmeasurement: {clocks: {H200: 1500}}\n"); err != nil ||
		c.Budget.Memory != 1<<30 || c.Measurement.Clocks["H200"] != (runner.ClockSetting{Lo: 1500, Hi: 1500}) {
		t.Errorf("plain numbers = budget %d, clocks %+v, %v; want 1G and 1500 MHz", c.Budget.Memory, c.Measurement.Clocks, err)
	}
	if c, err := load("budget: {memory: \"\", cpus: 0, pids: 0}\n"); err != nil || c.Budget.Memory != 0 {
		t.Errorf("budget.memory \"\" (the old default) = %d, %v; want 0, no limit", c.Budget.Memory, err)
	}
	if c, err := load("cache_budget: 0\n"); err != nil || c.CacheBudget != 0 {
		t.Errorf("cache_budget 0 = %d, %v; want 0, no compile cache", c.CacheBudget, err)
	} else if err := c.Validate(); err != nil {
		t.Errorf("Validate() with cache_budget 0 = %v, want nil (0 turns the caches off)", err)
	}
	if DefaultConfig().CacheBudget != 2<<30 {
		t.Errorf("the default cache_budget = %s, want 2G", DefaultConfig().CacheBudget)
	}
	c, err := load("budget: {memory: 48G}\nprofiler: {max_report: 64M}\ncache_budget: 512M\n" +
		"measurement: {memory_slack: 1G, clocks: {H200: 1400-1600, H100: \"1500\", MI300X: standard}}\n")
	if err != nil {
		t.Fatalf("LoadConfigFile: %v", err)
	}
	c.DataDir = "/srv/kb"
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	want := map[string]runner.ClockSetting{"H200": {Lo: 1400, Hi: 1600}, "H100": {Lo: 1500, Hi: 1500}, "MI300X": {Standard: true}}
	if c.Budget.Memory != 48<<30 || c.Profiler.MaxReport != 64<<20 || c.Measurement.MemorySlack != 1<<30 || c.CacheBudget != 512<<20 ||
		len(c.Measurement.Clocks) != 3 || c.Measurement.Clocks["H200"] != want["H200"] ||
		c.Measurement.Clocks["H100"] != want["H100"] || c.Measurement.Clocks["MI300X"] != want["MI300X"] {
		t.Errorf("loaded = budget %d, max_report %d, slack %d, cache_budget %d, clocks %+v", c.Budget.Memory, c.Profiler.MaxReport,
			c.Measurement.MemorySlack, c.CacheBudget, c.Measurement.Clocks)
	}
	for _, tt := range []struct{ body, want string }{
		{"budget: {memory: lots}\n", `"lots" is not a size`},
		{"measurement: {clocks: {H200: 1600-1400}}\n", `clock "1600-1400"`},
		{"measurement: {clocks: {H200: fast}}\n", `clock "fast"`},
		{"profiler: {max_report: 12Q}\n", `"12Q" is not a size`},
	} {
		if _, err := load(tt.body); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadConfigFile(%q) = %v, want ErrConfig saying %s", tt.body, err, tt.want)
		}
	}
	small := DefaultConfig()
	small.Budget.Memory = 100 << 20
	small.Profiler.MaxReport = 10
	small.CacheBudget = 2048 // bytes: a unit forgotten
	err = small.Validate()
	for _, field := range []string{"config budget.memory", "config profiler.max_report", "config cache_budget"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %v, want an error naming %q", err, field)
		}
	}
}

// TestConfig_FileErrors: a bad file names every wrong key with its path
// and line, and the known key nearest a misspelt one.
func TestConfig_FileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"misspelt nested key", "measurement:\n  gatee: true\n", []string{"measurement.gatee: line 2: unknown key (did you mean gate?)"}},
		{"wrong kinds", "cpu_slots: many\ngrace: soon\nsandbox: maybe\n", []string{
			`cpu_slots: line 1: want a whole number, got "many"`,
			`grace: line 2: want a duration like 30s, 2m or 1h30m, got "soon"`,
			`sandbox: line 3: want true or false, got "maybe"`}},
		{"types' own messages", "budget:\n  memory: 12Q\nmeasurement:\n  clocks: {H200: fast}\n", []string{
			`budget.memory: line 2: "12Q" is not a size`, `measurement.clocks.H200: line 4: clock "fast"`}},
		{"map of sections", "measurement:\n  ceilings:\n    H200: {bytes_per_sec: 4}\n", []string{
			"measurement.ceilings.H200.bytes_per_sec: line 3: unknown key (did you mean bytes_per_s?)"}},
		{"a section given a value", "budget: 4\n", []string{`budget: line 1: want a mapping of keys`}},
		{"twice", "listen: a\nlisten: b\n", []string{"listen: line 2: given twice"}},
		{"not YAML", "listen: [\n", []string{"line 1"}},
		{"a list", "- a\n", []string{"(the file): line 1: want a mapping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			before := DefaultConfig()
			err := c.loadConfig("c.yaml", []byte(tc.body))
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("loadConfig(%q) = %v, want ErrConfig", tc.body, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("loadConfig(%q) = %v\nwant it to say %q", tc.body, err, w)
				}
			}
			if diff := cmp.Diff(before, c); diff != "" {
				t.Errorf("a refused file changed the config (-before +after):\n%s", diff)
			}
		})
	}
	c := DefaultConfig()
	if err := c.loadConfig("c.yaml", []byte("# only a comment\n")); err != nil {
		t.Errorf("a file of comments: %v, want no change", err)
	}
	if err := c.loadConfig("c.yaml", []byte("budget:\nmeasurement: {clocks: {H200: \"1500\"}, wait: 1m}\n")); err != nil || c.Measurement.Wait != time.Minute {
		t.Errorf("a good file: %v (wait %v)", err, c.Measurement.Wait)
	}
}

// TestConfig_Documented: docs/configuration.md names every key a file
// may set, so the reference cannot fall behind the code.
func TestConfig_Documented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := ConfigKeys()
	if len(keys) < 40 {
		t.Fatalf("ConfigKeys() = %d keys, want the whole config: %q", len(keys), keys)
	}
	for _, k := range keys {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/configuration.md does not document `%s`", k)
		}
	}
}
