-- Issue #21: consolidation and supersession proposals, and recall's view of a consolidated record.
--
-- proposals gains two kinds: 'consolidation' (near-duplicate lessons or failure records of
-- several incidents merged into one rule) and 'supersession' (after Learn marked a record
-- contradicted, replace it by the record that contradicts it). SQLite cannot alter a CHECK, so
-- the table is rebuilt with the same columns and rows; its index and its no-delete trigger are
-- made again (DROP TABLE drops them and fires no trigger).
CREATE TABLE proposals_new (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL
                CHECK (kind IN ('reflection', 'runbook', 'consolidation', 'supersession')),
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
INSERT INTO proposals_new
    (id, kind, incident_id, origin, title, draft, status, version, created_by, created_at,
     decided_by, decided_at, reason, record_id)
SELECT id, kind, incident_id, origin, title, draft, status, version, created_by, created_at,
       decided_by, decided_at, reason, record_id
  FROM proposals;
DROP TABLE proposals;
ALTER TABLE proposals_new RENAME TO proposals;
CREATE INDEX proposals_status ON proposals (status, id);
CREATE TRIGGER proposals_no_delete BEFORE DELETE ON proposals
BEGIN SELECT RAISE(ABORT, 'proposals are never deleted'); END;

-- A consolidated record keeps its place and its validation; `data.consolidated_into` names the
-- merged rule that replaced it (like `data.contradicted_by`). Recall ranks it below the merged
-- rule, so the narrow ranking table carries the mark too, kept in step by the same triggers
-- (now also on a change of `data`, which only the contradiction and consolidation marks make).
ALTER TABLE records_rank ADD COLUMN consolidated_into INTEGER;
UPDATE records_rank SET consolidated_into =
    (SELECT json_extract(r.data, '$.consolidated_into') FROM records r WHERE r.id = records_rank.id);

DROP TRIGGER records_rank_insert;
CREATE TRIGGER records_rank_insert AFTER INSERT ON records BEGIN
    INSERT OR REPLACE INTO records_rank
        (id, kind, validation, incident_id, created_at, importance, evidence_count,
         consolidated_into)
    VALUES (NEW.id, NEW.kind, NEW.validation, NEW.incident_id, NEW.created_at, NEW.importance,
            NEW.evidence_count, json_extract(NEW.data, '$.consolidated_into'));
END;

DROP TRIGGER records_rank_update;
CREATE TRIGGER records_rank_update
AFTER UPDATE OF id, kind, validation, incident_id, created_at, importance, evidence_count, data
ON records
BEGIN
    UPDATE records_rank
    SET id = NEW.id, kind = NEW.kind, validation = NEW.validation, incident_id = NEW.incident_id,
        created_at = NEW.created_at, importance = NEW.importance,
        evidence_count = NEW.evidence_count,
        consolidated_into = json_extract(NEW.data, '$.consolidated_into')
    WHERE id = OLD.id;
END;
