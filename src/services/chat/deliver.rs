//! The outbox worker (DESIGN.md §8): claims due messages ([`crate::store::chat::claim`]),
//! composes each ([`super::compose`]), posts it through its channel's sender and records the
//! outcome: delivered (with the Matrix event id, the root of the incident's thread there), to
//! retry after an exponential backoff (doubling from 1 s up to [`super::ChatSettings::
//! backoff_max`], or what a `429`'s `Retry-After` asked, up to [`super::RETRY_AFTER_MAX`]), or
//! failed — refused for good by the chat service, or still failing
//! [`super::ChatSettings::give_up_after`] after its first failure.
//!
//! It runs beside the router (`App::spawn_background`), never inside a request: a slow or dead
//! chat service delays only its own channel's messages. Channels are served concurrently; within
//! one channel, a message that fails for a reason that may pass defers that channel's other
//! messages of the batch, so a dead service costs one timeout per round, not one per message.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::AnyPool;

use super::compose::{Composed, compose};
use super::{ChatSettings, RETRY_AFTER_MAX, target_of};
use crate::chat::{self, SendError};
use crate::domain::chat::ChannelKind;
use crate::error::AppResult;
use crate::load::Foreground;
use crate::memory::Memory;
use crate::memory::recall::PendingVectors;
use crate::store;
use crate::store::chat::{self as cstore, Channel, OutboxRow};

/// How long a claimed batch is held before another worker may take its rows again (longer than
/// a batch takes: each send times out after [`chat::SEND_TIMEOUT`], and a failing channel stops
/// at its first failure).
const LEASE: Duration = Duration::from_secs(120);

/// Messages claimed at once.
const BATCH: i64 = 50;

/// How soon an "opened" message waiting for its first read is looked at again.
const FIRST_READ_POLL: Duration = Duration::from_millis(250);

/// How long without a write request counts as a quiet moment ([`Foreground`]).
const QUIET: Duration = Duration::from_millis(25);

/// How long one round waits for quiet moments at most, all its messages together: in a storm
/// that never pauses, messages still go out, one round after another, this much later.
const YIELD_MAX: Duration = Duration::from_secs(3);

/// The worker: delivers due messages until `stop` turns true; sleeps [`ChatSettings::poll`]
/// when nothing is due. Before it composes each message it waits for a moment without write
/// requests ([`QUIET`]), at most [`YIELD_MAX`] in a round: a burst of webhooks is answered
/// first, and its messages follow (issue #50: a channel never slows a webhook).
pub async fn run_worker(
    pool: AnyPool,
    memory: Memory,
    settings: ChatSettings,
    foreground: Arc<Foreground>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let client = match chat::client() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "chat delivery cannot start: no HTTP client");
            return;
        }
    };
    let mut waiting = Waiting::default();
    loop {
        if *stop.borrow() {
            return;
        }
        let claimed = match deliver_due(
            &pool,
            &memory,
            &settings,
            &client,
            &foreground,
            &mut waiting,
        )
        .await
        {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "chat delivery round failed");
                0
            }
        };
        if claimed > 0 {
            continue;
        }
        // A first read waiting on its recall is looked at again after FIRST_READ_POLL, not
        // after a whole `poll`.
        let pause = if waiting.rows.is_empty() {
            settings.poll
        } else {
            settings.poll.min(FIRST_READ_POLL)
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = stop.changed() => {}
        }
    }
}

/// "Opened" messages whose first read waits for its recall's query vectors, kept by the
/// worker that claimed them (issue #50). While they wait nothing is written: their claim (the
/// [`LEASE`]) keeps other workers off them and keeps the incident's later messages behind them;
/// every [`FIRST_READ_POLL`] their pending query vectors are looked up in the memory's caches
/// ([`PendingVectors::ready`]), and a message is composed again only once they are ready or its
/// wait is over. Writing each one back to the outbox on every poll took SQLite's write lock hundreds
/// of times a second in an alert storm, and the webhooks queued behind it. A row still waiting
/// after half its lease is written back and claimed again later, so a lease never runs out
/// under a live worker; a worker that dies leaves its rows to the next claim after the lease.
#[derive(Debug, Default)]
pub struct Waiting {
    rows: Vec<Wait>,
}

