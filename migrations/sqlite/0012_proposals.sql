-- Issue #21: what jobs propose and reviewers decide, and how right the copilot was.
--
-- proposals: drafts a job wrote for the reviewer queue (a reflection after a failed action, a
-- runbook after a resolved incident). Never deleted: a decision sets status, who, when and why
-- (compare-and-set on status and version), and an accepted one names the record it wrote.
CREATE TABLE proposals (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('reflection', 'runbook')),
    incident_id TEXT NOT NULL REFERENCES incidents (id),
    origin      TEXT NOT NULL UNIQUE,
    title       TEXT NOT NULL,
    draft       TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted', 'rejected')),
    version     INTEGER NOT NULL DEFAULT 1,
    created_by  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    decided_by  TEXT,
    decided_at  TEXT,
    reason      TEXT,
    record_id   INTEGER REFERENCES records (id)
);
CREATE INDEX proposals_status ON proposals (status, id);

-- One grade per learned incident: did the copilot's top hypothesis match the confirmed root
-- cause, as the reviewer answered it at Learn (the suggestion is kept beside the answer).
CREATE TABLE hypothesis_grades (
    incident_id     TEXT PRIMARY KEY REFERENCES incidents (id),
    hypothesis_id   INTEGER REFERENCES records (id),
    hypothesis      TEXT NOT NULL,
    matched         INTEGER NOT NULL CHECK (matched IN (0, 1)),
    suggested       INTEGER NOT NULL CHECK (suggested IN (0, 1)),
    memory_recalled INTEGER NOT NULL CHECK (memory_recalled IN (0, 1)),
    graded_by       TEXT NOT NULL,
    graded_at       TEXT NOT NULL
);

CREATE TRIGGER hypothesis_grades_no_update BEFORE UPDATE ON hypothesis_grades
BEGIN SELECT RAISE(ABORT, 'a grade is recorded once'); END;
CREATE TRIGGER proposals_no_delete BEFORE DELETE ON proposals
BEGIN SELECT RAISE(ABORT, 'proposals are never deleted'); END;
