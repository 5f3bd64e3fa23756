package appliance

import (
	"encoding/json"
	"testing"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// TestRedact: a contestant's view of their submission hides the secret
// run's reason and report (they would reveal the secret inputs); staff
// see them.
func TestRedact(t *testing.T) {
	t.Parallel()
	mk := func() *store.Submission {
		return &store.Submission{Submission: api.Submission{Runs: []api.Run{
			{ID: 1, Reason: "test 0 failed"},
			{ID: 2, Secret: true, Reason: "secret case n: 7; seed: 991 differs", Report: json.RawMessage(`{"tests":[]}`)},
		}}}
	}
	contestant := &store.User{User: api.User{Name: "ann", Role: api.RoleContestant}}
	sub := mk()
	redact(sub, contestant)
	if r := sub.Runs[1]; r.Reason == "secret case n: 7; seed: 991 differs" || r.Report != nil {
		t.Errorf("a contestant sees the secret run as %q / %s; want both hidden", r.Reason, r.Report)
	}
	if sub.Runs[0].Reason != "test 0 failed" {
		t.Errorf("the public run's reason = %q, want it kept", sub.Runs[0].Reason)
	}
	staff := &store.User{User: api.User{Name: "org", Role: api.RoleOrganiser}}
	sub = mk()
	redact(sub, staff)
	if r := sub.Runs[1]; r.Report == nil || r.Reason == "" {
		t.Errorf("an organiser sees the secret run as %q / %s; want it whole", r.Reason, r.Report)
	}
}
