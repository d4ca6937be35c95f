//! Alert groups (a sender's group key → the incident it opened) and the latest state of every
//! alert received, keyed by fingerprint within an incident.
//!
//! Uniqueness lives in the database (`UNIQUE (integration_id, group_key)` and
//! `UNIQUE (incident_id, fingerprint)`), so duplicate deliveries from several app instances
//! still map to one incident and one alert row.

use sqlx::AnyPool;

use super::{Tx, db_time, parse_db_time};
use crate::domain::{IncidentId, Severity};
use crate::error::{AppError, AppResult};

/// A stored alert group.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AlertGroup {
    /// Row id.
    pub id: i64,
    /// Integration that sent it.
    pub integration_id: i64,
    /// The sender's group key.
    pub group_key: String,
    /// The incident the group currently maps to.
    pub incident_id: String,
    /// The learned incident this one follows, if the group fired again after learning.
    pub previous_incident_id: Option<String>,
}

/// The group of `integration_id` with `group_key`, if known.
///
/// # Errors
/// Database errors.
pub async fn find_group(
    tx: &mut Tx,
    integration_id: i64,
    group_key: &str,
) -> AppResult<Option<AlertGroup>> {
    Ok(sqlx::query_as(
        "SELECT id, integration_id, group_key, incident_id, previous_incident_id FROM alert_groups
         WHERE integration_id = $1 AND group_key = $2",
    )
    .bind(integration_id)
    .bind(group_key)
    .fetch_optional(&mut **tx)
    .await?)
}

/// Records that `group_key` of `integration_id` maps to `incident_id`, with
/// `INSERT … ON CONFLICT DO NOTHING`. Returns the new row id, or `None` when the group already
/// existed (the caller must roll back the incident it opened).
///
/// # Errors
/// Database errors.
pub async fn insert_group(
    tx: &mut Tx,
    integration_id: i64,
    group_key: &str,
    incident_id: &IncidentId,
    at: jiff::Timestamp,
) -> AppResult<Option<i64>> {
    let t = db_time(at);
    Ok(sqlx::query_scalar(
        "INSERT INTO alert_groups (integration_id, group_key, incident_id, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (integration_id, group_key) DO NOTHING RETURNING id",
    )
    .bind(integration_id)
    .bind(group_key)
    .bind(incident_id.as_str())
    .bind(&t)
    .bind(&t)
    .fetch_optional(&mut **tx)
    .await?)
}

/// Moves group `group_id` from incident `from` to `to` (compare-and-set on the current incident),
/// remembering `from` as the previous incident. Returns whether the row changed.
///
/// # Errors
/// Database errors.
pub async fn move_group(
    tx: &mut Tx,
    group_id: i64,
    from: &IncidentId,
    to: &IncidentId,
    at: jiff::Timestamp,
) -> AppResult<bool> {
    Ok(sqlx::query(
        "UPDATE alert_groups SET incident_id = $1, previous_incident_id = $2, updated_at = $3
         WHERE id = $4 AND incident_id = $5",
    )
    .bind(to.as_str())
    .bind(from.as_str())
    .bind(db_time(at))
    .bind(group_id)
    .bind(from.as_str())
    .execute(&mut **tx)
    .await?
    .rows_affected()
        == 1)
}

/// An alert's state as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct StoredAlert {
    /// Row id.
    pub id: i64,
    /// Group row id.
    #[serde(skip)]
    pub group_id: i64,
    /// Incident id.
    pub incident_id: String,
    /// Sender's fingerprint (Alertmanager/Grafana `fingerprint`, PagerDuty incident id,
    /// Opsgenie `alertId`).
    pub fingerprint: String,
    /// Alert name / title.
    pub name: String,
    /// `firing` or `resolved`.
    pub status: String,
    /// Incident severity the sender's severity mapped to.
    pub severity: Severity,
    /// Service the alert names (or the integration's default).
    pub service: String,
    /// Sender's start instant (UTC), as given (possibly flagged).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub starts_at: Option<jiff::Timestamp>,
    /// Sender's end instant (UTC), as given (possibly flagged); `None` while firing.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub ends_at: Option<jiff::Timestamp>,
    /// When IncidentMind first received it (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub first_received_at: jiff::Timestamp,
    /// When IncidentMind last received it (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub last_received_at: jiff::Timestamp,
    /// When IncidentMind received its resolution (UTC).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub resolved_received_at: Option<jiff::Timestamp>,
    /// Why the sender's instants are not trusted: `starts_in_future`, `ends_in_future`,
    /// `ends_before_start`.
    pub flags: Vec<String>,
    /// How long it fired, seconds, never negative; `None` while firing. Sender instants when
    /// they are sane, else the received-at instants.
    pub duration_seconds: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct AlertRow {
    id: i64,
    group_id: i64,
    incident_id: String,
    fingerprint: String,
    name: String,
    status: String,
    severity: String,
    service: String,
    starts_at: Option<String>,
    ends_at: Option<String>,
    first_received_at: String,
    last_received_at: String,
    resolved_received_at: Option<String>,
    flags: String,
}

