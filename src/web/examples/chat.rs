//! Examples of the chat channels' operations (`/api/v1/chat/channels`).

use serde_json::{Value, json};

/// `POST /api/v1/chat/channels`.
pub fn create_chat_channel() -> Value {
    json!({
        "name": "payments-oncall",
        "kind": "matrix",
        "url": "https://matrix.example.org",
        "room_id": "!oncall:example.org",
        "access_token": "syt_aW5jaWRlbnRtaW5k_0123456789abcdef",
        "services": ["checkout", "payments-api"],
        "min_severity": "SEV2",
        "events": ["opened", "dead_end_approved", "resolved"]
    })
}

/// A channel as the API returns it (never its secrets).
pub fn chat_channel() -> Value {
    json!({
        "id": 1,
        "name": "payments-oncall",
        "kind": "matrix",
        "destination": "!oncall:example.org on matrix.example.org",
        "room_id": "!oncall:example.org",
        "routing": {
            "services": ["checkout", "payments-api"],
            "min_severity": "SEV2",
            "events": ["opened", "dead_end_approved", "resolved"]
        },
        "created_by": "ada",
        "created_at": "2026-11-29T14:00:00.000000Z",
        "updated_at": "2026-11-29T14:00:00.000000Z"
    })
}

/// `GET /api/v1/chat/channels`.
pub fn chat_channel_list() -> Value {
    json!({"channels": [chat_channel()]})
}

/// One outbox row.
fn outbox_row(status: &str) -> Value {
    json!({
        "id": 7,
        "txn_id": "im-5e2c0a9b7d4f41e8a3c6b1d0f9e8a7c6",
        "channel_id": 1,
        "incident_id": super::INCIDENT,
        "timeline_event_id": 311,
        "event": "opened",
        "subject": null,
        "status": status,
        "attempts": 1,
        "next_attempt_at": "2026-11-29T14:05:13.000000Z",
        "last_error": if status == "failed" { json!("HTTP 403: {\"errcode\":\"M_FORBIDDEN\",\"error\":\"User not in room\"}") } else { Value::Null },
        "remote_id": if status == "delivered" { json!("$Jm2wD4c7:example.org") } else { Value::Null },
        "created_at": "2026-11-29T14:05:12.000000Z",
        "delivered_at": if status == "delivered" { json!("2026-11-29T14:05:13.000000Z") } else { Value::Null }
    })
}

/// `GET /api/v1/chat/channels/{id}`.
pub fn chat_channel_detail() -> Value {
    json!({
        "channel": chat_channel(),
        "recent": [outbox_row("delivered")],
        "failed": [outbox_row("failed")]
    })
}

/// `PATCH /api/v1/chat/channels/{id}`.
pub fn update_chat_channel() -> Value {
    json!({"services": ["checkout", "payments-api"], "min_severity": "SEV2",
           "events": ["opened", "dead_end_approved", "resolved"]})
}

/// `POST /api/v1/chat/channels/{id}/test`.
pub fn chat_test_outcome() -> Value {
    json!({
        "delivered": false,
        "status": 403,
        "said": "HTTP 403: {\"errcode\":\"M_FORBIDDEN\",\"error\":\"User @incidentmind:example.org not in room !oncall:example.org\"}",
        "hint": "the account may not post in this room: invite it and have it join, or raise its power level"
    })
}
