package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client is the typed HTTP client of the API: the CLI's commands are thin
// wrappers over it, and the end-to-end tests use it too.
type Client struct {
	base   string // http://host:port, or http://unix for a socket
	server string // as the user gave it, for messages
	token  string
	http   *http.Client
}

// NewClient makes a client for server: an http(s):// URL, or unix:PATH
// for the daemon's local socket.
func NewClient(server, token string) (*Client, error) {
	c := &Client{server: server, token: token, http: &http.Client{}}
	switch {
	case strings.HasPrefix(server, "unix:"):
		sock := strings.TrimPrefix(strings.TrimPrefix(server, "unix:"), "//")
		c.base = "http://unix"
		c.http.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}
	case strings.HasPrefix(server, "http://"), strings.HasPrefix(server, "https://"):
		u, err := url.Parse(server)
		if err != nil || u.Host == "" {
			return nil, Errorf(CodeInvalid, "server %q is not a URL like http://box:8470", server)
		}
		c.base = strings.TrimRight(server, "/")
	case server == "":
		return nil, Errorf(CodeInvalid, "no server: pass --server URL, set KERNELBOX_SERVER, or run `kernelbox login`")
	default:
		return nil, Errorf(CodeInvalid, "server %q: want http://HOST:PORT, https://... or unix:/path/to/kernelbox.sock", server)
	}
	return c, nil
}

// Close drops the client's idle connections: a long-lived process that is
// done with a server (a test, a script) leaves no keep-alive behind.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// do sends one request and decodes the JSON answer into out (when not
// nil). Error answers come back as *Error with the server's code.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader, ctype string, out any) error {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return Errorf(CodeInvalid, "%s %s: %v", method, path, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return Errorf(CodeUnavailable, "cannot reach the server at %s: %v", c.server, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		var e ErrorBody
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(data, &e) == nil && e.Error != nil {
			return e.Error
		}
		return Errorf(CodeInternal, "%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if out == nil {
		return nil
	}
	if w, ok := out.(io.Writer); ok {
		_, err := io.Copy(w, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return Errorf(CodeInternal, "%s %s: the answer is not the JSON expected: %v", method, path, err)
	}
	return nil
}

func (c *Client) getJSON(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, http.MethodGet, path, q, nil, "", out)
}

func (c *Client) sendJSON(ctx context.Context, method, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.do(ctx, method, path, nil, bytes.NewReader(b), "application/json", out)
}

// Health asks GET /api/health.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	return &h, c.getJSON(ctx, "/api/health", nil, &h)
}

// Me returns the token's user.
func (c *Client) Me(ctx context.Context) (*User, error) {
	var u User
	return &u, c.getJSON(ctx, "/api/me", nil, &u)
}

// Register redeems an invite for a new account.
func (c *Client) Register(ctx context.Context, invite, name string) (*Credentials, error) {
	var cr Credentials
	return &cr, c.sendJSON(ctx, http.MethodPost, "/api/register", RegisterRequest{Invite: invite, Name: name}, &cr)
}

// Join redeems an invite for the token's user.
func (c *Client) Join(ctx context.Context, invite string) ([]string, error) {
	var out Joined
	return out.Leaderboards, c.sendJSON(ctx, http.MethodPost, "/api/join", JoinRequest{Invite: invite}, &out)
}

// Leaderboards lists the leaderboards.
func (c *Client) Leaderboards(ctx context.Context) ([]LeaderboardInfo, error) {
	var out []LeaderboardInfo
	return out, c.getJSON(ctx, "/api/leaderboards", nil, &out)
}

// Leaderboard shows one leaderboard.
func (c *Client) Leaderboard(ctx context.Context, name string) (*LeaderboardInfo, error) {
	var out LeaderboardInfo
	return &out, c.getJSON(ctx, "/api/leaderboards/"+url.PathEscape(name), nil, &out)
}

// Ranking fetches the ranking of a leaderboard, on one GPU type or all.
func (c *Client) Ranking(ctx context.Context, name, gpu string) (*Ranking, error) {
	q := url.Values{}
	if gpu != "" {
		q.Set("gpu", gpu)
	}
	var out Ranking
	return &out, c.getJSON(ctx, "/api/leaderboards/"+url.PathEscape(name)+"/ranking", q, &out)
}

