-- GPUs an operator (or a failed health check) took out of service, by
-- slot id: a restart keeps them out until someone undrains them.
CREATE TABLE drains (
	slot     TEXT PRIMARY KEY,
	why      TEXT NOT NULL,
	since_ms INTEGER NOT NULL
);
