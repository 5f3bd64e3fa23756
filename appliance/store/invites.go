package store

import (
	"context"
	"database/sql"
	"strings"

	"kernelbox/appliance/api"
)

// inviteIDLen is how much of an invite's hash names it: the code itself
// is shown once and stored only hashed, so staff list and revoke invites
// by this prefix.
const inviteIDLen = 12

// InviteID is the id under which an invite code is listed.
func InviteID(code string) string { return hashSecret(code)[:inviteIDLen] }

// Invites lists the invites, newest first, used-up and expired ones too.
func (s *Store) Invites(ctx context.Context) ([]api.InviteInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT i.hash, i.role, i.uses_left, i.expires_ms, i.created_ms,
		COALESCE((SELECT group_concat(l.name, ',') FROM invite_scopes sc JOIN leaderboards l ON l.id = sc.leaderboard_id
			WHERE sc.invite_hash = i.hash), '')
		FROM invites i ORDER BY i.created_ms DESC, i.hash`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []api.InviteInfo{}
	for rows.Next() {
		var inv api.InviteInfo
		var hash, lbs string
		var expires, created sql.NullInt64
		if err := rows.Scan(&hash, &inv.Role, &inv.UsesLeft, &expires, &created, &lbs); err != nil {
			return nil, err
		}
		inv.ID, inv.Created, inv.Expires = hash[:inviteIDLen], fromMS(created), fromMS(expires)
		inv.Leaderboards = []string{}
		if lbs != "" {
			inv.Leaderboards = strings.Split(lbs, ",")
		}
		out = append(out, inv)
	}
	return out, rows.Err()
}

// RevokeInvite deletes an invite, named by its code or its id, so that it
// admits nobody more; those it already admitted stay.
func (s *Store) RevokeInvite(ctx context.Context, ref string) (string, error) {
	var id string
	err := s.update(ctx, "revoke invite", func(tx *txn) error {
		var hashes []string
		if strings.HasPrefix(ref, "inv_") {
			hashes = []string{hashSecret(ref)}
		} else {
			if len(ref) != inviteIDLen || strings.Trim(ref, "0123456789abcdef") != "" {
				return api.Errorf(api.CodeInvalid, "invite %q: give the code or its %d-character id (kernelbox admin invites list)", ref, inviteIDLen)
			}
			rows, err := tx.QueryContext(ctx, `SELECT hash FROM invites WHERE substr(hash, 1, ?) = ?`, inviteIDLen, ref)
			if err != nil {
				return err
			}
			for rows.Next() {
				var h string
				if err := rows.Scan(&h); err != nil {
					rows.Close()
					return err
				}
				hashes = append(hashes, h)
			}
			rows.Close()
			if len(hashes) > 1 {
				return api.Errorf(api.CodeConflict, "invite id %s names %d invites: revoke by code", ref, len(hashes))
			}
		}
		if len(hashes) == 0 {
			return api.Errorf(api.CodeNotFound, "no invite %s", ref)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM invites WHERE hash = ?`, hashes[0])
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return api.Errorf(api.CodeNotFound, "no invite %s", ref)
		}
		id = hashes[0][:inviteIDLen]
		return appendEvent(ctx, tx, s.now(), 0, 0, api.InviteRevoked{ID: id})
	})
	return id, err
}
