//! Chat channels and their transactional outbox (issue #50, DESIGN.md §8).
//!
//! [`enqueue_in`] is called by [`super::incidents::add_event`], the one function every incident
//! event goes through, inside the incident write's own transaction: the outbox rows for the
//! channels that want the event are written with the change they report, and a rolled-back write
//! leaves none. The delivery worker then [`claim`]s due rows — on PostgreSQL with
//! `FOR UPDATE SKIP LOCKED`, so two instances never take the same row; on SQLite inside the one
//! write lock — and marks each delivered, to retry, or failed.
//!
//! The channels' secrets (a webhook URL, a Matrix access token) are stored as given, because every
//! delivery needs them, and are never serialised nor printed by `Debug`.

use sqlx::AnyPool;

use super::{Backend, Tx, db_time, parse_db_time};
use crate::domain::chat::{Candidate, ChannelKind, ChatEvent, Routing};
use crate::domain::{IncidentId, IncidentState, Severity};
use crate::error::{AppError, AppResult};

/// A stored channel. `url` (for webhooks) and `access_token` are secrets: skipped when
/// serialised and hidden by `Debug`.
#[derive(Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct Channel {
    /// Row id.
    pub id: i64,
    /// Unique name chosen by the admin.
    pub name: String,
    /// Where it posts.
    pub kind: ChannelKind,
    /// The webhook URL (Slack, Teams: a secret) or the Matrix homeserver's base URL. Not
    /// serialised: see [`Channel::destination`].
    #[serde(skip)]
    pub url: String,
    /// What the channel posts to, safe to show: the homeserver and room for Matrix, the
    /// webhook's host for the others.
    pub destination: String,
    /// Matrix room id (`!abc:example.org`).
    pub room_id: Option<String>,
    /// Matrix access token. Not serialised.
    #[serde(skip)]
    pub access_token: Option<String>,
    /// Which incidents and events it posts.
    pub routing: Routing,
    /// Admin who created it.
    pub created_by: String,
    /// When (RFC 3339 UTC).
    pub created_at: String,
    /// Last change (RFC 3339 UTC).
    pub updated_at: String,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("destination", &self.destination)
            .field("url", &"<redacted>")
            .field(
                "access_token",
                &self.access_token.as_ref().map(|_| "<redacted>"),
            )
            .field("routing", &self.routing)
            .finish_non_exhaustive()
    }
}

/// What the admin page shows of a channel without revealing its secret: the host of a webhook,
/// the homeserver and room of a Matrix channel.
pub fn destination_of(kind: ChannelKind, url: &str, room_id: Option<&str>) -> String {
    let host = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_string(),
            })
        })
        .unwrap_or_else(|| "?".into());
    match kind {
        ChannelKind::Matrix => format!("{} on {host}", room_id.unwrap_or("?")),
        _ => format!("{host} (webhook; its path is the secret)"),
    }
}

#[derive(sqlx::FromRow)]
struct ChannelRow {
    id: i64,
    name: String,
    kind: String,
    url: String,
    room_id: Option<String>,
    access_token: Option<String>,
    services: String,
    min_severity: String,
    events: String,
    created_by: String,
    created_at: String,
    updated_at: String,
}

fn corrupt(e: impl std::fmt::Display) -> AppError {
    AppError::Internal(anyhow::anyhow!("stored chat channel: {e}"))
}

fn routing_of(services: &str, min_severity: &str, events: &str) -> AppResult<Routing> {
    let services: Vec<String> = serde_json::from_str(services).map_err(corrupt)?;
    let names: Vec<String> = serde_json::from_str(events).map_err(corrupt)?;
    let events = names
        .iter()
        .map(|e| ChatEvent::parse(e).map_err(corrupt))
        .collect::<AppResult<Vec<_>>>()?;
    Ok(Routing {
        services,
        min_severity: Severity::parse(min_severity).map_err(corrupt)?,
        events,
    })
}