/// One message waiting for its first read.
#[derive(Debug)]
struct Wait {
    row: OutboxRow,
    /// When this worker claimed it.
    claimed: tokio::time::Instant,
    /// When to look at it again.
    next: tokio::time::Instant,
    /// The query vectors it waits for, when that is what it waits for: looked at with a cache
    /// read, and the message composed again (with its database reads) only once they are
    /// ready or the wait is over.
    pending: Option<PendingVectors>,
    /// When its first read stops waiting ([`ChatSettings::first_read_wait`] after the row was
    /// queued).
    until: jiff::Timestamp,
}

/// What became of one message tried once.
enum Tried {
    /// Delivered, failed for good, or written back for a later attempt.
    Done,
    /// The chat service failed in a way that may pass: the channel's other messages wait until
    /// then.
    Deferred(jiff::Timestamp),
    /// Its first read waits for the recall's vectors: kept in [`Waiting`], nothing written.
    Waits(Option<PendingVectors>),
}

/// One round: the waiting rows that are due to be looked at again, then newly claimed ones,
/// each tried once; rows whose first read still waits go back into `waiting`. Returns how
/// many rows were newly claimed.
///
/// # Errors
/// Database errors of the claim.
pub async fn deliver_due(
    pool: &AnyPool,
    memory: &Memory,
    settings: &ChatSettings,
    client: &reqwest::Client,
    foreground: &Foreground,
    waiting: &mut Waiting,
) -> AppResult<usize> {
    let now = tokio::time::Instant::now();
    let mut rows: Vec<(OutboxRow, tokio::time::Instant)> = Vec::new();
    let mut kept = Vec::with_capacity(waiting.rows.len());
    for mut w in std::mem::take(&mut waiting.rows) {
        if now.duration_since(w.claimed) >= LEASE / 2 {
            // Written back: claimed again on a later round, with a fresh lease.
            cstore::retry_later(pool, w.row.id, store::now(), store::now(), far(), None).await?;
        } else if now < w.next {
            kept.push(w);
        } else if w.pending.as_ref().is_some_and(|p| !p.ready(memory)) && store::now() < w.until {
            w.next = now + FIRST_READ_POLL;
            kept.push(w);
        } else {
            rows.push((w.row, w.claimed));
        }
    }
    waiting.rows = kept;
    let fresh = cstore::claim(pool, store::now(), LEASE, BATCH).await?;
    let n = fresh.len();
    rows.extend(fresh.into_iter().map(|r| (r, now)));
    if rows.is_empty() {
        return Ok(0);
    }
    let yield_until = tokio::time::Instant::now() + YIELD_MAX;
    let channels: BTreeMap<i64, Channel> = cstore::list(pool)
        .await?
        .into_iter()
        .map(|c| (c.id, c))
        .collect();
    let mut by_channel: BTreeMap<i64, Vec<(OutboxRow, tokio::time::Instant)>> = BTreeMap::new();
    for (r, claimed) in rows {
        by_channel
            .entry(r.channel_id)
            .or_default()
            .push((r, claimed));
    }
    let rounds = by_channel.into_iter().filter_map(|(id, rows)| {
        let channel = channels.get(&id)?;
        Some(deliver_channel(
            pool,
            memory,
            settings,
            client,
            (foreground, yield_until),
            channel,
            rows,
        ))
    });
    let next = tokio::time::Instant::now() + FIRST_READ_POLL;
    for still in futures::future::join_all(rounds).await {
        waiting
            .rows
            .extend(still.into_iter().map(|(row, claimed, pending)| {
                let until = store::parse_db_time(&row.created_at)
                    .map_or_else(|_| store::now(), |t| later(t, settings.first_read_wait));
                Wait {
                    row,
                    claimed,
                    next,
                    pending,
                    until,
                }
            }));
    }
    Ok(n)
}

