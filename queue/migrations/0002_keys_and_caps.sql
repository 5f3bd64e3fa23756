-- An idempotency key: the appliance enqueues a run's job under "run:ID", so
-- enqueueing again after a crash between its commit and ours is harmless.
ALTER TABLE jobs ADD COLUMN key TEXT;
CREATE UNIQUE INDEX jobs_key ON jobs (key) WHERE key IS NOT NULL;
-- Per-user counts for the running cap and the queued cap.
CREATE INDEX jobs_user_state ON jobs (user, state);
