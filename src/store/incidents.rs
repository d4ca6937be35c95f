//! Incidents, their per-year id sequence and their timeline.
//!
//! A transition is applied as compare-and-set on the state (`UPDATE … WHERE id = ? AND state = ?`),
//! so of several concurrent conflicting requests exactly one succeeds (DESIGN.md §1).

use sqlx::AnyPool;

use super::{Tx, db_time, parse_db_time};
use crate::domain::{Incident, IncidentId, IncidentState, NewIncident, Severity, TimelineEvent};
use crate::error::{AppError, AppResult};

#[derive(sqlx::FromRow)]
struct IncidentRow {
    id: String,
    title: String,
    service: String,
    severity: String,
    description: String,
    state: String,
    opened_by: String,
    opened_at: String,
    updated_at: String,
    resolved_at: Option<String>,
    summary: Option<String>,
    root_cause: Option<String>,
    version: i64,
}

fn corrupt(e: impl std::fmt::Display) -> AppError {
    AppError::Internal(anyhow::anyhow!("stored incident: {e}"))
}

impl IncidentRow {
    fn into_incident(self) -> AppResult<Incident> {
        Ok(Incident {
            id: IncidentId::parse(&self.id).map_err(corrupt)?,
            title: self.title,
            service: self.service,
            severity: Severity::parse(&self.severity).map_err(corrupt)?,
            description: self.description,
            state: IncidentState::parse(&self.state).map_err(corrupt)?,
            opened_by: self.opened_by,
            opened_at: parse_db_time(&self.opened_at)?,
            updated_at: parse_db_time(&self.updated_at)?,
            resolved_at: self.resolved_at.as_deref().map(parse_db_time).transpose()?,
            summary: self.summary,
            root_cause: self.root_cause,
            version: self.version,
        })
    }
}

const COLUMNS: &str = "id, title, service, severity, description, state, opened_by, opened_at, \
                       updated_at, resolved_at, summary, root_cause, version";

/// Allocates the next `INC-YYYY-NNNN` for the year of `at`, inside the caller's write
/// transaction (so a service can redact the incident's text with its placeholder map first).
///
/// # Errors
/// Database errors.
pub async fn next_id(tx: &mut Tx, at: jiff::Timestamp) -> AppResult<IncidentId> {
    let year = at.to_zoned_datetime(jiff::tz::TimeZone::UTC).year();
    let seq: i64 = sqlx::query_scalar(
        "INSERT INTO incident_counters (year, last) VALUES ($1, 1)
         ON CONFLICT (year) DO UPDATE SET last = incident_counters.last + 1 RETURNING last",
    )
    .bind(i64::from(year))
    .fetch_one(&mut **tx)
    .await?;
    Ok(IncidentId::new(year, seq))
}

/// Inserts a new incident `id` (from [`next_id`]) in `investigating`, inside the caller's write
/// transaction; `new` is already redacted. `opened` goes on its timeline through
/// [`super::IncidentWrite::create`], the one caller.
///
/// # Errors
/// Database errors.
pub async fn insert(
    tx: &mut Tx,
    id: IncidentId,
    new: &NewIncident,
    opened_by: &str,
    at: jiff::Timestamp,
) -> AppResult<Incident> {
    let t = db_time(at);
    sqlx::query(
        "INSERT INTO incidents (id, title, service, severity, description, state, opened_by,
                                opened_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, 'investigating', $6, $7, $8)",
    )
    .bind(id.as_str())
    .bind(&new.title)
    .bind(&new.service)
    .bind(new.severity.as_str())
    .bind(&new.description)
    .bind(opened_by)
    .bind(&t)
    .bind(&t)
    .execute(&mut **tx)
    .await?;
    Ok(Incident {
        id,
        title: new.title.clone(),
        service: new.service.clone(),
        severity: new.severity,
        description: new.description.clone(),
        state: IncidentState::Investigating,
        opened_by: opened_by.to_string(),
        opened_at: at,
        updated_at: at,
        resolved_at: None,
        summary: None,
        root_cause: None,
        version: 1,
    })
}

