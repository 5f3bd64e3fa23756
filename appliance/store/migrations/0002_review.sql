-- The static scanner's findings at submission, and the organisers' review
-- of a flagged submission: '' (nothing found), flagged (out of the
-- rankings until reviewed), cleared (back in), confirmed (a cheat: hacked).
ALTER TABLE submissions ADD COLUMN review TEXT NOT NULL DEFAULT '' CHECK (review IN ('', 'flagged', 'cleared', 'confirmed'));
ALTER TABLE submissions ADD COLUMN findings TEXT NOT NULL DEFAULT '';
CREATE INDEX submissions_review ON submissions (review) WHERE review = 'flagged';
