-- The database's identity, made once with it. The data directory keeps a
-- copy beside it (appliance/datadir.go): a database deleted and made anew,
-- or another box's copied in, no longer matches, and the daemon says so
-- instead of starting fresh.
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
INSERT INTO meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))));
