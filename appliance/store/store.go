package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/queue"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the appliance's database: users, tokens, invites, leaderboards,
// submissions, runs and the event log, in one SQLite file with the queue's
// jobs, so that a submission and its jobs are stored in one transaction.
type Store struct {
	db    *sql.DB
	queue *queue.Store
	now   func() time.Time

	// watched holds, per submission someone is long-polling, a channel
	// closed at its next event: watchers wake without a goroutine or a
	// timer each.
	mu      sync.Mutex
	watched map[int64]*watch
}

// storeMigrations are the appliance's tables', a component of the shared
// file beside the queue's.
var storeMigrations = queue.Migrations{Component: "appliance", FS: migrations, Dir: "migrations", Legacy: "users"}

// Open opens (creating if needed) kernelbox's database at path: the
// queue's tables and the appliance's, each brought to this binary's schema.
func Open(ctx context.Context, path string, now func() time.Time) (*Store, error) {
	db, err := queue.OpenDB(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	// Both components at once: each reads its version before either
	// changes the file.
	if err := queue.Migrate(ctx, db, queue.JobTables, storeMigrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Store{db: db, queue: queue.New(db, queue.Options{Now: now}), now: now, watched: map[int64]*watch{}}, nil
}

// Queue is the job queue whose tables share the store's file.
func (s *Store) Queue() *queue.Store { return s.queue }

// Close closes the database, the queue's tables with it.
func (s *Store) Close() error { return s.db.Close() }

// User is an account: the API's view plus the key the store joins on.
type User struct {
	api.User
	ID int64 `json:"-"`
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func nullMS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// newSecret returns a random token with a readable prefix ("kb_" for API
// tokens, "inv_" for invites) and the hash the store keeps instead.
func newSecret(prefix string) (secret, hash string, err error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	secret = prefix + hex.EncodeToString(b)
	return secret, hashSecret(secret), nil
}

func hashSecret(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// validName keeps user, leaderboard and GPU type names safe in URLs,
// paths and logs; what names the kind ("user name").
func validName(what, name string, maxLen int) error {
	if name == "" || len(name) > maxLen {
		return api.Errorf(api.CodeInvalid, "%s %q: want 1 to %d characters", what, name, maxLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return api.Errorf(api.CodeInvalid, "%s %q: use letters, digits, '-', '_' and '.' only", what, name)
		}
	}
	return nil
}

// CreateUser adds a user and returns it with its first API token.
func (s *Store) CreateUser(ctx context.Context, name string, role api.Role) (*User, string, error) {
	if err := validName("user name", name, 64); err != nil {
		return nil, "", err
	}
	var u *User
	var token string
	err := s.update(ctx, "create user "+name, func(tx *txn) error {
		var err error
		if u, token, err = createUser(ctx, tx, s.now(), name, role); err != nil {
			return err
		}
		return appendEvent(ctx, tx, s.now(), u.ID, 0, api.UserCreated{Name: name, Role: role})
	})
	if err != nil {
		return nil, "", err
	}
	return u, token, nil
}

func createUser(ctx context.Context, tx *txn, now time.Time, name string, role api.Role) (*User, string, error) {
	u := &User{User: api.User{Name: name, Role: role, Created: now.UTC()}}
	// Names differ by more than case: "Ann" beside "ann" would pass for
	// her in every listing and ranking.
	var taken string
	err := tx.QueryRowContext(ctx, `SELECT name FROM users WHERE name = ? COLLATE NOCASE`, name).Scan(&taken)
	if err == nil {
		return nil, "", api.Errorf(api.CodeConflict, "user %s already exists (names differ by more than case)", taken)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, "", fmt.Errorf("create user %s: %w", name, err)
	}
	err = tx.QueryRowContext(ctx, `INSERT INTO users (name, role, created_ms) VALUES (?, ?, ?) RETURNING id`,
		name, role, ms(now)).Scan(&u.ID)
	if isUnique(err) {
		return nil, "", api.Errorf(api.CodeConflict, "user %s already exists", name)
	}
	if err != nil {
		return nil, "", fmt.Errorf("create user %s: %w", name, err)
	}
	token, err := insertToken(ctx, tx, now, u.ID, "first")
	if err != nil {
		return nil, "", fmt.Errorf("create user %s: %w", name, err)
	}
	return u, token, nil
}

func insertToken(ctx context.Context, tx *txn, now time.Time, userID int64, label string) (string, error) {
	token, hash, err := newSecret("kb_")
	if err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO tokens (hash, user_id, label, created_ms) VALUES (?, ?, ?, ?)`,
		hash, userID, label, ms(now)); err != nil {
		return "", err
	}
	return token, nil
}

// IssueToken gives the named user one more API token. With revokeOthers,
// the user's earlier tokens stop working (a leaked token).
func (s *Store) IssueToken(ctx context.Context, name string, revokeOthers bool) (string, error) {
	var token string
	err := s.update(ctx, "issue token for "+name, func(tx *txn) error {
		u, err := userByName(ctx, tx, name)
		if err != nil {
			return err
		}
		if revokeOthers {
			if _, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE user_id = ?`, u.ID); err != nil {
				return err
			}
		}
		if token, err = insertToken(ctx, tx, s.now(), u.ID, "issued"); err != nil {
			return err
		}
		return appendEvent(ctx, tx, s.now(), u.ID, 0, api.TokenIssued{RevokedOthers: revokeOthers})
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// Authenticate returns the user a token belongs to.
func (s *Store) Authenticate(ctx context.Context, token string) (*User, error) {
	if token == "" {
		return nil, api.Errorf(api.CodeUnauthorized, "no API token: log in with `kernelbox login --server URL --token T` or set KERNELBOX_TOKEN")
	}
	u, err := scanUser(s.db.QueryRowContext(ctx, `SELECT u.id, u.name, u.role, u.banned, u.created_ms
		FROM tokens t JOIN users u ON u.id = t.user_id WHERE t.hash = ?`, hashSecret(token)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, api.Errorf(api.CodeUnauthorized, "the API token is not valid (revoked, mistyped, or for another server)")
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	return u, nil
}

// queryer is what reads need, from the database or inside a transaction
// (both *sql.DB and *txn have it).
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func scanUser(row *sql.Row) (*User, error) {
	var u User
	var created int64
	if err := row.Scan(&u.ID, &u.Name, &u.Role, &u.Banned, &created); err != nil {
		return nil, err
	}
	u.Created = time.UnixMilli(created).UTC()
	return &u, nil
}

func userByName(ctx context.Context, q queryer, name string) (*User, error) {
	u, err := scanUser(q.QueryRowContext(ctx, `SELECT id, name, role, banned, created_ms FROM users WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, api.Errorf(api.CodeNotFound, "no user %s", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get user %s: %w", name, err)
	}
	return u, nil
}

// User returns the named user.
func (s *Store) User(ctx context.Context, name string) (*User, error) {
	return userByName(ctx, s.db, name)
}

// Users lists every user by name.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, role, banned, created_ms FROM users ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		var u User
		var created int64
		if err := rows.Scan(&u.ID, &u.Name, &u.Role, &u.Banned, &created); err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		u.Created = time.UnixMilli(created).UTC()
		out = append(out, u)
	}
	return out, rows.Err()
}

// SetBanned bans or unbans a user. A banned user's token still
// authenticates (so they are told why), but they can only read: the API
// refuses them every other request (appliance/api.go), and their entries
// leave the rankings.
func (s *Store) SetBanned(ctx context.Context, name string, banned bool) error {
	return s.update(ctx, "ban "+name, func(tx *txn) error {
		u, err := userByName(ctx, tx, name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE users SET banned = ? WHERE id = ?`, banned, u.ID); err != nil {
			return err
		}
		return appendEvent(ctx, tx, s.now(), u.ID, 0, api.UserBanned{Banned: banned})
	})
}

// txn is a write transaction that remembers which submissions got events,
// so that only their watchers are woken after the commit.
type txn struct {
	*sql.Tx
	touched map[int64]bool
}

// update runs fn in a write transaction and wakes the watchers of the
// submissions it logged events for.
func (s *Store) update(ctx context.Context, op string, fn func(tx *txn) error) error {
	sqlTx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	tx := &txn{Tx: sqlTx, touched: map[int64]bool{}}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		var e *api.Error
		if errors.As(err, &e) {
			return err
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	s.notify(tx.touched)
	return nil
}

// CreateInvite stores an invite and returns its code (shown once).
func (s *Store) CreateInvite(ctx context.Context, inv api.Invite) (string, error) {
	if inv.Role == "" {
		inv.Role = api.RoleContestant
	}
	if _, err := api.ParseRole(string(inv.Role)); err != nil {
		return "", fmt.Errorf("invite: %w", err)
	}
	if inv.Role == api.RoleAdmin {
		return "", api.Errorf(api.CodeInvalid, "invites cannot make admins; use `kernelbox admin users add NAME --role admin`")
	}
	if inv.Uses <= 0 {
		inv.Uses = 1
	}
	code, hash, err := newSecret("inv_")
	if err != nil {
		return "", err
	}
	err = s.update(ctx, "create invite", func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO invites (hash, role, uses_left, expires_ms, created_ms) VALUES (?, ?, ?, ?, ?)`,
			hash, inv.Role, inv.Uses, nullMS(inv.Expires), ms(s.now())); err != nil {
			return err
		}
		for _, name := range inv.Leaderboards {
			lb, err := leaderboardByName(ctx, tx, name)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO invite_scopes (invite_hash, leaderboard_id) VALUES (?, ?)`, hash, lb.ID); err != nil {
				return err
			}
		}
		return appendEvent(ctx, tx, s.now(), 0, 0, api.InviteCreated{Invite: inv})
	})
	if err != nil {
		return "", err
	}
	return code, nil
}

// Register redeems an invite: it creates the user, makes them a member of
// the invite's leaderboards and returns their token, in one transaction.
func (s *Store) Register(ctx context.Context, code, name string) (*User, string, error) {
	if err := validName("user name", name, 64); err != nil {
		return nil, "", err
	}
	var u *User
	var token string
	err := s.update(ctx, "register "+name, func(tx *txn) error {
		hash := hashSecret(code)
		role, err := s.redeem(ctx, tx, hash)
		if err != nil {
			return err
		}
		if u, token, err = createUser(ctx, tx, s.now(), name, role); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO members (leaderboard_id, user_id)
			SELECT leaderboard_id, ? FROM invite_scopes WHERE invite_hash = ?`, u.ID, hash); err != nil {
			return err
		}
		return appendEvent(ctx, tx, s.now(), u.ID, 0, api.UserRegistered{Name: name, Role: role})
	})
	if err != nil {
		return nil, "", err
	}
	return u, token, nil
}

// redeem spends one use of the invite with that hash and returns its role.
func (s *Store) redeem(ctx context.Context, tx *txn, hash string) (api.Role, error) {
	var role api.Role
	var uses int
	var expires sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT role, uses_left, expires_ms FROM invites WHERE hash = ?`, hash).Scan(&role, &uses, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return "", api.Errorf(api.CodeUnauthorized, "the invite code is not valid")
	}
	if err != nil {
		return "", err
	}
	if uses <= 0 || (expires.Valid && expires.Int64 < ms(s.now())) {
		return "", api.Errorf(api.CodeForbidden, "the invite code has been used up or has expired")
	}
	if _, err := tx.ExecContext(ctx, `UPDATE invites SET uses_left = uses_left - 1 WHERE hash = ?`, hash); err != nil {
		return "", err
	}
	return role, nil
}

// Join redeems an invite for an existing user: membership of its
// leaderboards, without a new account.
func (s *Store) Join(ctx context.Context, code string, u *User) ([]string, error) {
	var names []string
	err := s.update(ctx, "join", func(tx *txn) error {
		hash := hashSecret(code)
		if _, err := s.redeem(ctx, tx, hash); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `INSERT INTO members (leaderboard_id, user_id)
			SELECT leaderboard_id, ? FROM invite_scopes WHERE invite_hash = ? ON CONFLICT DO NOTHING
			RETURNING (SELECT name FROM leaderboards l WHERE l.id = leaderboard_id)`, u.ID, hash)
		if err != nil {
			return err
		}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				rows.Close()
				return err
			}
			names = append(names, n)
		}
		rows.Close()
		return appendEvent(ctx, tx, s.now(), u.ID, 0, api.UserJoined{Leaderboards: names})
	})
	return names, err
}

