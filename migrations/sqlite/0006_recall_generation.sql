-- What recall ranks on changed: a counter that moves with every change to a durable record's
-- ranking fields or structured keys, and to the service graph. Recall keeps these (they are
-- small) in process memory and reloads them when the counter moves; `epoch` tells one database
-- from another (and from a re-created file at the same path). Working records (observations,
-- hypotheses, recommendations, action transcripts) never reach recall's structured lists, so
-- writing them does not move the counter: evidence and alert ingest cost recall nothing.
CREATE TABLE recall_generation (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    epoch TEXT NOT NULL,
    value INTEGER NOT NULL
);

INSERT INTO recall_generation (id, epoch, value) VALUES (1, lower(hex(randomblob(8))), 0);

CREATE TRIGGER recall_generation_rank_insert AFTER INSERT ON records_rank
WHEN NEW.kind NOT IN ('observation', 'hypothesis', 'recommendation', 'action_transcript')
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

CREATE TRIGGER recall_generation_rank_update AFTER UPDATE ON records_rank
WHEN NEW.kind NOT IN ('observation', 'hypothesis', 'recommendation', 'action_transcript')
  OR OLD.kind NOT IN ('observation', 'hypothesis', 'recommendation', 'action_transcript')
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

CREATE TRIGGER recall_generation_rank_delete AFTER DELETE ON records_rank
WHEN OLD.kind NOT IN ('observation', 'hypothesis', 'recommendation', 'action_transcript')
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

CREATE TRIGGER recall_generation_keys_insert AFTER INSERT ON record_keys
WHEN NOT EXISTS (
    SELECT 1 FROM records_rank WHERE id = NEW.record_id
      AND kind IN ('observation', 'hypothesis', 'recommendation', 'action_transcript'))
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

CREATE TRIGGER recall_generation_keys_delete AFTER DELETE ON record_keys
WHEN NOT EXISTS (
    SELECT 1 FROM records_rank WHERE id = OLD.record_id
      AND kind IN ('observation', 'hypothesis', 'recommendation', 'action_transcript'))
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

CREATE TRIGGER recall_generation_graph_insert AFTER INSERT ON service_dependencies
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

CREATE TRIGGER recall_generation_graph_delete AFTER DELETE ON service_dependencies
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

-- Ids of keys and graph edges are not rewritten today (import rewrites a record's id, which
-- moves the counter through records_rank), but a future writer that does must not go unseen.
CREATE TRIGGER recall_generation_keys_update AFTER UPDATE ON record_keys
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

CREATE TRIGGER recall_generation_graph_update AFTER UPDATE ON service_dependencies
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;