/// Appends an event to an incident's timeline inside the caller's transaction, with the chat
/// outbox rows of the channels that post it ([`super::chat::enqueue_in`]); returns the event's
/// id. Called by the incident write alone ([`super::IncidentWrite::record_event`]), which also
/// writes the audit entry and the change notice, so what is announced is written once, with the
/// change, and a rolled-back write announces nothing.
///
/// # Errors
/// Database errors.
pub async fn add_event(
    tx: &mut Tx,
    id: &IncidentId,
    at: jiff::Timestamp,
    actor: &str,
    kind: &str,
    detail: &str,
) -> AppResult<i64> {
    let event_id: i64 = sqlx::query_scalar(
        "INSERT INTO timeline_events (incident_id, at, actor, kind, detail) VALUES ($1, $2, $3, $4, $5)
         RETURNING id",
    )
    .bind(id.as_str())
    .bind(db_time(at))
    .bind(actor)
    .bind(kind)
    .bind(detail)
    .fetch_one(&mut **tx)
    .await?;
    super::chat::enqueue_in(tx, id, event_id, kind, at).await?;
    Ok(event_id)
}

/// Loads one incident.
///
/// # Errors
/// [`AppError::NotFound`] when there is no such incident.
pub async fn get(pool: &AnyPool, id: &IncidentId) -> AppResult<Incident> {
    let sql = format!("SELECT {COLUMNS} FROM incidents WHERE id = $1");
    let row: Option<IncidentRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id.as_str())
        .fetch_optional(pool)
        .await?;
    row.ok_or_else(|| AppError::NotFound(format!("incident {id}")))?
        .into_incident()
}

/// Sets incident `id`'s opening instant (the sample history replays an incident that lasted
/// hours in seconds, then gives it its own duration back).
///
/// # Errors
/// Database errors.
pub async fn set_opened_at(pool: &AnyPool, id: &IncidentId, at: jiff::Timestamp) -> AppResult<()> {
    sqlx::query("UPDATE incidents SET opened_at = $1 WHERE id = $2")
        .bind(super::db_time(at))
        .bind(id.as_str())
        .execute(pool)
        .await?;
    Ok(())
}

/// The incidents opened at or after `since`, oldest first, at most 5,000 (the insights'
/// window).
///
/// # Errors
/// Database errors.
pub async fn opened_since(pool: &AnyPool, since: jiff::Timestamp) -> AppResult<Vec<Incident>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM incidents WHERE opened_at >= $1 ORDER BY opened_at, id LIMIT 5000"
    );
    let rows: Vec<IncidentRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db_time(since))
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(IncidentRow::into_incident).collect()
}

/// `(version, revision, recall epoch, recall generation)` of incident `id`, in one read:
/// `version` counts its state changes, `revision` every write to anything that hangs off it
/// (bumped by the triggers of migration 0010), and the recall generation every change of
/// durable memory ([`super::recall_index::generation`]), so together they name one state of
/// its page.
///
/// # Errors
/// [`AppError::NotFound`] when there is no such incident.
pub async fn page_state(pool: &AnyPool, id: &IncidentId) -> AppResult<(i64, i64, String, i64)> {
    let row: Option<(i64, i64, String, i64)> = sqlx::query_as(
        "SELECT i.version, i.revision, g.epoch, g.value
           FROM incidents i, recall_generation g WHERE i.id = $1 AND g.id = 1",
    )
    .bind(id.as_str())
    .fetch_optional(pool)
    .await?;
    row.ok_or_else(|| AppError::NotFound(format!("incident {id}")))
}

/// Same as [`get`] inside a transaction.
///
/// # Errors
/// [`AppError::NotFound`] when there is no such incident.
pub async fn get_in(tx: &mut Tx, id: &IncidentId) -> AppResult<Incident> {
    let sql = format!("SELECT {COLUMNS} FROM incidents WHERE id = $1");
    let row: Option<IncidentRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id.as_str())
        .fetch_optional(&mut **tx)
        .await?;
    row.ok_or_else(|| AppError::NotFound(format!("incident {id}")))?
        .into_incident()
}

/// Order of [`list`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IncidentSort {
    /// Newest opened first.
    #[default]
    Newest,
    /// Oldest opened first.
    Oldest,
    /// Most severe first (SEV1…SEV4), newest first within a severity.
    Severity,
}

impl IncidentSort {
    /// Every order, for the list page.
    pub const ALL: [IncidentSort; 3] = [Self::Newest, Self::Oldest, Self::Severity];

