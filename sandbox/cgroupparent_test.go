package sandbox

import (
	"path/filepath"
	"regexp"
	"testing"
)

func TestDefaultCgroupParent(t *testing.T) {
	t.Parallel()
	a := DefaultCgroupParent("/var/lib/kernelbox")
	if !regexp.MustCompile(`^kernelbox-[0-9a-f]{8}$`).MatchString(a) {
		t.Errorf("DefaultCgroupParent(/var/lib/kernelbox) = %q, want kernelbox-<8 hex digits>", a)
	}
	if err := CheckCgroupParent(a); err != nil {
		t.Errorf("CheckCgroupParent(%q) = %v", a, err)
	}
	// One name for every spelling of one directory, another for another.
	for _, same := range []string{"/var/lib/kernelbox/", "/var/lib//kernelbox", "/var/lib/x/../kernelbox"} {
		if got := DefaultCgroupParent(same); got != a {
			t.Errorf("DefaultCgroupParent(%q) = %q, want %q as for /var/lib/kernelbox", same, got, a)
		}
	}
	if got := DefaultCgroupParent("/srv/kernelbox"); got == a {
		t.Errorf("DefaultCgroupParent(/srv/kernelbox) = %q, the same as /var/lib/kernelbox's", got)
	}
	// A relative directory is named as the absolute one it is.
	abs, err := filepath.Abs("data")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := DefaultCgroupParent("data"), DefaultCgroupParent(abs); got != want {
		t.Errorf("DefaultCgroupParent(data) = %q, want %q (its absolute path's)", got, want)
	}
}

func TestCheckCgroupParent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"kernelbox", true},
		{"kernelbox-3f2a9c1e", true},
		{"system.slice/kernelbox.service/runs", true},
		{`system.slice/kernelbox\x2dtest.service`, true},
		{"", false},
		{"/kernelbox", false},
		{"kernelbox/", false},
		{"a//b", false},
		{"..", false},
		{"a/../b", false},
		{".", false},
		{"a\x00b", false},
	} {
		if err := CheckCgroupParent(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckCgroupParent(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
