-- A score's standard error (seconds), carried from the benchmarks' own:
-- the ranking marks entries whose intervals overlap as statistical ties
-- instead of ordering them by noise. NULL where the harness gave none
-- (and for every score stored before).
ALTER TABLE runs ADD COLUMN score_err REAL;
ALTER TABLE submissions ADD COLUMN score_err REAL;
