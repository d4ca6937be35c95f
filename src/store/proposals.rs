//! Proposals for the reviewer queue and the accuracy grades recorded at Learn, plus
//! the reads that drafting them needs inside the caller's transaction (recorded successes,
//! the analyst's remaining recommendations, the actions that worked, the standing runbooks).
//! A proposal is never deleted: deciding it is a compare-and-set on its status and version.

use sqlx::AnyPool;

use super::{Tx, db_time, parse_db_time};
use crate::domain::proposals::{ProposalKind, ProposalStatus};
use crate::error::{AppError, AppResult};

/// A stored proposal.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct StoredProposal {
    /// Id (`PRO-{id}` for people).
    pub id: i64,
    /// reflection / runbook / consolidation / supersession.
    pub kind: ProposalKind,
    /// The incident it comes from.
    pub incident_id: String,
    /// Idempotency key (`reflection:{recommendation}`, `runbook:{incident}:{steps digest}`,
    /// `consolidation:{sorted source ids}`, `supersession:{old}:{new}`).
    pub origin: String,
    /// One line for the queue.
    pub title: String,
    /// The draft as JSON (see `services::proposals::Draft`).
    #[schema(value_type = Object)]
    pub draft: serde_json::Value,
    /// pending / accepted / rejected.
    pub status: ProposalStatus,
    /// Bumped by each decision; a form carries the version it showed.
    pub version: i64,
    /// Who (or which job) drafted it.
    pub created_by: String,
    /// When.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: jiff::Timestamp,
    /// Who decided it.
    pub decided_by: Option<String>,
    /// When.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub decided_at: Option<jiff::Timestamp>,
    /// Why it was rejected.
    pub reason: Option<String>,
    /// The record accepting it wrote.
    pub record_id: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    kind: String,
    incident_id: String,
    origin: String,
    title: String,
    draft: String,
    status: String,
    version: i64,
    created_by: String,
    created_at: String,
    decided_by: Option<String>,
    decided_at: Option<String>,
    reason: Option<String>,
    record_id: Option<i64>,
}

impl TryFrom<Row> for StoredProposal {
    type Error = AppError;

    fn try_from(r: Row) -> AppResult<Self> {
        let bad = |e: crate::domain::ValidationError| {
            AppError::Internal(anyhow::anyhow!("stored proposal {}: {e}", r.id))
        };
        Ok(Self {
            id: r.id,
            kind: ProposalKind::parse(&r.kind).map_err(bad)?,
            status: ProposalStatus::parse(&r.status).map_err(bad)?,
            draft: serde_json::from_str(&r.draft)
                .map_err(|e| AppError::Internal(anyhow::anyhow!("stored draft {}: {e}", r.id)))?,
            created_at: parse_db_time(&r.created_at)?,
            decided_at: r.decided_at.as_deref().map(parse_db_time).transpose()?,
            incident_id: r.incident_id,
            origin: r.origin,
            title: r.title,
            version: r.version,
            created_by: r.created_by,
            decided_by: r.decided_by,
            reason: r.reason,
            record_id: r.record_id,
        })
    }
}

/// Inserts a pending proposal; `None` when one with the same origin exists (nothing written).
///
/// # Errors
/// Database errors.
#[allow(clippy::too_many_arguments)]
pub async fn insert(
    tx: &mut Tx,
    kind: ProposalKind,
    incident_id: &str,
    origin: &str,
    title: &str,
    draft: &serde_json::Value,
    created_by: &str,
    at: jiff::Timestamp,
) -> AppResult<Option<i64>> {
    Ok(sqlx::query_scalar(
        "INSERT INTO proposals (kind, incident_id, origin, title, draft, created_by, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (origin) DO NOTHING RETURNING id",
    )
    .bind(kind.as_str())
    .bind(incident_id)
    .bind(origin)
    .bind(title)
    .bind(draft.to_string())
    .bind(created_by)
    .bind(db_time(at))
    .fetch_optional(&mut **tx)
    .await?)
}

