package runner

import (
	"encoding/json"
	"strings"
	"testing"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// A run's isolation survives the trip from a node's report, and decides
// whether a coordinator ranks it.
func TestIsolationVerdict(t *testing.T) {
	t.Parallel()
	// As a node reports it: JSON, decoded into a map.
	viaJSON := func(iso Isolation) map[string]any {
		b, err := json.Marshal(map[string]any{logIsolation: iso, "node": iso.Node})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	on := hostIsolation(true)
	// A test binary has no module list: the version reads "unknown" here.
	if !strings.HasPrefix(on.Runtime, "libcontainer ") || on.Kernel == "" || on.Node == "" || hostIsolation(false).Runtime != "none" {
		t.Errorf("hostIsolation(true) = %+v, want libcontainer, the kernel and the node (and runtime none without)", on)
	}
	off := hostIsolation(false)
	off.Node = "gpu7"
	if got, ok := IsolationOf(viaJSON(off)); !ok || got != off {
		t.Errorf("IsolationOf(%+v as JSON) = %+v, %v", off, got, ok)
	}
	run := func(mode string, secret bool) *store.RunContext {
		return &store.RunContext{Run: store.RunRecord{Run: api.Run{Mode: mode, Secret: secret}}}
	}
	for _, tc := range []struct {
		name            string
		rc              *store.RunContext
		info            map[string]any
		unrank          bool
		wantUnsandboxed bool
		wantReason      string // a part of it; "" for none
	}{
		{"sandboxed", run("leaderboard", false), viaJSON(on), true, false, ""},
		{"local box's own", run("leaderboard", false), map[string]any{logIsolation: on}, true, false, ""},
		{"unsandboxed, ranked by the organiser's leave", run("leaderboard", false), viaJSON(off), false, true, ""},
		{"unsandboxed, unranked", run("leaderboard", false), viaJSON(off), true, true, "ran without the sandbox on node gpu7"},
		{"secret twin names no node", run("leaderboard", true), viaJSON(off), true, true, "the secret-seed run ran without the sandbox, and"},
		{"a node that does not say", run("leaderboard", false), map[string]any{"node": "gpu7"}, true, true, "did not say how"},
		{"a test run ranks nothing", run("test", false), viaJSON(off), true, true, ""},
	} {
		unsandboxed, reason := isolationVerdict(tc.rc, tc.info, tc.unrank)
		if unsandboxed != tc.wantUnsandboxed || (tc.wantReason == "") != (reason == "") || !strings.Contains(reason, tc.wantReason) {
			t.Errorf("%s: isolationVerdict = %v, %q; want %v and a reason with %q", tc.name, unsandboxed, reason, tc.wantUnsandboxed, tc.wantReason)
		}
	}
}
