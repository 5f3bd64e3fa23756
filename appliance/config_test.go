package appliance

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kernelbox/appliance/api"
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
	err := c.Validate()
	for _, field := range []string{"config data", "config cpu_slots", "config lease_ttl", "config rate_limits"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %v, want an error naming %q", err, field)
		}
	}
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
		t.Errorf("Validate() error %v is not a *ConfigError wrapping ErrConfig", err)
	}
}

func TestCPUSlots(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		cpus []int
		want []string
	}{
		{2, []int{0, 1}, []string{"0", "1"}},
		{2, []int{0, 1, 2, 3}, []string{"0,1", "2,3"}},
		{3, []int{4, 5, 6, 7, 9, 11, 12}, []string{"4,5", "6,7", "9,11"}},
		{4, []int{0, 1}, []string{"", "", "", ""}}, // more slots than CPUs: they share
	} {
		var got []string
		for _, s := range cpuSlots(tc.n, tc.cpus) {
			got = append(got, s.Cpuset)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("cpuSlots(%d, %d) cpusets = %q, want %q", tc.n, tc.cpus, got, tc.want)
		}
	}
}
