-- The dead-end check tests each remediation record of an action kind for "recorded during a
-- similar incident" before it looks at its keys: with the incident in the index, that test and
-- the candidate list come from the index alone, without reading each record's row (~1 kB of
-- text and data, so one page read per candidate at 100,000 records).
DROP INDEX records_action;
CREATE INDEX records_action ON records (action_kind, kind, validation, incident_id);
