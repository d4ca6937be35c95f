-- Recall at the level people think in (DESIGN.md §4): one retrieval document per past incident
-- (title, description, evidence lines, root cause, what did not work, what worked, lessons),
-- searched by BM25 (its own FTS5 table, rowid = incident_documents.id) and by vector. Built by
-- the memory worker from the incident's durable records; `signature` names the records it was
-- built from, so a learn, verdict, import, supersede or retract rebuilds it.
CREATE TABLE incident_documents (
    id          INTEGER PRIMARY KEY,
    incident_id TEXT NOT NULL UNIQUE,
    service     TEXT NOT NULL DEFAULT '',
    text        TEXT NOT NULL,
    embed_text  TEXT NOT NULL,
    signature   TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);

CREATE VIRTUAL TABLE incident_documents_fts USING fts5 (
    text,
    tokenize = 'porter unicode61',
    content = '',
    contentless_delete = 1
);

-- Vectors of incident documents, one per document and model (little-endian f32), dropped with
-- the document's text when it is rebuilt.
CREATE TABLE incident_document_embeddings (
    document_id INTEGER NOT NULL REFERENCES incident_documents (id),
    model       TEXT NOT NULL,
    vector      BLOB NOT NULL,
    PRIMARY KEY (document_id, model)
);

-- A changed document moves recall's generation like any durable write.
CREATE TRIGGER recall_generation_document_insert AFTER INSERT ON incident_documents
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

CREATE TRIGGER recall_generation_document_update AFTER UPDATE ON incident_documents
BEGIN
    UPDATE recall_generation SET value = value + 1;
END;

-- The passages of a document (its evidence lines and the sentences of its report), embedded one
-- by one: a new incident's evidence is compared line by line with a past one's (MaxSim), which
-- tells apart look-alike incidents that differ in one line of evidence.
CREATE TABLE incident_passages (
    id          INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES incident_documents (id),
    text        TEXT NOT NULL
);
CREATE INDEX incident_passages_document ON incident_passages (document_id);

CREATE TABLE incident_passage_embeddings (
    passage_id INTEGER NOT NULL REFERENCES incident_passages (id),
    model      TEXT NOT NULL,
    vector     BLOB NOT NULL,
    PRIMARY KEY (passage_id, model)
);

-- A rule's parts (its ALWAYS, BECAUSE and SCOPE lines) embedded on their own, beside the whole
-- record's vector: a prescriptive question ("do we still need monitoring if renewal is
-- automatic?") is close to one part of a rule rather than to all four lines at once.
CREATE TABLE record_part_embeddings (
    record_id INTEGER NOT NULL REFERENCES records (id),
    part      INTEGER NOT NULL,
    model     TEXT NOT NULL,
    vector    BLOB NOT NULL,
    PRIMARY KEY (record_id, part, model)
);