/// One proposal.
///
/// # Errors
/// [`AppError::NotFound`].
pub async fn get(pool: &AnyPool, id: i64) -> AppResult<StoredProposal> {
    let row: Option<Row> = sqlx::query_as("SELECT * FROM proposals WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.ok_or_else(|| AppError::NotFound(format!("proposal {id}")))?
        .try_into()
}

/// One proposal, inside the caller's transaction.
///
/// # Errors
/// [`AppError::NotFound`].
pub async fn get_in(tx: &mut Tx, id: i64) -> AppResult<StoredProposal> {
    let row: Option<Row> = sqlx::query_as("SELECT * FROM proposals WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.ok_or_else(|| AppError::NotFound(format!("proposal {id}")))?
        .try_into()
}

/// Proposals in `status`, oldest first (at most 200).
///
/// # Errors
/// Database errors.
pub async fn list(pool: &AnyPool, status: ProposalStatus) -> AppResult<Vec<StoredProposal>> {
    let rows: Vec<Row> =
        sqlx::query_as("SELECT * FROM proposals WHERE status = $1 ORDER BY id LIMIT 200")
            .bind(status.as_str())
            .fetch_all(pool)
            .await?;
    rows.into_iter().map(TryInto::try_into).collect()
}

/// The proposals of an incident, oldest first.
///
/// # Errors
/// Database errors.
pub async fn of_incident(pool: &AnyPool, incident_id: &str) -> AppResult<Vec<StoredProposal>> {
    let rows: Vec<Row> =
        sqlx::query_as("SELECT * FROM proposals WHERE incident_id = $1 ORDER BY id")
            .bind(incident_id)
            .fetch_all(pool)
            .await?;
    rows.into_iter().map(TryInto::try_into).collect()
}

/// Decides a pending proposal at `version` (compare-and-set): sets the status, who, when, the
/// reason, the record written and the draft as accepted (a reviewer may have edited it); bumps
/// the version. `false` when it was no longer pending at that version.
///
/// # Errors
/// Database errors.
#[allow(clippy::too_many_arguments)]
pub async fn decide(
    tx: &mut Tx,
    id: i64,
    version: i64,
    status: ProposalStatus,
    by: &str,
    at: jiff::Timestamp,
    reason: Option<&str>,
    record_id: Option<i64>,
    draft: &serde_json::Value,
) -> AppResult<bool> {
    let done = sqlx::query(
        "UPDATE proposals SET status = $1, decided_by = $2, decided_at = $3, reason = $4, record_id = $5,
                draft = $6, version = version + 1
          WHERE id = $7 AND status = 'pending' AND version = $8",
    )
    .bind(status.as_str())
    .bind(by)
    .bind(db_time(at))
    .bind(reason)
    .bind(record_id)
    .bind(draft.to_string())
    .bind(id)
    .bind(version)
    .execute(&mut **tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A remediation success in memory: `(record id, incident, action kind)`.
pub type Success = (i64, Option<String>, String);

/// Confirmed remediation successes of another incident than `incident_id`, of another action
/// kind than `not_kind`, keyed to `service` or to one of `failure_modes`; newest first (at most
/// 20).
///
/// # Errors
/// Database errors.
pub async fn successes_in(
    tx: &mut Tx,
    incident_id: &str,
    not_kind: &str,
    service: &str,
    failure_modes: &[String],
) -> AppResult<Vec<Success>> {
    Ok(sqlx::query_as(
        "SELECT r.id, r.incident_id, r.action_kind FROM records r
          WHERE r.kind = 'remediation_success' AND r.validation = 'confirmed'
            AND r.action_kind IS NOT NULL AND r.action_kind != $1
            AND COALESCE(r.incident_id, '') != $2
            AND (EXISTS (SELECT 1 FROM json_each(r.services) s WHERE s.value = $3)
                 OR EXISTS (SELECT 1 FROM json_each(r.failure_modes) f
                             WHERE f.value IN (SELECT value FROM json_each($4))))
          ORDER BY r.id DESC LIMIT 20",
    )
    .bind(not_kind)
    .bind(incident_id)
    .bind(service)
    .bind(serde_json::to_string(failure_modes).unwrap_or_else(|_| "[]".into()))
    .fetch_all(&mut **tx)
    .await?)
}

/// Of `ids` (records an investigation recalled), the confirmed remediation successes of other
/// action kinds than `not_kind`, in the order of `ids`.
///
/// # Errors
/// Database errors.
pub async fn recalled_successes_in(
    tx: &mut Tx,
    ids: &[i64],
    not_kind: &str,
) -> AppResult<Vec<Success>> {
    let rows: Vec<Success> = sqlx::query_as(
        "SELECT r.id, r.incident_id, r.action_kind FROM records r
          WHERE r.id IN (SELECT CAST(value AS BIGINT) FROM json_each($1))
            AND r.kind = 'remediation_success' AND r.validation = 'confirmed'
            AND r.action_kind IS NOT NULL AND r.action_kind != $2",
    )
    .bind(serde_json::to_string(ids).unwrap_or_else(|_| "[]".into()))
    .bind(not_kind)
    .fetch_all(&mut **tx)
    .await?;
    let mut rows = rows;
    rows.sort_by_key(|r| ids.iter().position(|i| *i == r.0));
    Ok(rows)
}

/// The record ids the latest investigation of `incident_id` recalled (empty without one).
///
/// # Errors
/// Database errors; [`AppError::Internal`] for an unreadable stored list.
pub async fn latest_recalled_in(tx: &mut Tx, incident_id: &str) -> AppResult<Vec<i64>> {
    let recalled: Option<String> = sqlx::query_scalar(
        "SELECT recalled FROM investigations WHERE incident_id = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(incident_id)
    .fetch_optional(&mut **tx)
    .await?;
    recalled
        .map(|r| serde_json::from_str(&r))
        .transpose()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("stored recall list: {e}")))
        .map(Option::unwrap_or_default)
}

/// The still-proposed recommendations of investigation `investigation_id` without a dead-end
/// warning, in display order: `(action kind, target)`.
///
/// # Errors
/// Database errors.
pub async fn open_recommendations_in(
    tx: &mut Tx,
    investigation_id: i64,
) -> AppResult<Vec<(String, String)>> {
    Ok(sqlx::query_as(
        "SELECT action_kind, target FROM recommendations
          WHERE investigation_id = $1 AND status = 'proposed' AND warning IS NULL
          ORDER BY position, id",
    )
    .bind(investigation_id)
    .fetch_all(&mut **tx)
    .await?)
}

/// An approved action judged resolved or partially resolved.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Worked {
    /// ActionKind name.
    pub action_kind: String,
    /// Target.
    pub target: String,
    /// resolved / partially_resolved.
    pub verdict: String,
    /// Its simulated transcript.
    pub transcript_id: Option<i64>,
}

/// The approved actions of `incident_id` judged `resolved` or `partially_resolved`, in the
/// order they were approved.
///
/// # Errors
/// Database errors.
pub async fn worked_in(tx: &mut Tx, incident_id: &str) -> AppResult<Vec<Worked>> {
    Ok(sqlx::query_as(
        "SELECT action_kind, target, verdict, transcript_id FROM recommendations
          WHERE incident_id = $1 AND status = 'approved'
            AND verdict IN ('resolved', 'partially_resolved')
          ORDER BY decided_at, id",
    )
    .bind(incident_id)
    .fetch_all(&mut **tx)
    .await?)
}

/// Ids of the confirmed runbooks, newest first (at most 500).
///
/// # Errors
/// Database errors.
pub async fn runbook_ids_in(tx: &mut Tx) -> AppResult<Vec<i64>> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM records WHERE kind = 'runbook' AND validation = 'confirmed'
          ORDER BY id DESC LIMIT 500",
    )
    .fetch_all(&mut **tx)
    .await?)
}

