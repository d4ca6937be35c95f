//! Alert webhooks: `POST /api/v1/webhooks/{alertmanager,pagerduty,grafana,opsgenie}`,
//! and the alert states of an incident (`GET /api/v1/incidents/{id}/alerts`). The integrations
//! whose secrets authenticate the webhooks are created in `web::integrations`.
//!
//! Authentication of a webhook, checked before the body is parsed as JSON:
//! - `Authorization: Bearer <secret>` or `?token=<secret>`: the integration whose secret hashes
//!   (SHA-256) to it; it must be of the endpoint's source (403 otherwise). A PagerDuty
//!   integration with a signing secret also needs a valid `X-PagerDuty-Signature`.
//! - PagerDuty only, without a bearer secret: `X-PagerDuty-Signature: v1=<hex HMAC-SHA256 of the
//!   raw body>` (comma-separated while rotating) valid under the signing secret of one PagerDuty
//!   integration (PagerDuty webhooks v3, "Verifying Signatures").
//!
//! Anything else is a 401 and changes nothing. Responses are 202 with
//! `{"incidents": ["INC-…"], "opened": […], "alerts": {"firing": n, "resolved": m}, "groups": […]}`;
//! malformed JSON or a wrong shape is a 400 naming the field, a body over the limit a 413.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::CurrentUser;
use super::errors::ApiError;
use super::examples;
use crate::domain::IncidentId;
use crate::error::AppError;
use crate::services::ingest::{self, Source};
use crate::store::alerts as astore;

/// Header PagerDuty v3 webhooks carry their signatures in.
pub const PAGERDUTY_SIGNATURE: &str = "x-pagerduty-signature";

/// The raw request body, read as it streams in up to the webhooks' own limit
/// ([`super::Settings::max_webhook_bytes`], set on their routes), with rejections as
/// [`ApiError`]s: 413 over the limit, 400 otherwise.
#[derive(Debug, Clone)]
pub struct RawBody(pub Bytes);

impl FromRequest<AppState> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        match Bytes::from_request(req, state).await {
            Ok(b) => Ok(Self(b)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError(AppError::PayloadTooLarge {
                    limit_bytes: state.settings.max_webhook_bytes,
                }))
            }
            Err(e) => Err(ApiError(AppError::BadRequest(e.body_text()))),
        }
    }
}

#[derive(Deserialize, Default)]
struct TokenQuery {
    #[serde(default)]
    token: Option<String>,
}

/// What a delivery presents to authenticate itself: the bearer secret (`Authorization: Bearer …`
/// first, else `?token=`) and the `X-PagerDuty-Signature` header. The policy that judges them is
/// [`ingest::authenticate`].
fn credentials(headers: &HeaderMap, query: Option<&str>) -> ingest::Credentials {
    let from_header = super::auth::bearer_token(headers);
    let secret = from_header.or_else(|| {
        query
            .and_then(|q| serde_urlencoded::from_str::<TokenQuery>(q).ok())
            .and_then(|q| q.token)
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
    });
    let signature = headers
        .get(PAGERDUTY_SIGNATURE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    ingest::Credentials { secret, signature }
}

/// Authenticates, parses and applies one delivery ([`apply`]) and counts it in the metrics by
/// source and outcome: `rejected` (any refusal: credentials, shape, size), `ignored` (nothing
/// to apply), `opened` (an incident was opened), `updated` (new alerts or states on existing
/// incidents) or `duplicate` (a repeat that changed nothing).
async fn receive(
    state: &AppState,
    source: Source,
    headers: &HeaderMap,
    query: Option<&str>,
    body: &[u8],
) -> Result<(StatusCode, Json<WebhookAccepted>), ApiError> {
    let result = apply(state, source, headers, query, body).await;
    let outcome = match &result {
        Err(_) => "rejected",
        Ok(out) if out.ignored.is_some() => "ignored",
        Ok(out) if !out.opened.is_empty() => "opened",
        Ok(out) if out.groups.iter().any(|g| g.evidence_created > 0) => "updated",
        Ok(_) => "duplicate",
    };
    state.metrics.webhook_delivery(source.as_str(), outcome);
    let out = result?;
    Ok((
        StatusCode::ACCEPTED,
        Json(WebhookAccepted {
            incidents: out.incidents,
            opened: out.opened,
            alerts: AlertCounts {
                firing: out.firing,
                resolved: out.resolved,
            },
            groups: out.groups,
            ignored: out.ignored,
        }),
    ))
}

/// The `202` answer of every webhook.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct WebhookAccepted {
    /// Incidents the delivery's groups map to (opened or updated), without repeats.
    incidents: Vec<String>,
    /// Of those, the ones this delivery opened.
    opened: Vec<String>,
    /// Alerts firing / resolved across those incidents after the delivery.
    alerts: AlertCounts,
    /// What the delivery did to each group.
    groups: Vec<ingest::GroupOutcome>,
    /// Why nothing was applied (a test notification, an event of another kind); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    ignored: Option<String>,
}

/// Alerts firing and resolved.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct AlertCounts {
    /// Firing now.
    firing: i64,
    /// Resolved.
    resolved: i64,
}

/// `GET /api/v1/incidents/{id}/alerts`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct IncidentAlerts {
    /// The incident.
    incident: IncidentId,
    /// Its alerts firing now.
    firing: i64,
    /// Its alerts resolved.
    resolved: i64,
    /// For people: `2 of 3 firing`.
    summary: String,
    /// The alert group that opened it, when an alert did.
    group: Option<AlertGroupView>,
    /// Every alert, with its instants and flags.
    alerts: Vec<astore::StoredAlert>,
}

