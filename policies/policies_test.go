package policies

import (
	"testing"
	"time"
)

func TestDefaultSeccomp_RefusedStayOut(t *testing.T) {
	t.Parallel()
	p := DefaultSeccomp()
	seen := map[string]bool{}
	for _, r := range p.Rules {
		for _, n := range r.Names {
			if r.Action == ActAllow && len(r.Args) == 0 {
				if why, bad := Refused[n]; bad {
					t.Errorf("%s is allowed without condition, but refused because %s", n, why)
				}
			}
			if r.Action == ActAllow && len(r.Args) == 0 && seen[n] {
				t.Errorf("%s is listed twice", n)
			}
			seen[n] = true
		}
	}
	for _, must := range []string{"read", "mmap", "ioctl", "futex", "execve", "clone"} {
		if !seen[must] {
			t.Errorf("%s is not in the profile", must)
		}
	}
}

func TestLimits_Validate(t *testing.T) {
	t.Parallel()
	if err := DefaultLimits().Validate(); err != nil {
		t.Errorf("DefaultLimits().Validate() = %v", err)
	}
	bad := DefaultLimits()
	bad.WallTime = 0
	if err := bad.Validate(); err == nil {
		t.Error("Validate() with no wall time = nil")
	}
	if l := ForMode("profile", 3*time.Second); l.WallTime != 3*time.Second || l.Memory <= DefaultLimits().Memory {
		t.Errorf("ForMode(profile) = %+v", l)
	}
}
