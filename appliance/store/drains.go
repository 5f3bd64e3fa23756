package store

import (
	"context"
	"fmt"
)

// Drains are the slots taken out of service, with why: they stay out
// across restarts until undrained.
func (s *Store) Drains(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT slot, why FROM drains`)
	if err != nil {
		return nil, fmt.Errorf("read drains: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var slot, why string
		if err := rows.Scan(&slot, &why); err != nil {
			return nil, fmt.Errorf("read drains: %w", err)
		}
		out[slot] = why
	}
	return out, rows.Err()
}

// SetDrain records that slot is out of service and why, or, with why
// empty, that it is back.
func (s *Store) SetDrain(ctx context.Context, slot, why string) error {
	return s.update(ctx, "drain "+slot, func(tx *txn) error {
		if why == "" {
			_, err := tx.ExecContext(ctx, `DELETE FROM drains WHERE slot = ?`, slot)
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO drains (slot, why, since_ms) VALUES (?, ?, ?)
			ON CONFLICT (slot) DO UPDATE SET why = excluded.why, since_ms = excluded.since_ms`, slot, why, ms(s.now()))
		return err
	})
}
