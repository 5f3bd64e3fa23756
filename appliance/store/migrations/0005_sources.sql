-- Where a leaderboard came from, and what organisers set by hand. The
-- bundled library is reloaded at every start: it updates only its own
-- leaderboards (source 'library'), never one an upload replaced, and a
-- reload keeps what an organiser edited (edited: a comma-separated list
-- of fields, 'deadline' and 'gpus'), so a restart never reopens a
-- contest an organiser ended. An upload refuses to replace a leaderboard
-- of the same name unless asked to.
ALTER TABLE leaderboards ADD COLUMN source TEXT NOT NULL DEFAULT 'upload' CHECK (source IN ('library', 'upload'));
ALTER TABLE leaderboards ADD COLUMN edited TEXT NOT NULL DEFAULT '';
UPDATE leaderboards SET source = 'library' WHERE problem_dir LIKE '%/problems/library/%';
-- Deadlines organisers changed before this migration, from the event log.
UPDATE leaderboards SET edited = 'deadline' WHERE name IN (
	SELECT json_extract(data, '$.name') FROM events
	WHERE kind = 'leaderboard.changed' AND json_extract(data, '$.change.deadline') IS NOT NULL);