    /// Query-string name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Newest => "newest",
            Self::Oldest => "oldest",
            Self::Severity => "severity",
        }
    }

    /// What the list page calls it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Newest => "newest first",
            Self::Oldest => "oldest first",
            Self::Severity => "most severe first",
        }
    }

    /// Parses a query-string name; empty is [`IncidentSort::Newest`].
    ///
    /// # Errors
    /// A validation error naming `sort` and the accepted values.
    pub fn parse(s: &str) -> Result<Self, crate::domain::ValidationError> {
        match s.trim() {
            "" | "newest" => Ok(Self::Newest),
            "oldest" => Ok(Self::Oldest),
            "severity" => Ok(Self::Severity),
            other => Err(crate::domain::ValidationError::new(
                "sort",
                format!("'{other}' is not an order; use newest, oldest or severity"),
            )),
        }
    }
}

/// Where the next page of [`list`] starts: the sort key of the last incident shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentCursor {
    severity: String,
    opened_at: String,
    id: String,
}

impl IncidentCursor {
    /// The cursor after `incident`.
    pub fn after(incident: &Incident) -> Self {
        Self {
            severity: incident.severity.as_str().to_string(),
            opened_at: db_time(incident.opened_at),
            id: incident.id.to_string(),
        }
    }

    /// Text form for a query string (`SEV2~2026-11-29T14:05:12.000000Z~INC-2026-0001`).
    pub fn encode(&self) -> String {
        format!("{}~{}~{}", self.severity, self.opened_at, self.id)
    }

    /// Parses [`IncidentCursor::encode`]'s form.
    ///
    /// # Errors
    /// A validation error naming `after` when it is not such a cursor.
    pub fn parse(s: &str) -> Result<Self, crate::domain::ValidationError> {
        let bad = || {
            crate::domain::ValidationError::new(
                "after",
                "is not a page cursor from this list; go back to the first page",
            )
        };
        let mut parts = s.trim().splitn(3, '~');
        let (Some(sev), Some(at), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        let severity = Severity::parse(sev).map_err(|_| bad())?;
        parse_db_time(at).map_err(|_| bad())?;
        let id = IncidentId::parse(id).map_err(|_| bad())?;
        Ok(Self {
            severity: severity.as_str().to_string(),
            opened_at: at.to_string(),
            id: id.to_string(),
        })
    }
}

/// Filters for [`list`]; `None` means any.
#[derive(Debug, Clone, Default)]
pub struct IncidentFilter {
    /// Only incidents in this state.
    pub state: Option<IncidentState>,
    /// Only incidents not yet learned (ignored when `state` is set).
    pub active_only: bool,
    /// Only this service (exact, lower-case).
    pub service: Option<String>,
    /// Only this severity.
    pub severity: Option<Severity>,
    /// Only incidents whose id, title or description contains this text (case-insensitive).
    pub text: Option<String>,
    /// Order.
    pub sort: IncidentSort,
    /// Keyset pagination: only incidents after this one in `sort` order.
    pub after: Option<IncidentCursor>,
    /// At most this many (default 200).
    pub limit: Option<i64>,
}

/// The most rows one [`list`] returns: the API's largest page (1,000) and one more, which tells
/// the caller whether another page follows (`services::incidents::page_of`).
pub const LIST_MAX: i64 = 1_001;

/// Lists incidents in `f.sort` order (newest first by default), after `f.after`.
///
/// # Errors
/// Database errors.
pub async fn list(pool: &AnyPool, f: &IncidentFilter) -> AppResult<Vec<Incident>> {
    let (keyset, order) = match f.sort {
        IncidentSort::Newest => (
            "($7 IS NULL OR (opened_at, id) < ($7, $8))",
            "opened_at DESC, id DESC",
        ),
        IncidentSort::Oldest => (
            "($7 IS NULL OR (opened_at, id) > ($7, $8))",
            "opened_at ASC, id ASC",
        ),
        IncidentSort::Severity => (
            "($7 IS NULL OR severity > $9 OR (severity = $9 AND (opened_at, id) < ($7, $8)))",
            "severity ASC, opened_at DESC, id DESC",
        ),
    };
    let sql = format!(
        "SELECT {COLUMNS} FROM incidents
         WHERE ($1 IS NULL OR state = $1) AND ($2 IS NULL OR service = $2) AND ($3 IS NULL OR severity = $3)
           AND ($5 = 0 OR state != 'learned')
           AND ($6 IS NULL OR lower(id) LIKE $6 ESCAPE '\\' OR lower(title) LIKE $6 ESCAPE '\\'
                OR lower(description) LIKE $6 ESCAPE '\\')
           AND {keyset}
         ORDER BY {order} LIMIT $4"
    );
    // Case folded here, ASCII only, as lower() folds on both backends (SQLite's lower() and
    // PostgreSQL's under the columns' "C" collation); the columns are folded in the SQL.
    let pattern = f.text.as_deref().map(|t| {
        let escaped = t
            .to_ascii_lowercase()
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        format!("%{escaped}%")
    });
    let rows: Vec<IncidentRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(f.state.map(IncidentState::as_str))
        .bind(f.service.as_deref())
        .bind(f.severity.map(Severity::as_str))
        .bind(f.limit.unwrap_or(200).clamp(1, LIST_MAX))
        .bind(i64::from(f.active_only && f.state.is_none()))
        .bind(pattern)
        .bind(f.after.as_ref().map(|c| c.opened_at.as_str()))
        .bind(f.after.as_ref().map(|c| c.id.as_str()))
        .bind(f.after.as_ref().map(|c| c.severity.as_str()))
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(IncidentRow::into_incident).collect()
}

/// Distinct service names, for the list filter.
///
/// # Errors
/// Database errors.
pub async fn services(pool: &AnyPool) -> AppResult<Vec<String>> {
    Ok(
        sqlx::query_scalar("SELECT DISTINCT service FROM incidents ORDER BY service")
            .fetch_all(pool)
            .await?,
    )
}

/// The incident's timeline, oldest first.
///
/// # Errors
/// Database errors.
pub async fn timeline(pool: &AnyPool, id: &IncidentId) -> AppResult<Vec<TimelineEvent>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        id: i64,
        at: String,
        actor: String,
        kind: String,
        detail: String,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, at, actor, kind, detail FROM timeline_events WHERE incident_id = $1 ORDER BY id",
    )
    .bind(id.as_str())
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(TimelineEvent {
                id: r.id,
                at: parse_db_time(&r.at)?,
                actor: r.actor,
                kind: r.kind,
                detail: r.detail,
            })
        })
        .collect()
}