impl AlertRow {
    fn into_alert(self) -> AppResult<StoredAlert> {
        let corrupt = |e: &dyn std::fmt::Display| {
            AppError::Internal(anyhow::anyhow!("stored alert {}: {e}", self.id))
        };
        let flags: Vec<String> = serde_json::from_str(&self.flags).map_err(|e| corrupt(&e))?;
        let severity = Severity::parse(&self.severity).map_err(|e| corrupt(&e))?;
        let opt = |s: &Option<String>| s.as_deref().map(parse_db_time).transpose();
        let starts_at = opt(&self.starts_at)?;
        let ends_at = opt(&self.ends_at)?;
        let first_received_at = parse_db_time(&self.first_received_at)?;
        let resolved_received_at = opt(&self.resolved_received_at)?;
        let duration_seconds = if self.status == "resolved" {
            let by_sender = match (starts_at, ends_at) {
                (Some(s), Some(e)) if flags.is_empty() => Some(e.as_second() - s.as_second()),
                _ => None,
            };
            let by_receipt = resolved_received_at
                .map(|r| r.as_second() - first_received_at.as_second())
                .unwrap_or(0);
            Some(by_sender.unwrap_or(by_receipt).max(0))
        } else {
            None
        };
        Ok(StoredAlert {
            id: self.id,
            group_id: self.group_id,
            incident_id: self.incident_id,
            fingerprint: self.fingerprint,
            name: self.name,
            status: self.status,
            severity,
            service: self.service,
            starts_at,
            ends_at,
            first_received_at,
            last_received_at: parse_db_time(&self.last_received_at)?,
            resolved_received_at,
            flags,
            duration_seconds,
        })
    }
}

const ALERT_COLUMNS: &str = "id, group_id, incident_id, fingerprint, name, status, severity, service, \
     starts_at, ends_at, first_received_at, last_received_at, resolved_received_at, flags";

/// One alert as received, to upsert.
#[derive(Debug, Clone)]
pub struct AlertUpsert<'a> {
    /// Group row id.
    pub group_id: i64,
    /// Incident id.
    pub incident_id: &'a IncidentId,
    /// Fingerprint.
    pub fingerprint: &'a str,
    /// Name.
    pub name: &'a str,
    /// `firing` or `resolved`.
    pub status: &'a str,
    /// Mapped severity.
    pub severity: Severity,
    /// Service.
    pub service: &'a str,
    /// Sender's start (UTC).
    pub starts_at: Option<jiff::Timestamp>,
    /// Sender's end (UTC).
    pub ends_at: Option<jiff::Timestamp>,
    /// Flags (see [`StoredAlert::flags`]).
    pub flags: &'a [String],
}

/// What an upsert did to the stored alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertChange {
    /// First time this fingerprint is seen on the incident.
    New,
    /// Its status changed (fired again or resolved).
    StatusChanged,
    /// Same status as stored (a retry or a repeat notification).
    Unchanged,
    /// Older than what is stored (an out-of-order retry); ignored.
    Stale,
}