// appendEvent logs one event in the caller's transaction. The payload's
// type names its kind, so a kind cannot be written with another's fields.
func appendEvent(ctx context.Context, tx *txn, now time.Time, userID, subID int64, data api.Payload) error {
	kind := data.EventKind()
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("event %s: %w", kind, err)
	}
	var uid, sid any
	if userID != 0 {
		uid = userID
	}
	if subID != 0 {
		sid = subID
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (at_ms, kind, user_id, submission_id, data) VALUES (?, ?, ?, ?, ?)`,
		ms(now), kind, uid, sid, string(b)); err != nil {
		return fmt.Errorf("event %s: %w", kind, err)
	}
	if subID != 0 {
		tx.touched[subID] = true
	}
	return nil
}

// AppendEvent logs an event outside any other change.
func (s *Store) AppendEvent(ctx context.Context, subID int64, data api.Payload) error {
	return s.update(ctx, "log "+string(data.EventKind()), func(tx *txn) error {
		return appendEvent(ctx, tx, s.now(), 0, subID, data)
	})
}

func (s *Store) notify(subs map[int64]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range subs {
		if w, ok := s.watched[id]; ok {
			close(w.ch)
			delete(s.watched, id)
		}
	}
}

// watch is the wake-up channel of one submission and how many hold it.
type watch struct {
	ch chan struct{}
	n  int
}

// Changed returns a channel that is closed when the submission next gets
// an event, and a func to call once the caller stops waiting on it.
// Watchers of one submission share the channel; a commit wakes only the
// watchers of the submissions it touched, so a thousand long-polls cost
// Watchers counts the submissions someone is long-polling now.
func (s *Store) Watchers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watched)
}

// Watching reports whether someone is long-polling the submission.
func (s *Store) Watching(subID int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.watched[subID]
	return ok
}

// nothing while their submissions wait, and none is left behind.
func (s *Store) Changed(subID int64) (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.watched[subID]
	if !ok {
		w = &watch{ch: make(chan struct{})}
		s.watched[subID] = w
	}
	w.n++
	return w.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.n--; w.n == 0 && s.watched[subID] == w {
			delete(s.watched, subID)
		}
	}
}

// SubmissionEvents returns the submission's events after the given id.
func (s *Store) SubmissionEvents(ctx context.Context, subID, after int64) ([]api.Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, at_ms, kind, data FROM events WHERE submission_id = ? AND id > ? ORDER BY id LIMIT 500`, subID, after)
	if err != nil {
		return nil, fmt.Errorf("events of submission %d: %w", subID, err)
	}
	defer rows.Close()
	out := []api.Event{}
	for rows.Next() {
		e := api.Event{Submission: subID}
		var at int64
		var data string
		if err := rows.Scan(&e.ID, &at, &e.Kind, &data); err != nil {
			return nil, fmt.Errorf("events of submission %d: %w", subID, err)
		}
		e.At = time.UnixMilli(at).UTC()
		e.Data = json.RawMessage(data)
		out = append(out, e)
	}
	return out, rows.Err()
}