/// Tries `rows` of `channel` in order; after a failure that may pass, the rest wait as long.
/// Returns the rows whose first read still waits.
async fn deliver_channel(
    pool: &AnyPool,
    memory: &Memory,
    settings: &ChatSettings,
    client: &reqwest::Client,
    (foreground, yield_until): (&Foreground, tokio::time::Instant),
    channel: &Channel,
    rows: Vec<(OutboxRow, tokio::time::Instant)>,
) -> Vec<(OutboxRow, tokio::time::Instant, Option<PendingVectors>)> {
    let mut deferred: Option<jiff::Timestamp> = None;
    let mut still = Vec::new();
    for (row, claimed) in rows {
        let result = match deferred {
            Some(until) => cstore::retry_later(pool, row.id, store::now(), until, far(), None)
                .await
                .map(|_| Tried::Done),
            None => {
                let left = yield_until.saturating_duration_since(tokio::time::Instant::now());
                foreground.yield_to_writes(QUIET, left).await;
                deliver_one(pool, memory, settings, client, channel, &row).await
            }
        };
        match result {
            Ok(Tried::Deferred(until)) => deferred = Some(until),
            Ok(Tried::Waits(pending)) => still.push((row, claimed, pending)),
            Ok(Tried::Done) => {}
            Err(e) => tracing::warn!(chat_channel.id = channel.id, outbox.id = row.id, error = %e,
                "chat message not recorded"),
        }
    }
    still
}

/// A deadline never reached (a row deferred without an attempt keeps its own).
fn far() -> jiff::Timestamp {
    jiff::Timestamp::MAX
}

/// Tries one message ([`Tried`]).
async fn deliver_one(
    pool: &AnyPool,
    memory: &Memory,
    settings: &ChatSettings,
    client: &reqwest::Client,
    channel: &Channel,
    row: &OutboxRow,
) -> AppResult<Tried> {
    let now = store::now();
    let give_up = later(now, settings.give_up_after);
    let message = match compose(pool, memory, settings, row, now).await {
        Ok(Composed::Ready(m)) => m,
        Ok(Composed::NotYet(pending)) => return Ok(Tried::Waits(pending)),
        Err(e) => {
            let next = later(now, backoff(row.attempts, settings.backoff_max));
            let error = format!("could not compose the message: {e}");
            cstore::retry_later(pool, row.id, now, next, give_up, Some(&error)).await?;
            return Ok(Tried::Done);
        }
    };
    let root = match channel.kind {
        ChannelKind::Matrix => cstore::thread_root(pool, channel.id, &row.incident_id).await?,
        _ => None,
    };
    match chat::send(
        client,
        &target_of(channel),
        &message,
        &row.txn_id,
        root.as_deref(),
    )
    .await
    {
        Ok(sent) => {
            cstore::delivered(pool, row.id, sent.remote_id.as_deref(), store::now()).await?;
            tracing::info!(chat_channel.id = channel.id, outbox.id = row.id,
                incident.id = %row.incident_id, event = %row.event, "chat message delivered");
            Ok(Tried::Done)
        }
        Err(SendError::Refused { message: error, .. }) => {
            tracing::warn!(chat_channel.id = channel.id, outbox.id = row.id, error = %error,
                "chat message refused");
            cstore::failed(pool, row.id, &error).await?;
            Ok(Tried::Done)
        }
        Err(SendError::Transient {
            retry_after,
            message: error,
            ..
        }) => {
            let wait = match retry_after {
                Some(asked) => asked.min(RETRY_AFTER_MAX),
                None => backoff(row.attempts, settings.backoff_max),
            };
            let next = later(store::now(), wait);
            let gave_up =
                cstore::retry_later(pool, row.id, now, next, give_up, Some(&error)).await?;
            if gave_up {
                tracing::warn!(chat_channel.id = channel.id, outbox.id = row.id, error = %error,
                    "chat message given up");
            }
            Ok(Tried::Deferred(next))
        }
    }
}

/// The wait after `attempts` failed attempts: 1 s doubling, at most `max`, less up to a fifth
/// at random (so many messages failing together do not come back together).
pub fn backoff(attempts: i64, max: Duration) -> Duration {
    let exp = u32::try_from(attempts.clamp(0, 20)).unwrap_or(20);
    let base = Duration::from_secs(1u64 << exp).min(max);
    let jitter: f64 = rand::random::<f64>() * 0.2;
    base.mul_f64(1.0 - jitter)
}

/// `d` after `t`, or the last instant there is.
fn later(t: jiff::Timestamp, d: Duration) -> jiff::Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(jiff::Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let max = Duration::from_secs(30);
        assert!(backoff(0, max) <= Duration::from_secs(1));
        assert!(
            backoff(3, max) > Duration::from_secs(6) && backoff(3, max) <= Duration::from_secs(8)
        );
        assert!(backoff(50, max) <= max && backoff(50, max) >= Duration::from_secs(24));
    }
}
