-- Gang allocation: a job asks for gpus GPUs of its type at once, and counts
-- how many jobs started ahead of it while it headed the queue and did not
-- fit (the backfill that its reservation allows).
ALTER TABLE jobs ADD COLUMN gpus INTEGER NOT NULL DEFAULT 1 CHECK (gpus >= 1);
ALTER TABLE jobs ADD COLUMN passed_over INTEGER NOT NULL DEFAULT 0;
