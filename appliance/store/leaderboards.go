package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"kernelbox/appliance/api"
)

// Leaderboard is one problem offered for ranking: the API's view plus
// what stays on the server (its key, its problem's directory, the seed of
// its secret runs).
// Its own fields never reach the wire (json:"-"): handlers answer with the
// embedded api.Leaderboard.
type Leaderboard struct {
	api.Leaderboard
	ID int64 `json:"-"`
	// ProblemDir is relative to the data directory when it lies inside it
	// (a copied or restored data directory stays whole), else absolute.
	ProblemDir string `json:"-"`
	// ProblemSHA is the problem's fingerprint when it was loaded, or "".
	ProblemSHA string `json:"-"`
	SecretSeed int64  `json:"-"`
}

// Ended reports whether the deadline has passed at now.
func (l *Leaderboard) Ended(now time.Time) bool {
	return !l.Deadline.IsZero() && !now.Before(l.Deadline)
}

// OffersGPU reports whether the leaderboard ranks on gpuType.
func (l *Leaderboard) OffersGPU(gpuType string) bool {
	for _, g := range l.GPUs {
		if g == gpuType {
			return true
		}
	}
	return false
}

// LeaderboardSpec is a leaderboard as a problem load describes it.
type LeaderboardSpec struct {
	Name        string
	Description string
	Lang        string
	RankingBy   string
	Deadline    time.Time
	GPUs        []string
	ProblemDir  string
	ProblemSHA  string
}

// Where a leaderboard came from (LeaderboardOptions.Source).
const (
	SourceLibrary = "library" // the bundled problems, reloaded at every start
	SourceUpload  = "upload"  // an organiser's problem set
)

// What loading did to one leaderboard (LoadOutcome.Action): the API's words.
const (
	LoadCreated  = api.LoadCreated
	LoadUpdated  = api.LoadUpdated  // the library's own, reloaded
	LoadReplaced = api.LoadReplaced // an upload's, asked for with Replace
	LoadKept     = api.LoadKept     // left as it was: an upload replaced the library's
	LoadRefused  = api.LoadRefused  // a name taken, Replace not given
)

// LoadOptions say how PutLeaderboards treats names already taken.
type LoadOptions struct {
	Source  string // SourceLibrary or SourceUpload
	Replace bool   // an upload replaces leaderboards of the same names
	DryRun  bool   // say what would happen and change nothing
}

// LoadOutcome is what PutLeaderboards did, or would do, to one name.
type LoadOutcome struct {
	Name   string
	Action string
	Why    string   // for kept and refused
	Kept   []string // fields an organiser set, which a load never changes
}