/// The alert group of an incident.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct AlertGroupView {
    /// The sender's group key.
    key: String,
    /// The integration's name.
    integration: String,
    /// Its source (`alertmanager`, …).
    source: String,
    /// The learned incident this one follows, when the group fired again after learning.
    follows: Option<String>,
}

async fn apply(
    state: &AppState,
    source: Source,
    headers: &HeaderMap,
    query: Option<&str>,
    body: &[u8],
) -> Result<ingest::IngestOutcome, ApiError> {
    let integ =
        ingest::authenticate(&state.pool, source, &credentials(headers, query), body).await?;
    state.limits.webhook(integ.id)?;
    let delivery = ingest::parse_delivery(source, body)?;
    let out = ingest::ingest(&state.pool, &integ, &delivery, state.prometheus.as_ref()).await?;
    if let Some(first) = out.incidents.first() {
        super::log_incident(first);
    }
    Ok(out)
}

#[utoipa::path(
    post,
    path = "/api/v1/webhooks/alertmanager",
    operation_id = "alertmanagerWebhook",
    summary = "Receive a Prometheus Alertmanager delivery",
    tag = "webhooks",
    request_body(content = Object, description = "Prometheus Alertmanager webhook v4 body (`receivers[].webhook_configs`), as the sender posts it; authenticated by the integration secret (`Authorization: Bearer whk_…` or `?token=`)",
                 example = json!(examples::alertmanager())),
    responses(
        (status = 202, description = "Applied: the incidents the delivery's groups opened or updated (`ignored` says why nothing was applied)",
         body = WebhookAccepted, example = json!(examples::webhook_accepted())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn alertmanager(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<WebhookAccepted>), ApiError> {
    receive(&state, Source::Alertmanager, &headers, q.as_deref(), &body).await
}

#[utoipa::path(
    post,
    path = "/api/v1/webhooks/pagerduty",
    operation_id = "pagerdutyWebhook",
    summary = "Receive a PagerDuty v3 webhook event",
    tag = "webhooks",
    request_body(content = Object, description = "PagerDuty webhooks v3 event (`incident.*`), as the sender posts it; authenticated by the integration secret (`Authorization: Bearer whk_…` or `?token=`)",
                 example = json!(examples::pagerduty())),
    responses(
        (status = 202, description = "Applied: the incidents the delivery's groups opened or updated (`ignored` says why nothing was applied)",
         body = WebhookAccepted, example = json!(examples::webhook_accepted())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn pagerduty(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<WebhookAccepted>), ApiError> {
    receive(&state, Source::Pagerduty, &headers, q.as_deref(), &body).await
}

#[utoipa::path(
    post,
    path = "/api/v1/webhooks/grafana",
    operation_id = "grafanaWebhook",
    summary = "Receive a Grafana alerting delivery",
    tag = "webhooks",
    request_body(content = Object, description = "Grafana-managed alerting webhook contact point body, as the sender posts it; authenticated by the integration secret (`Authorization: Bearer whk_…` or `?token=`)",
                 example = json!(examples::grafana())),
    responses(
        (status = 202, description = "Applied: the incidents the delivery's groups opened or updated (`ignored` says why nothing was applied)",
         body = WebhookAccepted, example = json!(examples::webhook_accepted())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn grafana(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<WebhookAccepted>), ApiError> {
    receive(&state, Source::Grafana, &headers, q.as_deref(), &body).await
}

#[utoipa::path(
    post,
    path = "/api/v1/webhooks/opsgenie",
    operation_id = "opsgenieWebhook",
    summary = "Receive an Opsgenie delivery",
    tag = "webhooks",
    request_body(content = Object, description = "Opsgenie Webhook integration event (`Create`, `Close`, …), as the sender posts it; authenticated by the integration secret (`Authorization: Bearer whk_…` or `?token=`)",
                 example = json!(examples::opsgenie())),
    responses(
        (status = 202, description = "Applied: the incidents the delivery's groups opened or updated (`ignored` says why nothing was applied)",
         body = WebhookAccepted, example = json!(examples::webhook_accepted())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn opsgenie(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(q): RawQuery,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<WebhookAccepted>), ApiError> {
    receive(&state, Source::Opsgenie, &headers, q.as_deref(), &body).await
}

/// `GET /api/v1/incidents/{id}/alerts`: `{"incident", "firing", "resolved", "summary",
/// "group": {"key", "integration", "source", "follows"} | null, "alerts": [StoredAlert…]}`.
#[utoipa::path(
    get,
    path = "/api/v1/incidents/{id}/alerts",
    operation_id = "listIncidentAlerts",
    summary = "Show the alerts of an incident",
    tag = "webhooks",
    params(super::schema::IncidentPath),
    responses(
        (status = 200, description = "The alerts of the incident and their group", body = IncidentAlerts,
         example = json!(examples::incident_alerts())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn incident_alerts(
    State(state): State<AppState>,
    _user: CurrentUser,
    Path(id): Path<String>,
) -> Result<Json<IncidentAlerts>, ApiError> {
    let id = super::incident_id(&id)?;
    let ingest::IncidentAlerts {
        alerts,
        firing,
        resolved,
        group,
    } = ingest::incident_alerts(&state.pool, &id).await?;
    let group = group.map(|(g, integration, source)| AlertGroupView {
        key: g.group_key,
        integration,
        source,
        follows: g.previous_incident_id,
    });
    Ok(Json(IncidentAlerts {
        summary: ingest::summary(firing, resolved),
        incident: id,
        firing,
        resolved,
        group,
        alerts,
    }))
}