/// Extra columns a transition writes.
#[derive(Debug, Clone, Default)]
pub struct TransitionPatch {
    /// Set `summary` and `root_cause` and `resolved_at` (resolve).
    pub resolution: Option<crate::domain::Resolution>,
}

/// Moves incident `id` from `from` to `to` with compare-and-set on the state, inside the
/// caller's transaction, with `patch`. The incident write records the transition's event
/// ([`super::IncidentWrite::transition`]).
///
/// Returns `false` (and writes nothing) when the incident is no longer in `from`.
///
/// # Errors
/// Database errors.
pub(super) async fn apply_transition(
    tx: &mut Tx,
    id: &IncidentId,
    from: IncidentState,
    to: IncidentState,
    patch: &TransitionPatch,
    at: jiff::Timestamp,
) -> AppResult<bool> {
    let t = db_time(at);
    let (summary, root_cause, resolved_at) = match &patch.resolution {
        Some(r) => (
            Some(r.summary.as_str()),
            Some(r.root_cause.as_str()),
            Some(t.as_str()),
        ),
        None => (None, None, None),
    };
    let done = sqlx::query(
        "UPDATE incidents SET state = $1, updated_at = $2, version = version + 1,
             summary = COALESCE($3, summary), root_cause = COALESCE($4, root_cause),
             resolved_at = COALESCE($5, resolved_at)
         WHERE id = $6 AND state = $7",
    )
    .bind(to.as_str())
    .bind(&t)
    .bind(summary)
    .bind(root_cause)
    .bind(resolved_at)
    .bind(id.as_str())
    .bind(from.as_str())
    .execute(&mut **tx)
    .await?
    .rows_affected()
        == 1;
    Ok(done)
}

/// Incident `id`'s timeline events recorded after event `after` (an event id; 0 for all),
/// oldest first, at most `limit`: what a live page that last saw event `after` missed (its
/// `Last-Event-ID`). Event ids only grow and writers take the one write lock before they record
/// one, so per incident they come in commit order.
///
/// # Errors
/// Database errors.
pub async fn timeline_after(
    pool: &AnyPool,
    id: &IncidentId,
    after: i64,
    limit: i64,
) -> AppResult<Vec<TimelineEvent>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        id: i64,
        at: String,
        actor: String,
        kind: String,
        detail: String,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, at, actor, kind, detail FROM timeline_events
         WHERE incident_id = $1 AND id > $2 ORDER BY id LIMIT $3",
    )
    .bind(id.as_str())
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(TimelineEvent {
                id: r.id,
                at: parse_db_time(&r.at)?,
                actor: r.actor,
                kind: r.kind,
                detail: r.detail,
            })
        })
        .collect()
}
