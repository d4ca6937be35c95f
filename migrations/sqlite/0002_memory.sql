-- Records: every piece of knowledge, working (one incident) or durable (organizational memory),
-- with its kind, epistemic type, validation state, sources (record_links) and structured keys
-- (record_keys: service, failure_mode, action_kind) for recall. DESIGN.md §2–§4.

CREATE TABLE records (
    id               INTEGER PRIMARY KEY,
    kind             TEXT NOT NULL,
    epistemic_type   TEXT NOT NULL CHECK (epistemic_type IN ('observation', 'inference', 'decision', 'action_result')),
    text             TEXT NOT NULL,
    services         TEXT NOT NULL DEFAULT '[]',
    failure_modes    TEXT NOT NULL DEFAULT '[]',
    action_kind      TEXT,
    target           TEXT,
    incident_id      TEXT,
    validation       TEXT NOT NULL CHECK (validation IN ('pending', 'confirmed', 'superseded', 'retracted')),
    confidence       TEXT CHECK (confidence IN ('low', 'medium', 'high')),
    importance       INTEGER NOT NULL DEFAULT 2,
    rule_always      TEXT,
    rule_because     TEXT,
    rule_scope       TEXT,
    rule_severity    TEXT,
    author           TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    last_recalled_at TEXT,
    recall_count     INTEGER NOT NULL DEFAULT 0,
    evidence_count   INTEGER NOT NULL DEFAULT 1,
    superseded_by    INTEGER REFERENCES records (id),
    origin           TEXT UNIQUE,
    data             TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX records_incident ON records (incident_id, kind);
CREATE INDEX records_kind ON records (kind, validation);

CREATE TABLE record_keys (
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    record_id INTEGER NOT NULL REFERENCES records (id),
    PRIMARY KEY (key, value, record_id)
) WITHOUT ROWID;

CREATE TABLE record_links (
    from_id  INTEGER NOT NULL REFERENCES records (id),
    to_id    INTEGER NOT NULL REFERENCES records (id),
    relation TEXT NOT NULL,
    PRIMARY KEY (from_id, to_id, relation)
);
CREATE INDEX record_links_to ON record_links (to_id);

CREATE TABLE record_history (
    id        INTEGER PRIMARY KEY,
    record_id INTEGER NOT NULL REFERENCES records (id),
    at        TEXT NOT NULL,
    actor     TEXT NOT NULL,
    change    TEXT NOT NULL,
    detail    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX record_history_record ON record_history (record_id, id);

-- Full text of durable records only (rowid = records.id); BM25 with Porter stemming.
CREATE VIRTUAL TABLE records_fts USING fts5 (
    text, scope,
    tokenize = 'porter unicode61',
    content = '',
    contentless_delete = 1
);

-- Entity graph: service → depends on → service.
CREATE TABLE service_dependencies (
    service    TEXT NOT NULL,
    depends_on TEXT NOT NULL,
    PRIMARY KEY (service, depends_on)
);

-- Per-incident redaction placeholders, so the same secret gets the same placeholder.
CREATE TABLE redaction_maps (
    incident_id TEXT PRIMARY KEY,
    map         TEXT NOT NULL
);
