//! Examples of the memory, integration and alert-webhook bodies (see the parent module).

use serde_json::{Value, json};

use super::INCIDENT;

/// `POST /api/v1/memories`: a service fact.
pub fn create_memory() -> Value {
    json!({
        "kind": "service_fact",
        "service": "checkout",
        "text": "checkout-db allows 200 connections; each checkout pod opens a pool of 20.",
        "failure_modes": ["connection_pool_exhausted"]
    })
}

/// A durable memory record (a service fact).
pub fn memory_record() -> Value {
    json!({
        "id": 62, "kind": "service_fact", "epistemic_type": "observation",
        "text": "checkout-db allows 200 connections; each checkout pod opens a pool of 20.",
        "services": ["checkout"], "failure_modes": ["connection_pool_exhausted"],
        "action_kind": null, "target": null, "incident_id": null,
        "validation": "confirmed", "confidence": null, "importance": 2, "rule": null,
        "author": "rita", "created_at": "2026-11-30T09:12:00Z", "last_recalled_at": null,
        "recall_count": 0, "evidence_count": 1, "superseded_by": null, "sources": [],
        "data": {"version": 1}
    })
}

/// A memory record after `supersede`.
pub fn superseded_record() -> Value {
    let mut v = memory_record();
    v["validation"] = json!("superseded");
    v["superseded_by"] = json!(63);
    v
}

/// A memory record after `retract`.
pub fn retracted_record() -> Value {
    let mut v = memory_record();
    v["validation"] = json!("retracted");
    v
}

/// `GET /api/v1/memories`.
pub fn memory_list() -> Value {
    json!({"memories": [memory_record()]})
}

/// `GET /api/v1/memories/{id}`.
pub fn memory_detail() -> Value {
    let mut v = memory_record();
    v["source_records"] = json!([]);
    v["history"] = json!([{"at": "2026-11-30T09:12:00Z", "actor": "rita", "change": "written",
                           "detail": "service_fact MEM-62"}]);
    v
}

/// `POST …/supersede`.
pub fn supersede() -> Value {
    json!({"by": 63, "reason": "The pool is 30 per pod since the 2026-12 resize."})
}

/// `POST …/retract`.
pub fn retract() -> Value {
    json!({"reason": "Written for the wrong service: this is payments-db, not checkout-db."})
}

/// `GET /api/v1/recall`.
pub fn recall() -> Value {
    let mut rec = memory_record();
    rec["score"] = json!(0.0312);
    rec["why"] = json!({"matched_terms": ["pool", "connections"], "tags": ["connection_pool_exhausted"],
                        "services": ["checkout"], "action_kinds": [], "lists": ["text", "scope"]});
    rec["marks"] = json!([]);
    json!({
        "results": [rec],
        "incidents": [{"incident_id": "INC-2026-0007", "score": 0.0328, "lists": ["doc_bm25", "keys"],
                       "ranks": [1, 1], "cosine": null}],
        "derived_tags": ["connection_pool_exhausted"],
        "notice": null
    })
}

/// `POST /api/v1/integrations`.
pub fn create_integration() -> Value {
    json!({
        "name": "prod-alertmanager",
        "source": "alertmanager",
        "default_service": "checkout",
        "default_severity": "SEV3",
        "severity_map": {"critical": "SEV1", "page": "SEV2"}
    })
}

/// An integration as the API shows it.
pub fn integration() -> Value {
    json!({
        "id": 1, "name": "prod-alertmanager", "source": "alertmanager",
        "default_service": "checkout", "default_severity": "SEV3",
        "severity_map": {"critical": "SEV1", "page": "SEV2", "warning": "SEV3"},
        "has_signing_secret": false, "created_by": "ada",
        "created_at": "2026-11-20T10:00:00Z", "updated_at": "2026-11-20T10:00:00Z",
        "webhook_path": "/api/v1/webhooks/alertmanager"
    })
}

/// `201` of `POST /api/v1/integrations`: with its secret, shown once.
pub fn integration_created() -> Value {
    let mut v = integration();
    v["secret"] = json!("whk_3q7Zr1xKfA9bLm2VtN8sYc0pWd4eHj6u");
    v
}

/// `GET /api/v1/integrations`.
pub fn integration_list() -> Value {
    json!({"integrations": [integration()]})
}

/// `PATCH /api/v1/integrations/{id}`.
pub fn update_integration() -> Value {
    json!({"default_service": "payments-api", "severity_map": {"critical": "SEV1", "page": "SEV1"}})
}

/// An integration after the update.
pub fn integration_updated() -> Value {
    let mut v = integration();
    v["default_service"] = json!("payments-api");
    v["severity_map"] = json!({"critical": "SEV1", "page": "SEV1", "warning": "SEV3"});
    v["updated_at"] = json!("2026-11-29T16:20:00Z");
    v
}

