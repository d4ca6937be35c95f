//! Integrations: the configured alert senders (Alertmanager, PagerDuty, Grafana, Opsgenie) with
//! their default service, severity mapping and secrets.
//!
//! The bearer secret is stored only as its SHA-256 (hex). The PagerDuty signing secret is stored
//! as given, because verifying `X-PagerDuty-Signature` needs it to compute HMACs.

use std::collections::BTreeMap;

use sqlx::AnyPool;

use super::{Tx, db_time};
use crate::domain::Severity;
use crate::error::{AppError, AppResult};

/// A stored integration. `signing_secret` is never serialised.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct Integration {
    /// Row id.
    pub id: i64,
    /// Unique name chosen by the admin (1–100 characters).
    pub name: String,
    /// `alertmanager`, `pagerduty`, `grafana` or `opsgenie`.
    pub source: String,
    /// Service used when the alert names none (lower-case service name).
    pub default_service: String,
    /// Severity used when the alert's severity is missing or not in the mapping.
    pub default_severity: Severity,
    /// Sender severity value (lower-case, e.g. `critical`, `p1`, `high`) → incident severity.
    pub severity_map: BTreeMap<String, Severity>,
    /// Whether a PagerDuty signing secret is set (then every delivery must carry a valid
    /// `X-PagerDuty-Signature`).
    pub has_signing_secret: bool,
    /// The PagerDuty signing secret, when set. Not serialised.
    #[serde(skip)]
    pub signing_secret: Option<String>,
    /// Admin who created it.
    pub created_by: String,
    /// When (RFC 3339 UTC).
    pub created_at: String,
    /// Last change (RFC 3339 UTC).
    pub updated_at: String,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    name: String,
    source: String,
    default_service: String,
    default_severity: String,
    severity_map: String,
    signing_secret: Option<String>,
    created_by: String,
    created_at: String,
    updated_at: String,
}

fn corrupt(e: impl std::fmt::Display) -> AppError {
    AppError::Internal(anyhow::anyhow!("stored integration: {e}"))
}

impl Row {
    fn into_integration(self) -> AppResult<Integration> {
        let severity_map: BTreeMap<String, Severity> =
            serde_json::from_str(&self.severity_map).map_err(corrupt)?;
        Ok(Integration {
            id: self.id,
            name: self.name,
            source: self.source,
            default_service: self.default_service,
            default_severity: Severity::parse(&self.default_severity).map_err(corrupt)?,
            severity_map,
            has_signing_secret: self.signing_secret.is_some(),
            signing_secret: self.signing_secret,
            created_by: self.created_by,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

const COLUMNS: &str = "id, name, source, default_service, default_severity, severity_map, \
                       signing_secret, created_by, created_at, updated_at";

/// What to insert (already validated by `services::ingest`).
#[derive(Debug, Clone)]
pub struct NewIntegration<'a> {
    /// Unique name.
    pub name: &'a str,
    /// Source name.
    pub source: &'a str,
    /// Default service.
    pub default_service: &'a str,
    /// Default severity.
    pub default_severity: Severity,
    /// Severity mapping.
    pub severity_map: &'a BTreeMap<String, Severity>,
    /// SHA-256 (hex) of the bearer secret.
    pub secret_sha256: &'a str,
    /// PagerDuty signing secret.
    pub signing_secret: Option<&'a str>,
    /// Admin creating it.
    pub created_by: &'a str,
}

/// Inserts an integration inside the caller's transaction and returns its id.
///
/// # Errors
/// [`AppError::Conflict`] when the name is taken; database errors.
pub async fn insert(tx: &mut Tx, new: &NewIntegration<'_>, at: jiff::Timestamp) -> AppResult<i64> {
    let t = db_time(at);
    let map = serde_json::to_string(new.severity_map).map_err(|e| AppError::Internal(e.into()))?;
    let res = sqlx::query_scalar(
        "INSERT INTO integrations (name, source, default_service, default_severity, severity_map,
                                   secret_sha256, signing_secret, created_by, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
    )
    .bind(new.name)
    .bind(new.source)
    .bind(new.default_service)
    .bind(new.default_severity.as_str())
    .bind(map)
    .bind(new.secret_sha256)
    .bind(new.signing_secret)
    .bind(new.created_by)
    .bind(&t)
    .bind(&t)
    .fetch_one(&mut **tx)
    .await;
    match res {
        Ok(id) => Ok(id),
        Err(e) if super::is_unique_violation(&e) => Err(AppError::Conflict(format!(
            "an integration named '{}' already exists",
            new.name
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Loads one integration.
///
/// # Errors
/// [`AppError::NotFound`] when there is none with this id.
pub async fn get(pool: &AnyPool, id: i64) -> AppResult<Integration> {
    let sql = format!("SELECT {COLUMNS} FROM integrations WHERE id = $1");
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.ok_or_else(|| AppError::NotFound(format!("integration {id}")))?
        .into_integration()
}

/// The integration whose bearer secret hashes to `secret_sha256`, if any.
///
/// # Errors
/// Database errors.
pub async fn find_by_secret(pool: &AnyPool, secret_sha256: &str) -> AppResult<Option<Integration>> {
    let sql = format!("SELECT {COLUMNS} FROM integrations WHERE secret_sha256 = $1");
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(secret_sha256)
        .fetch_optional(pool)
        .await?;
    row.map(Row::into_integration).transpose()
}

/// All integrations, or those of one `source`, oldest first.
///
/// # Errors
/// Database errors.
pub async fn list(pool: &AnyPool, source: Option<&str>) -> AppResult<Vec<Integration>> {
    let sql =
        format!("SELECT {COLUMNS} FROM integrations WHERE ($1 IS NULL OR source = $1) ORDER BY id");
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(source)
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(Row::into_integration).collect()
}

/// Changes to an integration; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct IntegrationPatch {
    /// New default service.
    pub default_service: Option<String>,
    /// New default severity.
    pub default_severity: Option<Severity>,
    /// New severity mapping (replaces the whole map).
    pub severity_map: Option<BTreeMap<String, Severity>>,
    /// `Some(Some(s))` sets the signing secret, `Some(None)` clears it.
    pub signing_secret: Option<Option<String>>,
}

/// Applies `patch` to integration `id` inside the caller's transaction.
///
/// # Errors
/// [`AppError::NotFound`] when there is no such integration; database errors.
pub async fn update(
    tx: &mut Tx,
    id: i64,
    patch: &IntegrationPatch,
    at: jiff::Timestamp,
) -> AppResult<()> {
    let map = patch
        .severity_map
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| AppError::Internal(e.into()))?;
    let (set_signing, signing) = match &patch.signing_secret {
        Some(v) => (true, v.clone()),
        None => (false, None),
    };
    let done = sqlx::query(
        "UPDATE integrations SET
             default_service = COALESCE($1, default_service),
             default_severity = COALESCE($2, default_severity),
             severity_map = COALESCE($3, severity_map),
             signing_secret = CASE WHEN $4 THEN $5 ELSE signing_secret END,
             updated_at = $6
         WHERE id = $7",
    )
    .bind(patch.default_service.as_deref())
    .bind(patch.default_severity.map(Severity::as_str))
    .bind(map)
    .bind(set_signing)
    .bind(signing)
    .bind(db_time(at))
    .bind(id)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if done == 0 {
        return Err(AppError::NotFound(format!("integration {id}")));
    }
    Ok(())
}
