package store

import (
	"context"
	"fmt"

	"kernelbox/appliance/api"
)

// Marks are what a data directory records of its database to notice a
// loss: the database's identity and the highest ids it has handed out.
// One type with the backup manifest's (api.StoreMarks), which carries
// them to a restore.
type Marks = api.StoreMarks

// Marks reads the database's identity and id floors
// (migrations/0003_ids.sql, 0004_identity.sql).
func (s *Store) Marks(ctx context.Context) (Marks, error) {
	var m Marks
	err := s.db.QueryRowContext(ctx, `SELECT (SELECT value FROM meta WHERE key = 'store_id'),
		(SELECT last FROM id_floors WHERE name = 'submissions'), (SELECT last FROM id_floors WHERE name = 'runs')`).
		Scan(&m.StoreID, &m.Submissions, &m.Runs)
	if err != nil {
		return m, fmt.Errorf("read the store's marks: %w", err)
	}
	return m, nil
}

// AcceptLoss raises the id floors to what was handed out before a loss
// (an older backup restored, a database made anew), so that no id seen
// by a contestant, a queue job or an artefact file is handed out again,
// and records the loss in the event log.
func (s *Store) AcceptLoss(ctx context.Context, before Marks) error {
	return s.update(ctx, "accept the store's loss", func(tx *txn) error {
		for name, last := range map[string]int64{"submissions": before.Submissions, "runs": before.Runs} {
			if _, err := tx.ExecContext(ctx, `UPDATE id_floors SET last = MAX(last, ?) WHERE name = ?`, last, name); err != nil {
				return err
			}
		}
		return appendEvent(ctx, tx, s.now(), 0, 0, api.StoreLossAccepted(before))
	})
}

// Empty says whether the database has no users yet: a first start.
func (s *Store) Empty(ctx context.Context) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM users`).Scan(&n); err != nil {
		return false, fmt.Errorf("count users: %w", err)
	}
	return n == 0, nil
}
