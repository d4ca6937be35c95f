-- Optional embeddings of durable records (DESIGN.md §4: one more ranked list in recall's
-- fusion, never required). One vector per record and model, little-endian f32. Written by the
-- embedding backfill when an embeddings endpoint is configured; nothing else reads or needs it.
CREATE TABLE record_embeddings (
    record_id INTEGER NOT NULL REFERENCES records (id),
    model     TEXT NOT NULL,
    vector    BLOB NOT NULL,
    PRIMARY KEY (record_id, model)
);