/// The reviewer's answer at Learn: did the copilot's top hypothesis match the root cause.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Grade {
    /// The incident.
    pub incident_id: String,
    /// The top hypothesis record.
    pub hypothesis_id: Option<i64>,
    /// Its statement.
    pub hypothesis: String,
    /// The reviewer's answer.
    pub matched: bool,
    /// What the page suggested.
    pub suggested: bool,
    /// Whether the investigation recalled a prior incident's memory.
    pub memory_recalled: bool,
    /// Who answered.
    pub graded_by: String,
    /// When (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub graded_at: jiff::Timestamp,
}

/// Records a grade (once per incident; a second insert is a database error).
///
/// # Errors
/// Database errors.
pub async fn insert_grade(tx: &mut Tx, g: &Grade) -> AppResult<()> {
    sqlx::query(
        "INSERT INTO hypothesis_grades (incident_id, hypothesis_id, hypothesis, matched, suggested,
                memory_recalled, graded_by, graded_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&g.incident_id)
    .bind(g.hypothesis_id)
    .bind(&g.hypothesis)
    // Stored as 0/1 integers on both backends.
    .bind(i64::from(g.matched))
    .bind(i64::from(g.suggested))
    .bind(i64::from(g.memory_recalled))
    .bind(&g.graded_by)
    .bind(db_time(g.graded_at))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct GradeRow {
    incident_id: String,
    hypothesis_id: Option<i64>,
    hypothesis: String,
    matched: i64,
    suggested: i64,
    memory_recalled: i64,
    graded_by: String,
    graded_at: String,
}

impl TryFrom<GradeRow> for Grade {
    type Error = AppError;

    fn try_from(r: GradeRow) -> AppResult<Self> {
        Ok(Self {
            graded_at: parse_db_time(&r.graded_at)?,
            incident_id: r.incident_id,
            hypothesis_id: r.hypothesis_id,
            hypothesis: r.hypothesis,
            matched: r.matched != 0,
            suggested: r.suggested != 0,
            memory_recalled: r.memory_recalled != 0,
            graded_by: r.graded_by,
        })
    }
}

/// The grade of an incident, if it was graded.
///
/// # Errors
/// Database errors.
pub async fn grade(pool: &AnyPool, incident_id: &str) -> AppResult<Option<Grade>> {
    let row: Option<GradeRow> =
        sqlx::query_as("SELECT * FROM hypothesis_grades WHERE incident_id = $1")
            .bind(incident_id)
            .fetch_optional(pool)
            .await?;
    row.map(TryInto::try_into).transpose()
}

/// The grades of incidents opened at or after `since`, with each incident's opened instant.
///
/// # Errors
/// Database errors.
pub async fn grades_since(
    pool: &AnyPool,
    since: jiff::Timestamp,
) -> AppResult<Vec<(Grade, jiff::Timestamp)>> {
    #[derive(sqlx::FromRow)]
    struct Joined {
        #[sqlx(flatten)]
        grade: GradeRow,
        opened_at: String,
    }
    let rows: Vec<Joined> = sqlx::query_as(
        "SELECT g.*, i.opened_at FROM hypothesis_grades g JOIN incidents i ON i.id = g.incident_id
          WHERE i.opened_at >= $1 ORDER BY i.opened_at, g.incident_id",
    )
    .bind(db_time(since))
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| Ok((r.grade.try_into()?, parse_db_time(&r.opened_at)?)))
        .collect()
}
