-- Alert ingest (issue #7): integrations (one per alert sender), alert groups mapped to incidents,
-- and the state of every alert received. Instants are RFC 3339 strings in UTC.

-- One configured sender. The bearer secret is stored only as its SHA-256 (hex); the PagerDuty
-- signing secret must stay retrievable to compute HMACs, so it is stored as given.
CREATE TABLE integrations (
    id               INTEGER PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE,
    source           TEXT NOT NULL CHECK (source IN ('alertmanager', 'pagerduty', 'grafana', 'opsgenie')),
    default_service  TEXT NOT NULL,
    default_severity TEXT NOT NULL CHECK (default_severity IN ('SEV1', 'SEV2', 'SEV3', 'SEV4')),
    severity_map     TEXT NOT NULL DEFAULT '{}',
    secret_sha256    TEXT NOT NULL UNIQUE,
    signing_secret   TEXT,
    created_by       TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX integrations_source ON integrations (source);

-- A sender's group (Alertmanager/Grafana groupKey, PagerDuty incident key, Opsgenie alias) maps to
-- exactly one current incident. The UNIQUE key, written in the same BEGIN IMMEDIATE transaction
-- that opens the incident, is what makes concurrent or repeated deliveries open one incident.
-- When the incident is learned and the group fires again, the row moves to the new incident and
-- remembers the previous one.
CREATE TABLE alert_groups (
    id                   INTEGER PRIMARY KEY,
    integration_id       INTEGER NOT NULL REFERENCES integrations (id),
    group_key            TEXT NOT NULL,
    incident_id          TEXT NOT NULL REFERENCES incidents (id),
    previous_incident_id TEXT REFERENCES incidents (id),
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL,
    UNIQUE (integration_id, group_key)
);
CREATE INDEX alert_groups_incident ON alert_groups (incident_id);

-- The latest known state of one alert (by fingerprint) within one incident.
CREATE TABLE alerts (
    id                   INTEGER PRIMARY KEY,
    group_id             INTEGER NOT NULL REFERENCES alert_groups (id),
    incident_id          TEXT NOT NULL REFERENCES incidents (id),
    fingerprint          TEXT NOT NULL,
    name                 TEXT NOT NULL,
    status               TEXT NOT NULL CHECK (status IN ('firing', 'resolved')),
    severity             TEXT NOT NULL CHECK (severity IN ('SEV1', 'SEV2', 'SEV3', 'SEV4')),
    service              TEXT NOT NULL,
    starts_at            TEXT,
    ends_at              TEXT,
    first_received_at    TEXT NOT NULL,
    last_received_at     TEXT NOT NULL,
    resolved_received_at TEXT,
    flags                TEXT NOT NULL DEFAULT '[]',
    UNIQUE (incident_id, fingerprint)
);
CREATE INDEX alerts_group ON alerts (group_id, status);
