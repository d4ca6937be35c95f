-- The dead-end check (DESIGN.md §5) asks, for each recommended action, for the remediation
-- records about that action kind: without this index each ask scanned every record.
CREATE INDEX records_action ON records (action_kind, kind, validation);