// Entry is a ranked entry's per-shape timings.
func (c *Client) Entry(ctx context.Context, name string, id int64) (*Entry, error) {
	var out Entry
	return &out, c.getJSON(ctx, "/api/leaderboards/"+url.PathEscape(name)+"/entries/"+strconv.FormatInt(id, 10), nil, &out)
}

// Template downloads a leaderboard's template into w.
func (c *Client) Template(ctx context.Context, name, key string, w io.Writer) error {
	return c.do(ctx, http.MethodGet, "/api/leaderboards/"+url.PathEscape(name)+"/templates/"+url.PathEscape(key), nil, nil, "", w)
}

// Submit uploads a file.
func (c *Client) Submit(ctx context.Context, req SubmitRequest) (*Submission, error) {
	q := url.Values{}
	for k, v := range map[string]string{"leaderboard": req.Leaderboard, "gpu": req.GPU, "mode": req.Mode, "file_name": req.FileName} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var sub Submission
	return &sub, c.do(ctx, http.MethodPost, "/api/submissions", q, bytes.NewReader(req.Code), "application/octet-stream", &sub)
}

// Submissions lists submissions (the token's user's, or with all, every
// user's for staff).
func (c *Client) Submissions(ctx context.Context, leaderboard string, all bool, limit int) ([]Submission, error) {
	q := url.Values{}
	if leaderboard != "" {
		q.Set("leaderboard", leaderboard)
	}
	if all {
		q.Set("all", "1")
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []Submission
	return out, c.getJSON(ctx, "/api/submissions", q, &out)
}

// Submission fetches one submission, with its code when asked.
func (c *Client) Submission(ctx context.Context, id int64, withCode bool) (*SubmissionView, error) {
	q := url.Values{}
	if withCode {
		q.Set("code", "1")
	}
	var out SubmissionView
	return &out, c.getJSON(ctx, fmt.Sprintf("/api/submissions/%d", id), q, &out)
}

// Events long-polls a submission's events after the cursor.
func (c *Client) Events(ctx context.Context, id, after int64, wait time.Duration) (*EventsPage, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}, "wait": {wait.String()}}
	var out EventsPage
	return &out, c.getJSON(ctx, fmt.Sprintf("/api/submissions/%d/events", id), q, &out)
}

// Wait follows a submission until it ends, calling fn with each event, and
// returns the final submission.
func (c *Client) Wait(ctx context.Context, id int64, fn func(Event)) (*SubmissionView, error) {
	return c.WaitIdle(ctx, id, fn, 25*time.Second, nil)
}

// WaitIdle is Wait, and calls idle each time a long-poll of up to poll
// returns with nothing new: the CLI refreshes the queue position there.
func (c *Client) WaitIdle(ctx context.Context, id int64, fn func(Event), poll time.Duration, idle func()) (*SubmissionView, error) {
	return c.WaitWith(ctx, id, fn, WaitOptions{Poll: poll, Idle: idle})
}

// WaitOptions are how WaitWith waits.
type WaitOptions struct {
	// Poll bounds each long-poll (25 s when 0).
	Poll time.Duration
	// Idle is called each time a long-poll returns with nothing new.
	Idle func()
	// Unreachable is called while the server cannot be reached, or says
	// it is unavailable (restarting), and the wait goes on: with the
	// error the first time and whenever it changes, and with nil once
	// the server answers again. A follower says so rather than wait in
	// silence.
	Unreachable func(err error)
}

// WaitWith is Wait, as opt says.
func (c *Client) WaitWith(ctx context.Context, id int64, fn func(Event), opt WaitOptions) (*SubmissionView, error) {
	if opt.Poll <= 0 {
		opt.Poll = 25 * time.Second
	}
	var after int64
	last := "" // the error of the failing polls, "" while they answer
	for {
		page, err := c.Events(ctx, id, after, opt.Poll)
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.Code == CodeUnavailable {
				// The daemon may be restarting: its jobs survive, so wait.
				if opt.Unreachable != nil && err.Error() != last {
					opt.Unreachable(err)
				}
				last = err.Error()
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Second):
					continue
				}
			}
			return nil, err
		}
		if last != "" && opt.Unreachable != nil {
			opt.Unreachable(nil)
		}
		last = ""
		for _, ev := range page.Events {
			if fn != nil {
				fn(ev)
			}
		}
		after = page.Next
		if page.Done {
			return c.Submission(ctx, id, false)
		}
		if len(page.Events) == 0 && opt.Idle != nil {
			opt.Idle()
		}
	}
}