/// `POST /api/v1/webhooks/alertmanager`: Alertmanager's webhook v4 body.
pub fn alertmanager() -> Value {
    json!({
        "version": "4",
        "groupKey": "{}:{alertname=\"CheckoutLatencyHigh\", service=\"checkout\"}",
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "incidentmind",
        "groupLabels": {"alertname": "CheckoutLatencyHigh", "service": "checkout"},
        "commonLabels": {"alertname": "CheckoutLatencyHigh", "service": "checkout", "severity": "page"},
        "commonAnnotations": {"summary": "checkout p99 above 2 s for 5 minutes"},
        "externalURL": "http://alertmanager.internal:9093",
        "alerts": [{
            "status": "firing",
            "labels": {"alertname": "CheckoutLatencyHigh", "service": "checkout", "severity": "page",
                       "instance": "checkout-7f9c:8080"},
            "annotations": {"summary": "checkout p99 above 2 s for 5 minutes"},
            "startsAt": "2026-11-29T14:02:00Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.internal:9090/graph?g0.expr=checkout_p99",
            "fingerprint": "a1c3e5f7b9d20468"
        }]
    })
}

/// `POST /api/v1/webhooks/grafana`: Grafana's webhook contact point body.
pub fn grafana() -> Value {
    json!({
        "receiver": "incidentmind",
        "status": "firing",
        "orgId": 1,
        "groupKey": "{}/{}:{alertname=\"Checkout error rate\"}",
        "groupLabels": {"alertname": "Checkout error rate"},
        "commonLabels": {"alertname": "Checkout error rate", "service": "checkout", "severity": "critical"},
        "commonAnnotations": {},
        "externalURL": "https://grafana.internal/",
        "version": "1",
        "truncatedAlerts": 0,
        "title": "[FIRING:1] Checkout error rate",
        "state": "alerting",
        "message": "checkout 5xx rate 4.2 % over 5 minutes",
        "alerts": [{
            "status": "firing",
            "labels": {"alertname": "Checkout error rate", "service": "checkout", "severity": "critical"},
            "annotations": {"summary": "checkout 5xx rate 4.2 % over 5 minutes"},
            "startsAt": "2026-11-29T14:03:00Z",
            "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "https://grafana.internal/alerting/grafana/checkout-5xx/view",
            "fingerprint": "5be1d7c0a0f3e2b4",
            "silenceURL": "https://grafana.internal/alerting/silence/new",
            "dashboardURL": "",
            "panelURL": "",
            "values": {"B": 4.2}
        }]
    })
}

/// `POST /api/v1/webhooks/pagerduty`: a PagerDuty v3 webhook event.
pub fn pagerduty() -> Value {
    json!({
        "event": {
            "id": "01DEN4HPBQAAAG05V5QQYBRZMF",
            "event_type": "incident.triggered",
            "resource_type": "incident",
            "occurred_at": "2026-11-29T14:04:00.000Z",
            "agent": null,
            "client": null,
            "data": {
                "id": "Q2W9X8RT5LK1ZP",
                "type": "incident",
                "number": 4711,
                "status": "triggered",
                "incident_key": "checkout-latency-2026-11-29",
                "created_at": "2026-11-29T14:04:00Z",
                "title": "Checkout p99 latency above 2 s",
                "service": {"id": "PCHK01", "summary": "checkout", "type": "service_reference"},
                "priority": {"id": "PPRI2", "summary": "P2", "type": "priority_reference"},
                "urgency": "high"
            }
        }
    })
}

/// `POST /api/v1/webhooks/opsgenie`: an Opsgenie Webhook integration event.
pub fn opsgenie() -> Value {
    json!({
        "action": "Create",
        "alert": {
            "alertId": "7b2c4f1e-93d0-4c7a-8e55-0c1d2e3f4a5b",
            "message": "Checkout p99 latency above 2 s",
            "alias": "checkout-latency",
            "tinyId": "812",
            "entity": "checkout",
            "source": "prometheus",
            "priority": "P2",
            "tags": ["service:checkout"],
            "createdAt": 1796565840000_i64,
            "updatedAt": 1796565840000_i64
        },
        "source": {"name": "prometheus", "type": "API"},
        "integrationId": "3f9a0c2e-1b2d-4e5f-8a9b-0c1d2e3f4a5b",
        "integrationName": "IncidentMind"
    })
}

/// `202` of every webhook.
pub fn webhook_accepted() -> Value {
    json!({
        "incidents": [INCIDENT],
        "opened": [INCIDENT],
        "alerts": {"firing": 1, "resolved": 0},
        "groups": [{
            "group_key": "{}:{alertname=\"CheckoutLatencyHigh\", service=\"checkout\"}",
            "incident": INCIDENT, "opened": true, "follows": null,
            "firing": 1, "resolved": 0, "not_sent": 0, "summary": "1 of 1 firing", "evidence_created": 1
        }]
    })
}

/// `GET /api/v1/incidents/{id}/alerts`.
pub fn incident_alerts() -> Value {
    json!({
        "incident": INCIDENT,
        "firing": 1,
        "resolved": 0,
        "summary": "1 of 1 firing",
        "group": {"key": "{}:{alertname=\"CheckoutLatencyHigh\", service=\"checkout\"}",
                  "integration": "prod-alertmanager", "source": "alertmanager", "follows": null},
        "alerts": [{
            "id": 1, "incident_id": INCIDENT, "fingerprint": "a1c3e5f7b9d20468",
            "name": "CheckoutLatencyHigh", "status": "firing", "severity": "SEV2",
            "service": "checkout", "starts_at": "2026-11-29T14:02:00Z", "ends_at": null,
            "first_received_at": "2026-11-29T14:06:10Z", "last_received_at": "2026-11-29T14:06:10Z",
            "resolved_received_at": null, "flags": [], "duration_seconds": null
        }]
    })
}
