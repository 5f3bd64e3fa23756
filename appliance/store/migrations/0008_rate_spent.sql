-- A deleted submission still counts against its user's hourly rate
-- limit: counting only the submissions table, deleting one gave its
-- quota back. Rows past the longest window are pruned as rows come.
CREATE TABLE rate_spent (
	leaderboard_id INTEGER NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
	user_id        INTEGER NOT NULL,
	category       TEXT    NOT NULL,
	created_ms     INTEGER NOT NULL
);
CREATE INDEX rate_spent_key ON rate_spent (leaderboard_id, user_id, category, created_ms);
