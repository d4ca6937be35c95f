-- Evidence as submitted (redacted), investigations, recommendations with their lifecycle, and
-- post-mortems.

CREATE TABLE evidence (
    id          INTEGER PRIMARY KEY,
    incident_id TEXT NOT NULL REFERENCES incidents (id),
    kind        TEXT NOT NULL CHECK (kind IN ('logs', 'metrics', 'alert', 'note')),
    source      TEXT NOT NULL DEFAULT '',
    content     TEXT NOT NULL,
    bytes       INTEGER NOT NULL,
    lines       INTEGER NOT NULL,
    format      TEXT NOT NULL,
    author      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    dedup_key   TEXT UNIQUE
);
CREATE INDEX evidence_incident ON evidence (incident_id, id);

CREATE TABLE investigations (
    id          INTEGER PRIMARY KEY,
    incident_id TEXT NOT NULL REFERENCES incidents (id),
    actor       TEXT NOT NULL,
    analyst     TEXT NOT NULL,
    notice      TEXT,
    dropped     TEXT NOT NULL DEFAULT '[]',
    recalled    TEXT NOT NULL DEFAULT '[]',
    created_at  TEXT NOT NULL
);
CREATE INDEX investigations_incident ON investigations (incident_id, id);

CREATE TABLE recommendations (
    id               INTEGER PRIMARY KEY,
    investigation_id INTEGER NOT NULL REFERENCES investigations (id),
    incident_id      TEXT NOT NULL REFERENCES incidents (id),
    record_id        INTEGER NOT NULL UNIQUE REFERENCES records (id),
    hypothesis_id    INTEGER REFERENCES records (id),
    action_kind      TEXT NOT NULL,
    target           TEXT NOT NULL,
    rationale        TEXT NOT NULL,
    warning          TEXT,
    position         INTEGER NOT NULL,
    status           TEXT NOT NULL DEFAULT 'proposed' CHECK (status IN ('proposed', 'approved', 'rejected')),
    decided_by       TEXT,
    decided_at       TEXT,
    reject_reason    TEXT,
    transcript_id    INTEGER REFERENCES records (id),
    verdict          TEXT CHECK (verdict IN ('resolved', 'partially_resolved', 'did_not_resolve', 'made_worse')),
    verdict_note     TEXT,
    verdict_by       TEXT,
    verdict_at       TEXT
);
CREATE INDEX recommendations_incident ON recommendations (incident_id, investigation_id, position);

CREATE TABLE postmortems (
    incident_id   TEXT PRIMARY KEY REFERENCES incidents (id),
    draft         TEXT NOT NULL,
    drafted_by    TEXT NOT NULL,
    drafted_at    TEXT NOT NULL,
    edited_by     TEXT NOT NULL,
    edited_at     TEXT NOT NULL,
    confirmed_by  TEXT,
    confirmed_at  TEXT,
    analyst       TEXT NOT NULL DEFAULT 'built-in',
    notice        TEXT,
    version       INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE learnings (
    incident_id TEXT PRIMARY KEY REFERENCES incidents (id),
    learned_by  TEXT NOT NULL,
    learned_at  TEXT NOT NULL,
    result      TEXT NOT NULL
);