/// Inserts or updates one alert inside the caller's (write) transaction.
///
/// A delivery older than the stored state is ignored ([`AlertChange::Stale`]): one whose start
/// is before the stored start, or a `firing` for the same start as a stored `resolved`.
///
/// # Errors
/// Database errors.
pub async fn upsert_alert(
    tx: &mut Tx,
    a: &AlertUpsert<'_>,
    received: jiff::Timestamp,
) -> AppResult<AlertChange> {
    let sql =
        format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE incident_id = $1 AND fingerprint = $2");
    let existing: Option<AlertRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(a.incident_id.as_str())
        .bind(a.fingerprint)
        .fetch_optional(&mut **tx)
        .await?;
    let t = db_time(received);
    let flags = serde_json::to_string(a.flags).map_err(|e| AppError::Internal(e.into()))?;
    let starts = a.starts_at.map(db_time);
    let ends = a.ends_at.map(db_time);
    let resolved_at = (a.status == "resolved").then(|| t.clone());
    let Some(e) = existing else {
        let inserted = sqlx::query(
            "INSERT INTO alerts (group_id, incident_id, fingerprint, name, status, severity, service,
                                 starts_at, ends_at, first_received_at, last_received_at,
                                 resolved_received_at, flags)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
             ON CONFLICT (incident_id, fingerprint) DO NOTHING",
        )
        .bind(a.group_id)
        .bind(a.incident_id.as_str())
        .bind(a.fingerprint)
        .bind(a.name)
        .bind(a.status)
        .bind(a.severity.as_str())
        .bind(a.service)
        .bind(&starts)
        .bind(&ends)
        .bind(&t)
        .bind(&t)
        .bind(&resolved_at)
        .bind(&flags)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        return Ok(if inserted == 1 {
            AlertChange::New
        } else {
            AlertChange::Unchanged
        });
    };
    let older = matches!((&starts, &e.starts_at), (Some(new), Some(old)) if new < old);
    let refire_of_resolved =
        a.status == "firing" && e.status == "resolved" && starts.is_some() && starts == e.starts_at;
    if older || refire_of_resolved {
        return Ok(AlertChange::Stale);
    }
    if e.status == a.status {
        sqlx::query("UPDATE alerts SET last_received_at = $1 WHERE id = $2")
            .bind(&t)
            .bind(e.id)
            .execute(&mut **tx)
            .await?;
        return Ok(AlertChange::Unchanged);
    }
    sqlx::query(
        "UPDATE alerts SET status = $1, severity = $2, name = $3, starts_at = COALESCE($4, starts_at),
             ends_at = $5, last_received_at = $6, resolved_received_at = $7, flags = $8,
             first_received_at = CASE WHEN $9 = 'firing' THEN $10 ELSE first_received_at END
         WHERE id = $11",
    )
    .bind(a.status)
    .bind(a.severity.as_str())
    .bind(a.name)
    .bind(&starts)
    .bind(&ends)
    .bind(&t)
    .bind(&resolved_at)
    .bind(&flags)
    .bind(a.status)
    .bind(&t)
    .bind(e.id)
    .execute(&mut **tx)
    .await?;
    Ok(AlertChange::StatusChanged)
}

/// `(firing, resolved)` counts of the alerts of one incident, inside a transaction.
///
/// # Errors
/// Database errors.
pub async fn counts_in(tx: &mut Tx, incident_id: &IncidentId) -> AppResult<(i64, i64)> {
    let row: (i64, i64) = sqlx::query_as(
        "SELECT COUNT(CASE WHEN status = 'firing' THEN 1 END), COUNT(CASE WHEN status = 'resolved' THEN 1 END)
         FROM alerts WHERE incident_id = $1",
    )
    .bind(incident_id.as_str())
    .fetch_one(&mut **tx)
    .await?;
    Ok(row)
}

/// The alerts of one incident, in the order they were first received.
///
/// # Errors
/// Database errors.
pub async fn list_for_incident(pool: &AnyPool, incident_id: &str) -> AppResult<Vec<StoredAlert>> {
    let sql = format!(
        "SELECT {ALERT_COLUMNS} FROM alerts WHERE incident_id = $1 ORDER BY first_received_at, id"
    );
    let rows: Vec<AlertRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(incident_id)
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(AlertRow::into_alert).collect()
}

/// The group an incident was opened for, with the name and source of its integration.
///
/// # Errors
/// Database errors.
pub async fn group_of_incident(
    pool: &AnyPool,
    incident_id: &str,
) -> AppResult<Option<(AlertGroup, String, String)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        group: AlertGroup,
        name: String,
        source: String,
    }
    let row: Option<Row> = sqlx::query_as(
        "SELECT g.id, g.integration_id, g.group_key, g.incident_id, g.previous_incident_id,
                i.name, i.source
         FROM alert_groups g JOIN integrations i ON i.id = g.integration_id
         WHERE g.incident_id = $1 ORDER BY g.id LIMIT 1",
    )
    .bind(incident_id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| (r.group, r.name, r.source)))
}
