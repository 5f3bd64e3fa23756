-- The appliance's own database (the queue keeps its jobs in another file).

CREATE TABLE users (
	id         INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL UNIQUE,
	role       TEXT    NOT NULL CHECK (role IN ('admin','organiser','contestant')),
	banned     INTEGER NOT NULL DEFAULT 0,
	created_ms INTEGER NOT NULL
);

-- API tokens, stored as the SHA-256 of the token: a copy of the database
-- does not let anyone log in.
CREATE TABLE tokens (
	hash       TEXT    PRIMARY KEY,
	user_id    INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	label      TEXT    NOT NULL DEFAULT '',
	created_ms INTEGER NOT NULL
);
CREATE INDEX tokens_user ON tokens (user_id);

CREATE TABLE leaderboards (
	id          INTEGER PRIMARY KEY,
	name        TEXT    NOT NULL UNIQUE,
	problem_dir TEXT    NOT NULL,   -- the loaded problem's directory under the data dir
	description TEXT    NOT NULL DEFAULT '',
	lang        TEXT    NOT NULL,
	ranking_by  TEXT    NOT NULL,
	deadline_ms INTEGER,            -- NULL: no deadline
	visibility  TEXT    NOT NULL DEFAULT 'open' CHECK (visibility IN ('open','closed')),
	secret_seed INTEGER NOT NULL,
	created_ms  INTEGER NOT NULL,
	updated_ms  INTEGER NOT NULL
);

CREATE TABLE leaderboard_gpus (
	leaderboard_id INTEGER NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
	gpu_type       TEXT    NOT NULL,
	PRIMARY KEY (leaderboard_id, gpu_type)
);

-- Submissions per user per hour, per mode category ('test' or 'ranked').
CREATE TABLE rate_limits (
	leaderboard_id INTEGER NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
	category       TEXT    NOT NULL CHECK (category IN ('test','ranked')),
	per_hour       INTEGER NOT NULL CHECK (per_hour >= 0),
	PRIMARY KEY (leaderboard_id, category)
);

-- Who may submit to a closed leaderboard.
CREATE TABLE members (
	leaderboard_id INTEGER NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
	user_id        INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	PRIMARY KEY (leaderboard_id, user_id)
);

-- Invite codes, stored hashed like tokens. Redeeming one creates a user
-- (register) and makes them a member of the invite's leaderboards.
CREATE TABLE invites (
	hash       TEXT    PRIMARY KEY,
	role       TEXT    NOT NULL CHECK (role IN ('organiser','contestant')),
	uses_left  INTEGER NOT NULL CHECK (uses_left >= 0),
	expires_ms INTEGER,
	created_ms INTEGER NOT NULL
);
CREATE TABLE invite_scopes (
	invite_hash    TEXT    NOT NULL REFERENCES invites (hash) ON DELETE CASCADE,
	leaderboard_id INTEGER NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
	PRIMARY KEY (invite_hash, leaderboard_id)
);

-- Submitted code, stored once per content.
CREATE TABLE code (
	sha256 TEXT    PRIMARY KEY,
	data   BLOB    NOT NULL,
	size   INTEGER NOT NULL
);

CREATE TABLE submissions (
	id             INTEGER PRIMARY KEY,
	leaderboard_id INTEGER NOT NULL REFERENCES leaderboards (id) ON DELETE CASCADE,
	user_id        INTEGER NOT NULL REFERENCES users (id),
	file_name      TEXT    NOT NULL,
	code_sha256    TEXT    NOT NULL REFERENCES code (sha256),
	gpu_type       TEXT    NOT NULL,
	mode           TEXT    NOT NULL CHECK (mode IN ('test','benchmark','leaderboard','profile')),
	category       TEXT    NOT NULL CHECK (category IN ('test','ranked')),
	status         TEXT    NOT NULL DEFAULT 'queued' CHECK (status IN ('queued','running','done','failed','cancelled')),
	passed         INTEGER NOT NULL DEFAULT 0,
	score          REAL,               -- seconds; set only for a ranked, passed leaderboard submission
	reason         TEXT    NOT NULL DEFAULT '',
	hacked         INTEGER NOT NULL DEFAULT 0,
	created_ms     INTEGER NOT NULL,
	finished_ms    INTEGER
);
CREATE INDEX submissions_user ON submissions (user_id, id);
CREATE INDEX submissions_rate ON submissions (leaderboard_id, user_id, category, created_ms);
CREATE INDEX submissions_ranking ON submissions (leaderboard_id, gpu_type, score) WHERE score IS NOT NULL;

-- One row per job: a leaderboard submission has its public run and its
-- secret-seed twin.
CREATE TABLE runs (
	id            INTEGER PRIMARY KEY,
	submission_id INTEGER NOT NULL REFERENCES submissions (id) ON DELETE CASCADE,
	secret        INTEGER NOT NULL DEFAULT 0,
	mode          TEXT    NOT NULL,
	job_id        INTEGER,             -- the queue's job, once enqueued
	status        TEXT    NOT NULL DEFAULT 'queued' CHECK (status IN ('queued','running','done','failed','cancelled','error')),
	lease_token   TEXT,                -- the holder's lease: only it may finish the run
	gpu_type      TEXT    NOT NULL,
	gpu_id        TEXT    NOT NULL DEFAULT '',
	attempts      INTEGER NOT NULL DEFAULT 0,
	passed        INTEGER NOT NULL DEFAULT 0,
	score         REAL,
	reason        TEXT    NOT NULL DEFAULT '',
	report        TEXT    NOT NULL DEFAULT '',  -- problems.Report as JSON, output capped
	system_info   TEXT    NOT NULL DEFAULT '',
	telemetry     TEXT    NOT NULL DEFAULT '',
	profile_path  TEXT    NOT NULL DEFAULT '',
	started_ms    INTEGER,
	finished_ms   INTEGER,
	UNIQUE (submission_id, secret)
);
CREATE INDEX runs_open ON runs (status) WHERE status IN ('queued','running');

-- The append-only event log: what happened, to whom, when. Progress of a
-- submission is read from here too.
CREATE TABLE events (
	id            INTEGER PRIMARY KEY,
	at_ms         INTEGER NOT NULL,
	kind          TEXT    NOT NULL,
	user_id       INTEGER,
	submission_id INTEGER,
	data          TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX events_submission ON events (submission_id, id) WHERE submission_id IS NOT NULL;
