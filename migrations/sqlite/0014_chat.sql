-- Chat channels and their transactional outbox (issue #50, DESIGN.md §8). Instants are RFC 3339
-- strings in UTC.

-- One place incident messages are posted to. `url` is the Slack or Teams webhook URL (a secret:
-- whoever holds it may post) or the Matrix homeserver's base URL; `access_token` is the Matrix
-- token (a secret). Both are stored as given, because every delivery needs them, like the
-- PagerDuty signing secret of 0004, and are never shown again after creation.
CREATE TABLE chat_channels (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    kind         TEXT NOT NULL CHECK (kind IN ('slack_webhook', 'matrix', 'teams_workflow')),
    url          TEXT NOT NULL,
    room_id      TEXT,
    access_token TEXT,
    services     TEXT NOT NULL DEFAULT '[]',
    min_severity TEXT NOT NULL CHECK (min_severity IN ('SEV1', 'SEV2', 'SEV3', 'SEV4')),
    events       TEXT NOT NULL DEFAULT '[]',
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

-- One message to post: written by the incident write's own transaction (store::incidents::
-- add_event), so a rolled-back write leaves none; delivered by the outbox worker. `txn_id` is the
-- idempotency key sent with it (the Matrix transaction id); `remote_id` what the chat service
-- named the posted message (a Matrix event id: the root of the incident's thread).
CREATE TABLE chat_outbox (
    id                INTEGER PRIMARY KEY,
    txn_id            TEXT NOT NULL UNIQUE,
    channel_id        INTEGER NOT NULL REFERENCES chat_channels (id),
    incident_id       TEXT NOT NULL REFERENCES incidents (id),
    timeline_event_id INTEGER NOT NULL REFERENCES timeline_events (id),
    event             TEXT NOT NULL,
    subject           TEXT,
    status            TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts          INTEGER NOT NULL DEFAULT 0,
    next_attempt_at   TEXT NOT NULL,
    claimed_until     TEXT,
    give_up_at        TEXT,
    last_error        TEXT,
    remote_id         TEXT,
    created_at        TEXT NOT NULL,
    delivered_at      TEXT
);
CREATE INDEX chat_outbox_due ON chat_outbox (status, next_attempt_at);
CREATE INDEX chat_outbox_thread ON chat_outbox (channel_id, incident_id, id);
