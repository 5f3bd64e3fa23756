-- How a submission's runs were isolated, as the ranking needs it:
-- unsandboxed is set when one of its runs ran without the sandbox (a
-- Slurm node with sandbox: false, a box serving with --no-sandbox), and
-- the leaderboard marks such an entry; unranked is why the submission is
-- kept out of the rankings ('' when it is not): a coordinator ranks an
-- unsandboxed run only when its organiser allows it
-- (slurm.rank_unsandboxed). The result itself is kept for its owner.
ALTER TABLE submissions ADD COLUMN unsandboxed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE submissions ADD COLUMN unranked TEXT NOT NULL DEFAULT '';
