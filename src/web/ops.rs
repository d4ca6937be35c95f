//! Operator endpoints beside the app (issue #18): `GET /readyz`, the readiness report a load
//! balancer or orchestrator polls. (`GET /healthz`, liveness, stays a plain `ok` in `web/mod.rs`.)

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;
use crate::store;

/// `GET /readyz`: whether this process should get traffic, as JSON:
///
/// ```json
/// {"status": "ready",
///  "checks": {"database":   {"status": "ok"},
///             "migrations": {"status": "ok", "applied": 14, "expected": 14},
///             "embeddings": {"status": "loaded", "model": "all-MiniLM-L6-v2"}}}
/// ```
///
/// - `database`: `ok` when `SELECT 1` answers, else `error` with `"error"`: the driver's text.
/// - `migrations`: `ok` when the applied migrations equal the ones built into the binary, else
///   `pending` (or `error` when the table cannot be read).
/// - `embeddings`: `loaded` (the built-in model is in memory), `endpoint` (an OpenAI-compatible
///   endpoint, with its `model`), or `disabled` (`--embeddings off`: recall on words and keys).
///   `serve` refuses to start when the built-in model cannot be loaded, so a running server has
///   no "not loaded" state; embeddings never make the server unready.
///
/// `status` is `ready` (HTTP 200) when database and migrations are `ok`, else `not_ready` with
/// HTTP 503 Service Unavailable (RFC 9110 §15.6.4).
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let database = match store::ping(&state.pool).await {
        Ok(()) => json!({"status": "ok"}),
        Err(e) => {
            tracing::warn!(error = ?e, "readiness: database does not answer");
            json!({"status": "error", "error": "the database does not answer a query"})
        }
    };
    let migrations = match store::migration_status(&state.pool).await {
        Ok((applied, expected)) => json!({
            "status": if applied == expected { "ok" } else { "pending" },
            "applied": applied,
            "expected": expected,
        }),
        Err(_) => json!({"status": "error"}),
    };
    let embeddings = match state.memory.embedder() {
        None => json!({"status": "disabled"}),
        Some(e) if e.model() == crate::memory::minilm::MODEL_NAME => {
            json!({"status": "loaded", "model": e.model()})
        }
        Some(e) => json!({"status": "endpoint", "model": e.model()}),
    };
    let ready = database["status"] == "ok" && migrations["status"] == "ok";
    let body = json!({
        "status": if ready { "ready" } else { "not_ready" },
        "checks": {"database": database, "migrations": migrations, "embeddings": embeddings},
    });
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Json(body))
}
