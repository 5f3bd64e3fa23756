-- The fingerprint of a leaderboard's problem files when they were loaded
-- (problems.Task.Fingerprint), checked before each run. Empty for rows
-- loaded before it was kept: their next load records it.
ALTER TABLE leaderboards ADD COLUMN problem_sha TEXT NOT NULL DEFAULT '';
