-- Accounts, sessions, incidents, timeline and the append-only audit log.
-- Instants are RFC 3339 strings in UTC ("2026-11-29T16:40:00Z"), which sort as text.

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    role          TEXT NOT NULL CHECK (role IN ('responder', 'reviewer', 'admin')),
    password_hash TEXT,
    time_zone     TEXT,
    created_at    TEXT NOT NULL
);

CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users (id),
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL
);

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    data        BLOB NOT NULL,
    expiry_date INTEGER NOT NULL
);

CREATE TABLE incident_counters (
    year INTEGER PRIMARY KEY,
    last INTEGER NOT NULL
);

CREATE TABLE incidents (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL,
    service     TEXT NOT NULL,
    severity    TEXT NOT NULL CHECK (severity IN ('SEV1', 'SEV2', 'SEV3', 'SEV4')),
    description TEXT NOT NULL DEFAULT '',
    state       TEXT NOT NULL CHECK (state IN ('investigating', 'resolved', 'postmortem_draft', 'confirmed', 'learned')),
    opened_by   TEXT NOT NULL,
    opened_at   TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    resolved_at TEXT,
    summary     TEXT,
    root_cause  TEXT,
    version     INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX incidents_state ON incidents (state, opened_at);
CREATE INDEX incidents_service ON incidents (service, opened_at);

CREATE TABLE timeline_events (
    id          INTEGER PRIMARY KEY,
    incident_id TEXT NOT NULL REFERENCES incidents (id),
    at          TEXT NOT NULL,
    actor       TEXT NOT NULL,
    kind        TEXT NOT NULL,
    detail      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX timeline_incident ON timeline_events (incident_id, id);

-- Append-only: each row hashes the previous row's hash (see store::audit).
CREATE TABLE audit_log (
    seq       INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    actor     TEXT NOT NULL,
    action    TEXT NOT NULL,
    subject   TEXT NOT NULL,
    detail    TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
