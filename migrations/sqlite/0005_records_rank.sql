-- The ranking fields of `records`, narrow, kept in step by triggers. Recall ranks up to a
-- thousand full-text candidates per query on these fields; read from the wide `records` rows
-- (text, JSON data, often on overflow pages) they cost more than the full-text search itself.
CREATE TABLE records_rank (
    id             INTEGER PRIMARY KEY,
    kind           TEXT NOT NULL,
    validation     TEXT NOT NULL,
    incident_id    TEXT,
    created_at     TEXT NOT NULL,
    importance     INTEGER NOT NULL,
    evidence_count INTEGER NOT NULL
);

INSERT INTO records_rank (id, kind, validation, incident_id, created_at, importance, evidence_count)
SELECT id, kind, validation, incident_id, created_at, importance, evidence_count FROM records;

CREATE TRIGGER records_rank_insert AFTER INSERT ON records BEGIN
    INSERT OR REPLACE INTO records_rank
        (id, kind, validation, incident_id, created_at, importance, evidence_count)
    VALUES (NEW.id, NEW.kind, NEW.validation, NEW.incident_id, NEW.created_at, NEW.importance,
            NEW.evidence_count);
END;

-- Also follows a change of id (import restores records under their original ids).
-- Only when a ranking field (or the id) changes: recall counts are bumped on every recall.
CREATE TRIGGER records_rank_update
AFTER UPDATE OF id, kind, validation, incident_id, created_at, importance, evidence_count ON records
BEGIN
    UPDATE records_rank
    SET id = NEW.id, kind = NEW.kind, validation = NEW.validation, incident_id = NEW.incident_id,
        created_at = NEW.created_at, importance = NEW.importance,
        evidence_count = NEW.evidence_count
    WHERE id = OLD.id;
END;

CREATE TRIGGER records_rank_delete AFTER DELETE ON records BEGIN
    DELETE FROM records_rank WHERE id = OLD.id;
END;