impl ChannelRow {
    fn into_channel(self) -> AppResult<Channel> {
        let kind = ChannelKind::parse(&self.kind).map_err(corrupt)?;
        Ok(Channel {
            id: self.id,
            destination: destination_of(kind, &self.url, self.room_id.as_deref()),
            name: self.name,
            kind,
            url: self.url,
            room_id: self.room_id,
            access_token: self.access_token,
            routing: routing_of(&self.services, &self.min_severity, &self.events)?,
            created_by: self.created_by,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

const CHANNEL_COLUMNS: &str = "id, name, kind, url, room_id, access_token, services, \
                               min_severity, events, created_by, created_at, updated_at";

/// What to insert (validated by `services::chat`).
#[derive(Clone)]
pub struct NewChannel<'a> {
    /// Unique name.
    pub name: &'a str,
    /// Kind.
    pub kind: ChannelKind,
    /// Webhook URL or homeserver URL.
    pub url: &'a str,
    /// Matrix room id.
    pub room_id: Option<&'a str>,
    /// Matrix access token.
    pub access_token: Option<&'a str>,
    /// Routing.
    pub routing: &'a Routing,
    /// Admin creating it.
    pub created_by: &'a str,
}

fn json<T: serde::Serialize>(v: &T) -> AppResult<String> {
    serde_json::to_string(v).map_err(|e| AppError::Internal(e.into()))
}

fn event_names(r: &Routing) -> AppResult<String> {
    json(&r.events.iter().map(|e| e.as_str()).collect::<Vec<_>>())
}

/// Inserts a channel inside the caller's transaction; returns its id.
///
/// # Errors
/// [`AppError::Conflict`] when the name is taken; database errors.
pub async fn insert(tx: &mut Tx, new: &NewChannel<'_>, at: jiff::Timestamp) -> AppResult<i64> {
    let t = db_time(at);
    let res = sqlx::query_scalar(
        "INSERT INTO chat_channels (name, kind, url, room_id, access_token, services,
                                    min_severity, events, created_by, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
    )
    .bind(new.name)
    .bind(new.kind.as_str())
    .bind(new.url)
    .bind(new.room_id)
    .bind(new.access_token)
    .bind(json(&new.routing.services)?)
    .bind(new.routing.min_severity.as_str())
    .bind(event_names(new.routing)?)
    .bind(new.created_by)
    .bind(&t)
    .bind(&t)
    .fetch_one(&mut **tx)
    .await;
    match res {
        Ok(id) => Ok(id),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            Err(AppError::Conflict(format!(
                "a chat channel named '{}' exists; choose another name",
                new.name
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// Replaces channel `id`'s routing inside the caller's transaction.
///
/// # Errors
/// [`AppError::NotFound`]; database errors.
pub async fn set_routing(tx: &mut Tx, id: i64, r: &Routing, at: jiff::Timestamp) -> AppResult<()> {
    let n = sqlx::query(
        "UPDATE chat_channels SET services = $1, min_severity = $2, events = $3, updated_at = $4
         WHERE id = $5",
    )
    .bind(json(&r.services)?)
    .bind(r.min_severity.as_str())
    .bind(event_names(r)?)
    .bind(db_time(at))
    .bind(id)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    if n == 0 {
        return Err(AppError::NotFound(format!("chat channel {id}")));
    }
    Ok(())
}

/// Deletes channel `id` and its outbox inside the caller's transaction.
///
/// # Errors
/// [`AppError::NotFound`]; database errors.
pub async fn delete(tx: &mut Tx, id: i64) -> AppResult<()> {
    sqlx::query("DELETE FROM chat_outbox WHERE channel_id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    let n = sqlx::query("DELETE FROM chat_channels WHERE id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(AppError::NotFound(format!("chat channel {id}")));
    }
    Ok(())
}

/// Channel `id`.
///
/// # Errors
/// [`AppError::NotFound`]; database errors.
pub async fn get(pool: &AnyPool, id: i64) -> AppResult<Channel> {
    let sql = format!("SELECT {CHANNEL_COLUMNS} FROM chat_channels WHERE id = $1");
    let row: Option<ChannelRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    row.ok_or_else(|| AppError::NotFound(format!("chat channel {id}")))?
        .into_channel()
}

/// Every channel, oldest first.
///
/// # Errors
/// Database errors.
pub async fn list(pool: &AnyPool) -> AppResult<Vec<Channel>> {
    let sql = format!("SELECT {CHANNEL_COLUMNS} FROM chat_channels ORDER BY id");
    let rows: Vec<ChannelRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_all(pool)
        .await?;
    rows.into_iter().map(ChannelRow::into_channel).collect()
}

/// Writes the outbox rows for timeline entry `event_id` (of `kind`, on incident `id`, at `at`)
/// inside the incident write's transaction: one per channel whose routing wants the event it
/// reports ([`ChatEvent::candidate`], then the facts the transaction sees). Writes nothing, and
/// reads nothing more, for a kind no channel ever posts.
///
/// # Errors
/// Database errors (the incident write then rolls back as a whole).
pub async fn enqueue_in(
    tx: &mut Tx,
    id: &IncidentId,
    event_id: i64,
    kind: &str,
    at: jiff::Timestamp,
) -> AppResult<()> {
    let Some(candidate) = ChatEvent::candidate(kind) else {
        return Ok(());
    };
    let channels: Vec<(i64, String, String, String)> =
        sqlx::query_as("SELECT id, services, min_severity, events FROM chat_channels ORDER BY id")
            .fetch_all(&mut **tx)
            .await?;
    if channels.is_empty() {
        return Ok(());
    }
    let (service, severity, state): (String, String, String) =
        sqlx::query_as("SELECT service, severity, state FROM incidents WHERE id = $1")
            .bind(id.as_str())
            .fetch_one(&mut **tx)
            .await?;
    let severity = Severity::parse(&severity).map_err(corrupt)?;
    let t = db_time(at);
    let (event, subject) = match candidate {
        Candidate::Always(e) => (e, None),
        Candidate::IfApprovedWithWarning => {
            let rid: Option<i64> = sqlx::query_scalar(
                "SELECT id FROM recommendations WHERE incident_id = $1 AND status = 'approved'
                   AND decided_at = $2 AND warning IS NOT NULL ORDER BY id DESC LIMIT 1",
            )
            .bind(id.as_str())
            .bind(&t)
            .fetch_optional(&mut **tx)
            .await?;
            match rid {
                Some(rid) => (ChatEvent::DeadEndApproved, Some(rid.to_string())),
                None => return Ok(()),
            }
        }
        Candidate::IfNoAlertFiringWhileOpen => {
            if state != IncidentState::Investigating.as_str() {
                return Ok(());
            }
            let (firing, all): (i64, i64) = sqlx::query_as(
                "SELECT COALESCE(SUM(CASE WHEN status = 'firing' THEN 1 ELSE 0 END), 0), COUNT(*)
                   FROM alerts WHERE incident_id = $1",
            )
            .bind(id.as_str())
            .fetch_one(&mut **tx)
            .await?;
            if firing > 0 || all == 0 {
                return Ok(());
            }
            (ChatEvent::AlertsResolved, None)
        }
    };
    for (channel, services, min_severity, events) in channels {
        if !routing_of(&services, &min_severity, &events)?.wants(&service, severity, event) {
            continue;
        }
        sqlx::query(
            "INSERT INTO chat_outbox (txn_id, channel_id, incident_id, timeline_event_id, event,
                                      subject, status, next_attempt_at, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8)",
        )
        .bind(format!("im-{}", hex::encode(rand::random::<[u8; 16]>())))
        .bind(channel)
        .bind(id.as_str())
        .bind(event_id)
        .bind(event.as_str())
        .bind(subject.as_deref())
        .bind(&t)
        .bind(&t)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// One outbox row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize, utoipa::ToSchema)]
pub struct OutboxRow {
    /// Row id.
    pub id: i64,
    /// The idempotency key sent with it (the Matrix transaction id).
    pub txn_id: String,
    /// Its channel.
    pub channel_id: i64,
    /// The incident it reports on.
    pub incident_id: String,
    /// The timeline entry it reports.
    pub timeline_event_id: i64,
    /// [`ChatEvent`] name.
    pub event: String,
    /// What else names the event (the approved recommendation's id).
    pub subject: Option<String>,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    /// Delivery attempts so far.
    pub attempts: i64,
    /// Not before this instant (RFC 3339 UTC).
    pub next_attempt_at: String,
    /// The last error, as the chat service or the network said it.
    pub last_error: Option<String>,
    /// What the chat service named the posted message (a Matrix event id).
    pub remote_id: Option<String>,
    /// When the incident write queued it.
    pub created_at: String,
    /// When it was delivered.
    pub delivered_at: Option<String>,
}

const OUTBOX_COLUMNS: &str = "id, txn_id, channel_id, incident_id, timeline_event_id, event, \
                              subject, status, attempts, next_attempt_at, last_error, remote_id, \
                              created_at, delivered_at";

/// Takes up to `limit` due rows for delivery until `now + lease` (another worker takes a row
/// again only after that, should this one die with it): pending, due, not held by a live claim,
/// and the oldest row still pending of its channel and incident, so an incident's messages are
/// posted in order and a thread's root goes first. Two instances on PostgreSQL never take the
/// same row (`FOR UPDATE SKIP LOCKED`); SQLite has one writer.
///
/// # Errors
/// Database errors.
pub async fn claim(
    pool: &AnyPool,
    now: jiff::Timestamp,
    lease: std::time::Duration,
    limit: i64,
) -> AppResult<Vec<OutboxRow>> {
    let t = db_time(now);
    let until = db_time(now + jiff::SignedDuration::try_from(lease).unwrap_or_default());
    let head = "o.status = 'pending' AND o.next_attempt_at <= $1
                AND (o.claimed_until IS NULL OR o.claimed_until <= $1)
                AND NOT EXISTS (SELECT 1 FROM chat_outbox e WHERE e.channel_id = o.channel_id
                                  AND e.incident_id = o.incident_id AND e.id < o.id
                                  AND e.status = 'pending')";
    // A plain read first: an idle worker never takes the write lock.
    let due: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT o.id FROM chat_outbox o WHERE {head} LIMIT 1"
    )))
    .bind(&t)
    .fetch_optional(pool)
    .await?;
    if due.is_none() {
        return Ok(Vec::new());
    }
    let (mut tx, pick) = match Backend::of(pool) {
        Backend::Sqlite => (
            super::begin_write(pool).await?,
            format!("SELECT o.id FROM chat_outbox o WHERE {head} ORDER BY o.id LIMIT $2"),
        ),
        Backend::Postgres => (
            pool.begin().await?,
            format!(
                "SELECT o.id FROM chat_outbox o WHERE {head} ORDER BY o.id LIMIT $2
                 FOR UPDATE OF o SKIP LOCKED"
            ),
        ),
    };
    let ids: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(pick))
        .bind(&t)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        let sql = format!(
            "UPDATE chat_outbox SET claimed_until = $1 WHERE id = $2 RETURNING {OUTBOX_COLUMNS}"
        );
        let row: OutboxRow = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&until)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        rows.push(row);
    }
    tx.commit().await?;
    Ok(rows)
}

/// Marks row `id` delivered, with what the chat service named the message.
///
/// # Errors
/// Database errors.
pub async fn delivered(
    pool: &AnyPool,
    id: i64,
    remote_id: Option<&str>,
    at: jiff::Timestamp,
) -> AppResult<()> {
    sqlx::query(
        "UPDATE chat_outbox SET status = 'delivered', remote_id = $1, delivered_at = $2,
             attempts = attempts + 1, claimed_until = NULL, last_error = NULL
         WHERE id = $3 AND status = 'pending'",
    )
    .bind(remote_id)
    .bind(db_time(at))
    .bind(id)
    .execute(pool)
    .await?;
    Ok(())
}

/// Row `id` failed an attempt: try again at `next` (`attempted`: the attempt counts; a row
/// waiting for its first read does not), or — `give_up_at` passed — mark it failed. Returns
/// whether it is now failed. `give_up_at` is set by the first failed attempt and kept after.
///
/// # Errors
/// Database errors.
pub async fn retry_later(
    pool: &AnyPool,
    id: i64,
    now: jiff::Timestamp,
    next: jiff::Timestamp,
    give_up_at: jiff::Timestamp,
    error: Option<&str>,
) -> AppResult<bool> {
    let row: Option<(Option<String>,)> =
        sqlx::query_as("SELECT give_up_at FROM chat_outbox WHERE id = $1 AND status = 'pending'")
            .bind(id)
            .fetch_optional(pool)
            .await?;
    let Some((stored,)) = row else {
        return Ok(false);
    };
    let deadline = match (&stored, error) {
        (Some(s), _) => Some(parse_db_time(s)?),
        (None, Some(_)) => Some(give_up_at),
        (None, None) => None,
    };
    let give_up = error.is_some() && deadline.is_some_and(|d| now >= d);
    sqlx::query(
        "UPDATE chat_outbox SET status = $1, next_attempt_at = $2, give_up_at = $3,
             attempts = attempts + $4, last_error = COALESCE($5, last_error), claimed_until = NULL
         WHERE id = $6 AND status = 'pending'",
    )
    .bind(if give_up { "failed" } else { "pending" })
    .bind(db_time(next))
    .bind(deadline.map(db_time))
    .bind(i64::from(error.is_some()))
    .bind(error)
    .bind(id)
    .execute(pool)
    .await?;
    Ok(give_up)
}

/// Marks row `id` failed at once (the chat service refused it for good), with `error`.
///
/// # Errors
/// Database errors.
pub async fn failed(pool: &AnyPool, id: i64, error: &str) -> AppResult<()> {
    sqlx::query(
        "UPDATE chat_outbox SET status = 'failed', attempts = attempts + 1, last_error = $1,
             claimed_until = NULL
         WHERE id = $2 AND status = 'pending'",
    )
    .bind(error)
    .bind(id)
    .execute(pool)
    .await?;
    Ok(())
}

/// Puts failed row `id` of channel `channel` back in the queue, due now, with a fresh give-up
/// deadline. Returns whether it was failed.
///
/// # Errors
/// Database errors.
pub async fn requeue(tx: &mut Tx, channel: i64, id: i64, at: jiff::Timestamp) -> AppResult<bool> {
    Ok(sqlx::query(
        "UPDATE chat_outbox SET status = 'pending', next_attempt_at = $1, give_up_at = NULL,
             claimed_until = NULL
         WHERE id = $2 AND channel_id = $3 AND status = 'failed'",
    )
    .bind(db_time(at))
    .bind(id)
    .bind(channel)
    .execute(&mut **tx)
    .await?
    .rows_affected()
        == 1)
}

/// The most recent rows of channel `channel` in `status` (any when `None`), newest first, at
/// most `limit`.
///
/// # Errors
/// Database errors.
pub async fn rows_of(
    pool: &AnyPool,
    channel: i64,
    status: Option<&str>,
    limit: i64,
) -> AppResult<Vec<OutboxRow>> {
    let sql = format!(
        "SELECT {OUTBOX_COLUMNS} FROM chat_outbox WHERE channel_id = $1
           AND ($2 IS NULL OR status = $2) ORDER BY id DESC LIMIT $3"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(channel)
        .bind(status)
        .bind(limit)
        .fetch_all(pool)
        .await?)
}

/// Rows of every channel by status: `(channel id, status, count)`.
///
/// # Errors
/// Database errors.
pub async fn counts(pool: &AnyPool) -> AppResult<Vec<(i64, String, i64)>> {
    Ok(sqlx::query_as(
        "SELECT channel_id, status, COUNT(*) FROM chat_outbox GROUP BY channel_id, status",
    )
    .fetch_all(pool)
    .await?)
}

/// The first message posted to `channel` about `incident` that the chat service named: the root
/// of the incident's thread there.
///
/// # Errors
/// Database errors.
pub async fn thread_root(
    pool: &AnyPool,
    channel: i64,
    incident: &str,
) -> AppResult<Option<String>> {
    Ok(sqlx::query_scalar(
        "SELECT remote_id FROM chat_outbox WHERE channel_id = $1 AND incident_id = $2
           AND remote_id IS NOT NULL ORDER BY id LIMIT 1",
    )
    .bind(channel)
    .bind(incident)
    .fetch_optional(pool)
    .await?)
}

/// Timeline entry `id`: `(actor, kind, detail)`.
///
/// # Errors
/// [`AppError::NotFound`]; database errors.
pub async fn timeline_entry(pool: &AnyPool, id: i64) -> AppResult<(String, String, String)> {
    sqlx::query_as("SELECT actor, kind, detail FROM timeline_events WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("timeline event {id}")))
}

/// Names of the users who hold the reviewer role or more (reviewers and admins), sorted.
///
/// # Errors
/// Database errors.
pub async fn reviewer_names(pool: &AnyPool) -> AppResult<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT name FROM users WHERE role IN ('reviewer', 'admin') ORDER BY name",
    )
    .fetch_all(pool)
    .await?)
}
