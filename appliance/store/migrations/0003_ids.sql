-- Ids of submissions and runs are never reused. Their tables' INTEGER
-- PRIMARY KEY gives a new row the largest id + 1, so deleting the newest
-- submission handed its id to the next one, another user's: it inherited
-- the deleted one's event log and collided with its queue job (run:<id>),
-- so it never ran. Each insert now takes last + 1 from here; the triggers
-- keep last up with any insert. The floor starts above every id the
-- event log has seen, so a deletion made before this migration is safe too.
CREATE TABLE id_floors (
	name TEXT    PRIMARY KEY,
	last INTEGER NOT NULL
);
INSERT INTO id_floors (name, last) VALUES
	('submissions', MAX((SELECT COALESCE(MAX(id), 0) FROM submissions), (SELECT COALESCE(MAX(submission_id), 0) FROM events))),
	('runs', (SELECT COALESCE(MAX(id), 0) FROM runs));
CREATE TRIGGER submissions_id_floor AFTER INSERT ON submissions BEGIN
	UPDATE id_floors SET last = MAX(last, NEW.id) WHERE name = 'submissions';
END;
CREATE TRIGGER runs_id_floor AFTER INSERT ON runs BEGIN
	UPDATE id_floors SET last = MAX(last, NEW.id) WHERE name = 'runs';
END;
