-- A change counter per incident, bumped by triggers on every row that hangs off it (evidence,
-- investigations, recommendations, its records, its post-mortem and learning, its alerts and
-- timeline). The incident page caches its rendering per revision (issue #14: a page view must
-- not cost a dozen queries), and no writer can forget to invalidate it: the database does it.
ALTER TABLE incidents ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER revision_timeline AFTER INSERT ON timeline_events BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_evidence_insert AFTER INSERT ON evidence BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_evidence_update AFTER UPDATE ON evidence BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id IN (NEW.incident_id, OLD.incident_id);
END;
CREATE TRIGGER revision_investigation_insert AFTER INSERT ON investigations BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_investigation_update AFTER UPDATE ON investigations BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_recommendation_insert AFTER INSERT ON recommendations BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_recommendation_update AFTER UPDATE ON recommendations BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_record_insert AFTER INSERT ON records WHEN NEW.incident_id IS NOT NULL BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_record_update AFTER UPDATE ON records WHEN NEW.incident_id IS NOT NULL BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_postmortem_insert AFTER INSERT ON postmortems BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_postmortem_update AFTER UPDATE ON postmortems BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_learning AFTER INSERT ON learnings BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_alert_insert AFTER INSERT ON alerts BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_alert_update AFTER UPDATE ON alerts BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_alert_group_insert AFTER INSERT ON alert_groups BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
CREATE TRIGGER revision_alert_group_update AFTER UPDATE ON alert_groups BEGIN
  UPDATE incidents SET revision = revision + 1 WHERE id = NEW.incident_id;
END;
