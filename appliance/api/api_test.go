package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kernelbox/problems"
)

// TestEvent_Payload: every payload written as its kind decodes back to the
// same value, so the daemon's writers and the clients' readers agree.
func TestEvent_Payload(t *testing.T) {
	t.Parallel()
	score := 1.5e-6
	cases := []Payload{
		&UserCreated{Name: "ann", Role: RoleContestant},
		&UserRegistered{Name: "bob", Role: RoleOrganiser},
		&UserBanned{Banned: true},
		&UserJoined{Leaderboards: []string{"grayscale"}},
		&TokenIssued{RevokedOthers: true},
		&InviteCreated{Invite: Invite{Role: RoleContestant, Uses: 3, Leaderboards: []string{"a"}}},
		&InviteRevoked{ID: "0123456789ab"},
		&LeaderboardDeleted{Name: "a", Submissions: 2},
		&LeaderboardPut{Name: "vectoradd", Created: true, GPUs: []string{"H200"}},
		&LeaderboardChanged{Name: "vectoradd", Change: LeaderboardChange{RateLimits: map[string]int{"test": 2}}},
		&SubmissionQueued{Leaderboard: "vectoradd", GPU: "cpu", Mode: "test", Runs: 1},
		&SubmissionFlagged{Rules: []string{"stream"}},
		&SubmissionReviewed{Review: ReviewCleared},
		&SubmissionHacked{Hacked: true},
		&SubmissionDeleted{},
		&SubmissionEnded{Status: StatusDone, Passed: true, Score: &score},
		&SubmissionEnded{Status: StatusFailed, Reason: "no slot"},
		&SubmissionEnded{Status: StatusCancelled, Reason: "cancelled"},
		&RunStarted{Run: 4, GPUID: "cpu:0"},
		&RunRetried{Run: 4, Attempt: 2},
		&RunTest{Run: 4, Phase: "test", Index: 1, Spec: "size: 8", Status: "pass"},
		&RunPhase{Run: 4, Phase: "benchmark", Passed: true, Wall: time.Second,
			Benchmarks: []problems.BenchmarkResult{{Index: 0, Spec: "size: 8", Runs: 10, Mean: 1200}}},
		&RunFinished{Run: 4, Status: StatusDone, Passed: true},
		&StoreLossAccepted{StoreID: "ab12", Submissions: 25, Runs: 40},
	}
	seen := map[EventKind]bool{}
	for i, p := range cases {
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		ev := Event{ID: int64(i + 1), Kind: p.EventKind(), Data: data}
		got, err := ev.Payload()
		if err != nil {
			t.Errorf("Event{Kind: %s}.Payload() error: %v", ev.Kind, err)
			continue
		}
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("Event{Kind: %s}.Payload() mismatch (-want +got):\n%s", ev.Kind, diff)
		}
		seen[ev.Kind] = true
	}
	for k := range payloads {
		if !seen[k] {
			t.Errorf("kind %s has no round-trip case", k)
		}
	}
}

func TestEvent_PayloadUnknownAndBad(t *testing.T) {
	t.Parallel()
	if _, err := (Event{ID: 9, Kind: "run.teleported", Data: []byte(`{}`)}).Payload(); err == nil || !strings.Contains(err.Error(), `unknown kind "run.teleported"`) {
		t.Errorf("Payload() of an unknown kind = %v, want an error naming it", err)
	}
	if _, err := (Event{ID: 9, Kind: EventRunTest, Data: []byte(`{"index": "one"}`)}).Payload(); err == nil || !strings.Contains(err.Error(), "event 9 (run.test)") {
		t.Errorf("Payload() of a bad payload = %v, want an error naming the event", err)
	}
}

// TestErrorMappings: each code has its own HTTP status and an exit status;
// an error without a code is internal.
func TestErrorMappings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code       Code
		http, exit int
	}{
		{CodeInvalid, http.StatusBadRequest, ExitUsage},
		{CodeUnauthorized, http.StatusUnauthorized, ExitUnauthorized},
		{CodeForbidden, http.StatusForbidden, ExitRefused},
		{CodeNotFound, http.StatusNotFound, ExitUsage},
		{CodeConflict, http.StatusConflict, ExitRefused},
		{CodeTooLarge, http.StatusRequestEntityTooLarge, ExitRefused},
		{CodeExhausted, http.StatusTooManyRequests, ExitRefused},
		{CodeUnavailable, http.StatusServiceUnavailable, ExitServer},
		{CodeInternal, http.StatusInternalServerError, ExitServer},
	}
	for _, tt := range tests {
		if got := HTTPStatus(tt.code); got != tt.http {
			t.Errorf("HTTPStatus(%s) = %d, want %d", tt.code, got, tt.http)
		}
		if got := ExitStatus(tt.code); got != tt.exit {
			t.Errorf("ExitStatus(%s) = %d, want %d", tt.code, got, tt.exit)
		}
	}
	wrapped := fmt.Errorf("submit: %w", Errorf(CodeForbidden, "closed"))
	if got := ErrorCode(wrapped); got != CodeForbidden {
		t.Errorf("ErrorCode(wrapped forbidden) = %s, want forbidden", got)
	}
	if got := ErrorCode(errors.New("disk on fire")); got != CodeInternal {
		t.Errorf("ErrorCode(plain error) = %s, want internal", got)
	}
}

func TestNewClient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		server string
		want   string // an error substring; empty for none
	}{
		{"http://127.0.0.1:8470", ""},
		{"https://box.example:8470/", ""},
		{"unix:/run/kernelbox/kernelbox.sock", ""},
		{"", "no server"},
		{"box:8470", "want http://HOST:PORT"},
		{"http://", "is not a URL"},
	}
	for _, tt := range tests {
		_, err := NewClient(tt.server, "t")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("NewClient(%q) error: %v", tt.server, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || ErrorCode(err) != CodeInvalid):
			t.Errorf("NewClient(%q) = %v, want an invalid error with %q", tt.server, err, tt.want)
		}
	}
}