// PutLeaderboards loads leaderboards in one transaction. A new name is
// created. A taken one is updated only by its own source's reload (the
// library's) or by an upload with Replace; otherwise an upload is refused
// for that name and the library keeps its hands off. An update replaces
// the problem, description, deadline and GPU types, except the fields an
// organiser edited by hand (ChangeLeaderboard), which stay as the
// organiser left them; the secret seed, visibility, rate limits and
// submissions always stay, so reloading a fixed problem never resets a
// running competition. A spec that is invalid fails the whole load.
func (s *Store) PutLeaderboards(ctx context.Context, specs []LeaderboardSpec, opt LoadOptions) ([]LoadOutcome, error) {
	if opt.Source != SourceLibrary && opt.Source != SourceUpload {
		return nil, fmt.Errorf("put leaderboards: source %q", opt.Source)
	}
	for _, spec := range specs {
		if err := validName("leaderboard name", spec.Name, 64); err != nil {
			return nil, err
		}
		if len(spec.GPUs) == 0 {
			return nil, api.Errorf(api.CodeInvalid, "leaderboard %s: no GPU types", spec.Name)
		}
	}
	var out []LoadOutcome
	err := s.update(ctx, "put leaderboards", func(tx *txn) error {
		out = out[:0]
		for _, spec := range specs {
			o, err := s.putLeaderboard(ctx, tx, spec, opt)
			if err != nil {
				return fmt.Errorf("leaderboard %s: %w", spec.Name, err)
			}
			out = append(out, o)
		}
		if opt.DryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	return out, err
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

func (s *Store) putLeaderboard(ctx context.Context, tx *txn, spec LeaderboardSpec, opt LoadOptions) (LoadOutcome, error) {
	o := LoadOutcome{Name: spec.Name}
	now := ms(s.now())
	var id int64
	var source, edited string
	err := tx.QueryRowContext(ctx, `SELECT id, source, edited FROM leaderboards WHERE name = ?`, spec.Name).Scan(&id, &source, &edited)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		o.Action = LoadCreated
		var seedBytes [8]byte
		if _, err := rand.Read(seedBytes[:]); err != nil {
			return o, err
		}
		// A positive 31-bit seed: the harness adds it to each case's seed.
		seed := int64(binary.LittleEndian.Uint32(seedBytes[:]) >> 1)
		err = tx.QueryRowContext(ctx, `INSERT INTO leaderboards (name, problem_dir, problem_sha, description, lang, ranking_by, deadline_ms, secret_seed, created_ms, updated_ms, source)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			spec.Name, spec.ProblemDir, spec.ProblemSHA, spec.Description, spec.Lang, spec.RankingBy, nullMS(spec.Deadline), seed, now, now, opt.Source).Scan(&id)
		if err != nil {
			return o, err
		}
	case err != nil:
		return o, err
	case opt.Source == SourceLibrary && source != SourceLibrary:
		o.Action, o.Why = LoadKept, "an organiser's problem set replaced the bundled one"
		return o, nil
	case opt.Source == SourceUpload && !opt.Replace:
		o.Action, o.Why = LoadRefused, fmt.Sprintf("leaderboard %s exists (from %s): load with --replace to replace its problem", spec.Name, sourceName(source))
		return o, nil
	default:
		o.Action = LoadUpdated
		if opt.Source == SourceUpload {
			o.Action = LoadReplaced
		}
		o.Kept = editedFields(edited)
		q := `UPDATE leaderboards SET problem_dir = ?, problem_sha = ?, description = ?, lang = ?, ranking_by = ?, source = ?, updated_ms = ?`
		args := []any{spec.ProblemDir, spec.ProblemSHA, spec.Description, spec.Lang, spec.RankingBy, opt.Source, now}
		if !slices.Contains(o.Kept, editedDeadline) {
			q += `, deadline_ms = ?`
			args = append(args, nullMS(spec.Deadline))
		}
		if _, err := tx.ExecContext(ctx, q+` WHERE id = ?`, append(args, id)...); err != nil {
			return o, err
		}
	}
	if !slices.Contains(o.Kept, editedGPUs) {
		if err := setGPUs(ctx, tx, id, spec.GPUs); err != nil {
			return o, err
		}
	}
	return o, appendEvent(ctx, tx, s.now(), 0, 0, api.LeaderboardPut{Name: spec.Name, Created: o.Action == LoadCreated, GPUs: spec.GPUs})
}

func setGPUs(ctx context.Context, tx *txn, id int64, gpus []string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM leaderboard_gpus WHERE leaderboard_id = ?`, id); err != nil {
		return err
	}
	for _, g := range gpus {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO leaderboard_gpus (leaderboard_id, gpu_type) VALUES (?, ?)`, id, g); err != nil {
			return err
		}
	}
	return nil
}

// Fields an organiser's edit keeps from loads (the edited column).
const (
	editedDeadline = "deadline"
	editedGPUs     = "gpus"
)

func editedFields(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// markEdited adds field to a leaderboard's edited fields.
func markEdited(ctx context.Context, tx *txn, id int64, field string) error {
	var edited string
	if err := tx.QueryRowContext(ctx, `SELECT edited FROM leaderboards WHERE id = ?`, id).Scan(&edited); err != nil {
		return err
	}
	fields := editedFields(edited)
	if slices.Contains(fields, field) {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE leaderboards SET edited = ? WHERE id = ?`, strings.Join(append(fields, field), ","), id)
	return err
}

func sourceName(source string) string {
	if source == SourceLibrary {
		return "the bundled library"
	}
	return "an uploaded problem set"
}

const leaderboardColumns = `id, name, problem_dir, problem_sha, description, lang, ranking_by, deadline_ms, visibility, secret_seed, created_ms, updated_ms`

func scanLeaderboard(row interface{ Scan(...any) error }) (*Leaderboard, error) {
	var l Leaderboard
	var deadline sql.NullInt64
	var created, updated int64
	if err := row.Scan(&l.ID, &l.Name, &l.ProblemDir, &l.ProblemSHA, &l.Description, &l.Lang, &l.RankingBy, &deadline, &l.Visibility,
		&l.SecretSeed, &created, &updated); err != nil {
		return nil, err
	}
	l.Deadline = fromMS(deadline)
	l.Created, l.Updated = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return &l, nil
}

func leaderboardByName(ctx context.Context, q queryer, name string) (*Leaderboard, error) {
	l, err := scanLeaderboard(q.QueryRowContext(ctx, `SELECT `+leaderboardColumns+` FROM leaderboards WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, api.Errorf(api.CodeNotFound, "no leaderboard %s (`kernelbox leaderboards` lists them)", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get leaderboard %s: %w", name, err)
	}
	if err := fillLeaderboard(ctx, q, l); err != nil {
		return nil, fmt.Errorf("get leaderboard %s: %w", name, err)
	}
	return l, nil
}

func fillLeaderboard(ctx context.Context, q queryer, l *Leaderboard) error {
	rows, err := q.QueryContext(ctx, `SELECT gpu_type FROM leaderboard_gpus WHERE leaderboard_id = ? ORDER BY gpu_type`, l.ID)
	if err != nil {
		return err
	}
	l.GPUs = []string{}
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return err
		}
		l.GPUs = append(l.GPUs, g)
	}
	rows.Close()
	rows, err = q.QueryContext(ctx, `SELECT category, per_hour FROM rate_limits WHERE leaderboard_id = ?`, l.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	l.RateLimits = map[string]int{}
	for rows.Next() {
		var c string
		var n int
		if err := rows.Scan(&c, &n); err != nil {
			return err
		}
		l.RateLimits[c] = n
	}
	return rows.Err()
}

// Leaderboard returns the named leaderboard.
func (s *Store) Leaderboard(ctx context.Context, name string) (*Leaderboard, error) {
	return leaderboardByName(ctx, s.db, name)
}

// Leaderboards lists every leaderboard by name.
func (s *Store) Leaderboards(ctx context.Context) ([]*Leaderboard, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+leaderboardColumns+` FROM leaderboards ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list leaderboards: %w", err)
	}
	var out []*Leaderboard
	for rows.Next() {
		l, err := scanLeaderboard(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("list leaderboards: %w", err)
		}
		out = append(out, l)
	}
	rows.Close()
	for _, l := range out {
		if err := fillLeaderboard(ctx, s.db, l); err != nil {
			return nil, fmt.Errorf("list leaderboards: %w", err)
		}
	}
	return out, nil
}

// ChangeLeaderboard applies an organiser's edit.
func (s *Store) ChangeLeaderboard(ctx context.Context, name string, ch api.LeaderboardChange) (*Leaderboard, error) {
	if ch.Visibility != nil && *ch.Visibility != api.VisibilityOpen && *ch.Visibility != api.VisibilityClosed {
		return nil, api.Errorf(api.CodeInvalid, "visibility %q: want open or closed", *ch.Visibility)
	}
	for c := range ch.RateLimits {
		if c != api.CategoryTest && c != api.CategoryRanked {
			return nil, api.Errorf(api.CodeInvalid, "rate limit category %q: want test or ranked", c)
		}
	}
	if ch.GPUs != nil && len(ch.GPUs) == 0 {
		return nil, api.Errorf(api.CodeInvalid, "a leaderboard ranks on at least one GPU type")
	}
	for _, g := range ch.GPUs {
		if err := CheckGPUType(g); err != nil {
			return nil, err
		}
	}
	err := s.update(ctx, "change leaderboard "+name, func(tx *txn) error {
		l, err := leaderboardByName(ctx, tx, name)
		if err != nil {
			return err
		}
		if ch.GPUs != nil {
			if err := setGPUs(ctx, tx, l.ID, ch.GPUs); err != nil {
				return err
			}
			if err := markEdited(ctx, tx, l.ID, editedGPUs); err != nil {
				return err
			}
		}
		if ch.Visibility != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE leaderboards SET visibility = ? WHERE id = ?`, *ch.Visibility, l.ID); err != nil {
				return err
			}
		}
		if ch.Deadline != nil {
			if _, err := tx.ExecContext(ctx, `UPDATE leaderboards SET deadline_ms = ? WHERE id = ?`, nullMS(*ch.Deadline), l.ID); err != nil {
				return err
			}
			if err := markEdited(ctx, tx, l.ID, editedDeadline); err != nil {
				return err
			}
		}
		for c, n := range ch.RateLimits {
			q := `INSERT INTO rate_limits (leaderboard_id, category, per_hour) VALUES (?, ?, ?)
				ON CONFLICT (leaderboard_id, category) DO UPDATE SET per_hour = excluded.per_hour`
			args := []any{l.ID, c, n}
			if n < 0 {
				q, args = `DELETE FROM rate_limits WHERE leaderboard_id = ? AND category = ?`, args[:2]
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE leaderboards SET updated_ms = ? WHERE id = ?`, ms(s.now()), l.ID); err != nil {
			return err
		}
		return appendEvent(ctx, tx, s.now(), 0, 0, api.LeaderboardChanged{Name: name, Change: ch})
	})
	if err != nil {
		return nil, err
	}
	return s.Leaderboard(ctx, name)
}

// IsMember reports whether the user may submit to a closed leaderboard.
func (s *Store) IsMember(ctx context.Context, lbID, userID int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM members WHERE leaderboard_id = ? AND user_id = ?`, lbID, userID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("membership: %w", err)
	}
	return n > 0, nil
}

// api.Ranking returns the per-user best of a leaderboard on one GPU type. Only
// passed leaderboard-mode submissions whose secret twin also passed have a
// score; hacked ones, flagged ones awaiting review, unranked ones (an
// unsandboxed run the organiser does not rank) and banned users are left
// out. Equal scores share a
// rank, and the earlier submission is a user's best among equal ones.
func (s *Store) Ranking(ctx context.Context, lbID int64, gpuType string) ([]api.RankRow, error) {
	rows, err := s.db.QueryContext(ctx, `WITH best AS (
			SELECT s.id, s.user_id, s.score, s.score_err, s.language, s.created_ms, s.unsandboxed,
			       ROW_NUMBER() OVER (PARTITION BY s.user_id ORDER BY s.score, s.id) AS n
			FROM submissions s JOIN users u ON u.id = s.user_id
			WHERE s.leaderboard_id = ? AND s.gpu_type = ? AND s.score IS NOT NULL AND s.passed = 1
			  AND s.hacked = 0 AND s.review != 'flagged' AND s.unranked = '' AND u.banned = 0)
		SELECT RANK() OVER (ORDER BY b.score), u.name, b.score, b.score_err, b.language, b.id, b.created_ms, b.unsandboxed
		FROM best b JOIN users u ON u.id = b.user_id WHERE b.n = 1
		ORDER BY b.score, b.id`, lbID, gpuType)
	if err != nil {
		return nil, fmt.Errorf("ranking: %w", err)
	}
	defer rows.Close()
	out := []api.RankRow{}
	for rows.Next() {
		var r api.RankRow
		var at int64
		var serr sql.NullFloat64
		if err := rows.Scan(&r.Rank, &r.User, &r.Score, &serr, &r.Language, &r.Submission, &at, &r.Unsandboxed); err != nil {
			return nil, fmt.Errorf("ranking: %w", err)
		}
		r.At = time.UnixMilli(at).UTC()
		r.ScoreErr = serr.Float64
		out = append(out, r)
	}
	return out, rows.Err()
}

// CheckGPUType refuses a GPU type a leaderboard cannot rank on: the rule
// of an edit's --gpus and a load's.
func CheckGPUType(g string) error { return validName("GPU type", g, 32) }

// Deleted is what deleting a leaderboard took with it: the queue's jobs
// to cancel and the profile reports to remove, which live outside the
// database.
type Deleted struct {
	Submissions int
	Jobs        []int64
	Profiles    []string
}

// DeleteLeaderboard removes a leaderboard an organiser loaded, with its
// submissions, runs and rankings when force (else one with submissions is
// refused). A bundled one is refused: the library would bring it back at
// the next start. The event log keeps the record.
func (s *Store) DeleteLeaderboard(ctx context.Context, name string, force bool) (Deleted, error) {
	var d Deleted
	err := s.update(ctx, "delete leaderboard "+name, func(tx *txn) error {
		var id int64
		var source string
		err := tx.QueryRowContext(ctx, `SELECT id, source FROM leaderboards WHERE name = ?`, name).Scan(&id, &source)
		if errors.Is(err, sql.ErrNoRows) {
			return api.Errorf(api.CodeNotFound, "no leaderboard %s (`kernelbox leaderboards` lists them)", name)
		}
		if err != nil {
			return err
		}
		if source == SourceLibrary {
			return api.Errorf(api.CodeConflict, "leaderboard %s is bundled with kernelbox and comes back at the next start: close it instead (kernelbox admin leaderboard %s --visibility closed)", name, name)
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM submissions WHERE leaderboard_id = ?`, id).Scan(&d.Submissions); err != nil {
			return err
		}
		if d.Submissions > 0 && !force {
			return api.Errorf(api.CodeConflict, "leaderboard %s has %d submissions: --force deletes them with it", name, d.Submissions)
		}
		if d.Jobs, err = jobIDs(tx.QueryContext(ctx, `SELECT COALESCE(r.job_id, 0) FROM runs r JOIN submissions s ON s.id = r.submission_id
			WHERE s.leaderboard_id = ? AND r.status IN ('queued','running')`, id)); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT r.profile_path FROM runs r JOIN submissions s ON s.id = r.submission_id
			WHERE s.leaderboard_id = ? AND r.profile_path != ''`, id)
		if err != nil {
			return err
		}
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return err
			}
			d.Profiles = append(d.Profiles, p)
		}
		rows.Close()
		if _, err := tx.ExecContext(ctx, `DELETE FROM leaderboards WHERE id = ?`, id); err != nil {
			return err
		}
		return appendEvent(ctx, tx, s.now(), 0, 0, api.LeaderboardDeleted{Name: name, Submissions: d.Submissions})
	})
	return d, err
}