// Cancel cancels a submission.
func (c *Client) Cancel(ctx context.Context, id int64) (*Submission, error) {
	var out Submission
	return &out, c.do(ctx, http.MethodPost, fmt.Sprintf("/api/submissions/%d/cancel", id), nil, nil, "", &out)
}

// Queue shows the queue.
func (c *Client) Queue(ctx context.Context) (*QueueStatus, error) {
	var out QueueStatus
	return &out, c.getJSON(ctx, "/api/queue", nil, &out)
}

// GPUs lists the box's slots: its GPUs (and CPU-backend slots) and what
// each is doing.
func (c *Client) GPUs(ctx context.Context) (*GPUsStatus, error) {
	var out GPUsStatus
	return &out, c.getJSON(ctx, "/api/gpus", nil, &out)
}

// Drain stops a GPU slot from taking jobs (staff); Undrain lets it again.
func (c *Client) Drain(ctx context.Context, id, reason string) (*GPUsStatus, error) {
	var out GPUsStatus
	return &out, c.sendJSON(ctx, http.MethodPost, "/api/admin/gpus/"+url.PathEscape(id)+"/drain", DrainRequest{Reason: reason}, &out)
}

// Undrain lets a drained slot take jobs again (staff).
func (c *Client) Undrain(ctx context.Context, id string) (*GPUsStatus, error) {
	var out GPUsStatus
	return &out, c.do(ctx, http.MethodPost, "/api/admin/gpus/"+url.PathEscape(id)+"/undrain", nil, nil, "", &out)
}

// Users lists users (staff).
func (c *Client) Users(ctx context.Context) ([]User, error) {
	var out []User
	return out, c.getJSON(ctx, "/api/admin/users", nil, &out)
}

// AddUser creates a user and returns its token (staff).
func (c *Client) AddUser(ctx context.Context, name string, role Role) (*Credentials, error) {
	var out Credentials
	return &out, c.sendJSON(ctx, http.MethodPost, "/api/admin/users", AddUserRequest{Name: name, Role: string(role)}, &out)
}

// Ban bans or unbans a user (staff).
func (c *Client) Ban(ctx context.Context, name string, banned bool) (*User, error) {
	var out User
	return &out, c.sendJSON(ctx, http.MethodPost, "/api/admin/users/"+url.PathEscape(name)+"/ban", BanRequest{Banned: banned}, &out)
}

// IssueToken gives a user a new token (staff).
func (c *Client) IssueToken(ctx context.Context, name string, revokeOthers bool) (*Credentials, error) {
	var out Credentials
	return &out, c.sendJSON(ctx, http.MethodPost, "/api/admin/users/"+url.PathEscape(name)+"/tokens", TokenRequest{RevokeOthers: revokeOthers}, &out)
}

// CreateInvite makes an invite code (staff).
func (c *Client) CreateInvite(ctx context.Context, inv Invite) (*InviteCode, error) {
	var out InviteCode
	return &out, c.sendJSON(ctx, http.MethodPost, "/api/admin/invites", inv, &out)
}

// DeleteLeaderboard removes a leaderboard; force takes its submissions
// with it (staff).
func (c *Client) DeleteLeaderboard(ctx context.Context, name string, force bool) (*LeaderboardGone, error) {
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	var out LeaderboardGone
	return &out, c.do(ctx, http.MethodDelete, "/api/admin/leaderboards/"+url.PathEscape(name), q, nil, "", &out)
}

// Pause drains every GPU slot in service, saying why (staff).
func (c *Client) Pause(ctx context.Context, why string) (*GPUsStatus, error) {
	var out GPUsStatus
	return &out, c.sendJSON(ctx, http.MethodPost, "/api/admin/queue/pause", DrainRequest{Reason: why}, &out)
}

// Resume undrains the slots a pause drained (staff).
func (c *Client) Resume(ctx context.Context) (*GPUsStatus, error) {
	var out GPUsStatus
	return &out, c.do(ctx, http.MethodPost, "/api/admin/queue/resume", nil, nil, "", &out)
}

// Stats counts the box's activity since since, the zero time for ever (staff).
func (c *Client) Stats(ctx context.Context, since time.Time) (*Stats, error) {
	q := url.Values{}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339))
	}
	var out Stats
	return &out, c.getJSON(ctx, "/api/admin/stats", q, &out)
}

