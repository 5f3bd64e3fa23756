CREATE TABLE jobs (
	id            INTEGER PRIMARY KEY,
	class         INTEGER NOT NULL,          -- 0 test-class, 1 ranked: lower runs first
	user          TEXT    NOT NULL,
	gpu_type      TEXT    NOT NULL,
	payload       BLOB    NOT NULL,
	state         TEXT    NOT NULL DEFAULT 'queued'
	              CHECK (state IN ('queued','leased','running','succeeded','failed','cancelled','timed_out')),
	attempts      INTEGER NOT NULL DEFAULT 0,
	max_attempts  INTEGER NOT NULL,
	created_ms    INTEGER NOT NULL,
	run_after_ms  INTEGER NOT NULL,
	lease_token   TEXT,
	lease_boot    TEXT,
	lease_until_ms INTEGER,
	started_ms    INTEGER,
	finished_ms   INTEGER,
	error         TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX jobs_ready ON jobs (gpu_type, state, class, run_after_ms);
CREATE INDEX jobs_leases ON jobs (state, lease_until_ms);

-- GPU time each user has consumed: the fair-share key.
CREATE TABLE usage (
	user   TEXT PRIMARY KEY,
	gpu_ms INTEGER NOT NULL DEFAULT 0
);