// Invites lists the invites (staff).
func (c *Client) Invites(ctx context.Context) ([]InviteInfo, error) {
	var out []InviteInfo
	return out, c.getJSON(ctx, "/api/admin/invites", nil, &out)
}

// RevokeInvite deletes an invite, named by its code or id (staff).
func (c *Client) RevokeInvite(ctx context.Context, ref string) (*Revoked, error) {
	var out Revoked
	return &out, c.do(ctx, http.MethodDelete, "/api/admin/invites/"+url.PathEscape(ref), nil, nil, "", &out)
}

// LoadProblems uploads a problem set (archive, a gzipped tar) and loads it
// as how says.
func (c *Client) LoadProblems(ctx context.Context, archive io.Reader, how ProblemLoad) ([]LoadedProblem, error) {
	q := url.Values{}
	if how.File != "" {
		q.Set("file", how.File)
	}
	if how.Dir != "" {
		q.Set("dir", how.Dir)
	}
	if how.Name != "" {
		q.Set("name", how.Name)
	}
	if len(how.GPUs) > 0 {
		q.Set("gpus", strings.Join(how.GPUs, ","))
	}
	if how.Replace {
		q.Set("replace", "true")
	}
	if how.DryRun {
		q.Set("dry_run", "true")
	}
	var out Loaded
	return out.Loaded, c.do(ctx, http.MethodPost, "/api/admin/problems", q, archive, "application/gzip", &out)
}

// ChangeLeaderboard edits a leaderboard (staff).
func (c *Client) ChangeLeaderboard(ctx context.Context, name string, ch LeaderboardChange) (*LeaderboardInfo, error) {
	var out LeaderboardInfo
	return &out, c.sendJSON(ctx, http.MethodPatch, "/api/admin/leaderboards/"+url.PathEscape(name), ch, &out)
}

// MarkHacked marks (or clears) a submission as hacked (staff).
func (c *Client) MarkHacked(ctx context.Context, id int64, hacked bool) (*Submission, error) {
	var out Submission
	return &out, c.sendJSON(ctx, http.MethodPost, fmt.Sprintf("/api/admin/submissions/%d/hacked", id), HackedRequest{Hacked: hacked}, &out)
}

// Flagged lists the submissions the scanner flagged, awaiting review (staff).
func (c *Client) Flagged(ctx context.Context) ([]Submission, error) {
	var out Flagged
	return out.Submissions, c.getJSON(ctx, "/api/admin/review", nil, &out)
}

// Review clears a flagged submission or confirms it as a cheat (staff).
func (c *Client) Review(ctx context.Context, id int64, review string) (*Submission, error) {
	var out Submission
	return &out, c.sendJSON(ctx, http.MethodPost, fmt.Sprintf("/api/admin/submissions/%d/review", id), ReviewRequest{Review: review}, &out)
}

// DeleteSubmission deletes a submission (staff).
func (c *Client) DeleteSubmission(ctx context.Context, id int64) error {
	return c.do(ctx, http.MethodDelete, fmt.Sprintf("/api/submissions/%d", id), nil, nil, "", nil)
}

// Profile writes a submission's Nsight Compute report to w: run picks one
// run, 0 the first with a report.
func (c *Client) Profile(ctx context.Context, id, run int64, w io.Writer) error {
	var q url.Values
	if run > 0 {
		q = url.Values{"run": {strconv.FormatInt(run, 10)}}
	}
	return c.do(ctx, http.MethodGet, fmt.Sprintf("/api/submissions/%d/profile", id), q, nil, "", w)
}

// Backup writes a tar.gz backup of the box (GET /api/admin/backup) to w;
// admin only. The archive ends with its manifest: one cut short has none.
func (c *Client) Backup(ctx context.Context, w io.Writer) error {
	return c.do(ctx, http.MethodGet, "/api/admin/backup", nil, nil, "", w)
}

// Export writes every submission q lets through to w as JSON lines of
// ExportRow (GET /api/admin/export); admin only.
func (c *Client) Export(ctx context.Context, q ExportQuery, w io.Writer) error {
	v := url.Values{}
	for key, on := range map[string]bool{"passing": q.Passing, "ranked": q.Ranked, "anonymise": q.Anonymise} {
		if on {
			v.Set(key, "true")
		}
	}
	return c.do(ctx, http.MethodGet, "/api/admin/export", v, nil, "", w)
}
