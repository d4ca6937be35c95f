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
use std::time::Duration;

use sqlx::AnyPool;

use super::compose::{Composed, compose};
use super::{ChatSettings, RETRY_AFTER_MAX, target_of};
use crate::chat::{self, SendError};
use crate::domain::chat::ChannelKind;
use crate::error::AppResult;
use crate::memory::Memory;
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

/// The worker: delivers due messages until `stop` turns true; sleeps [`ChatSettings::poll`]
/// when nothing is due.
pub async fn run_worker(
    pool: AnyPool,
    memory: Memory,
    settings: ChatSettings,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let client = match chat::client() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "chat delivery cannot start: no HTTP client");
            return;
        }
    };
    // When the last round claimed something, a first read may be waiting on its recall
    // (retried every FIRST_READ_POLL): look again that soon, not after a whole `poll`.
    let mut busy_until = tokio::time::Instant::now();
    loop {
        if *stop.borrow() {
            return;
        }
        let worked = match deliver_due(&pool, &memory, &settings, &client).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "chat delivery round failed");
                0
            }
        };
        let now = tokio::time::Instant::now();
        if worked > 0 {
            busy_until = now + settings.first_read_wait;
            continue;
        }
        let pause = if now < busy_until {
            settings.poll.min(FIRST_READ_POLL)
        } else {
            settings.poll
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            _ = stop.changed() => {}
        }
    }
}

/// One round: claims due messages and tries each once. Returns how many were claimed.
///
/// # Errors
/// Database errors of the claim.
pub async fn deliver_due(
    pool: &AnyPool,
    memory: &Memory,
    settings: &ChatSettings,
    client: &reqwest::Client,
) -> AppResult<usize> {
    let rows = cstore::claim(pool, store::now(), LEASE, BATCH).await?;
    if rows.is_empty() {
        return Ok(0);
    }
    let n = rows.len();
    let channels: BTreeMap<i64, Channel> = cstore::list(pool)
        .await?
        .into_iter()
        .map(|c| (c.id, c))
        .collect();
    let mut by_channel: BTreeMap<i64, Vec<OutboxRow>> = BTreeMap::new();
    for r in rows {
        by_channel.entry(r.channel_id).or_default().push(r);
    }
    let rounds = by_channel.into_iter().filter_map(|(id, rows)| {
        let channel = channels.get(&id)?;
        Some(deliver_channel(
            pool, memory, settings, client, channel, rows,
        ))
    });
    futures::future::join_all(rounds).await;
    Ok(n)
}

/// Tries `rows` of `channel` in order; after a failure that may pass, the rest wait as long.
async fn deliver_channel(
    pool: &AnyPool,
    memory: &Memory,
    settings: &ChatSettings,
    client: &reqwest::Client,
    channel: &Channel,
    rows: Vec<OutboxRow>,
) {
    let mut deferred: Option<jiff::Timestamp> = None;
    for row in rows {
        let result = match deferred {
            Some(until) => cstore::retry_later(pool, row.id, store::now(), until, far(), None)
                .await
                .map(|_| None),
            None => deliver_one(pool, memory, settings, client, channel, &row).await,
        };
        match result {
            Ok(Some(until)) => deferred = Some(until),
            Ok(None) => {}
            Err(e) => tracing::warn!(chat_channel.id = channel.id, outbox.id = row.id, error = %e,
                "chat message not recorded"),
        }
    }
}

/// A deadline never reached (a row deferred without an attempt keeps its own).
fn far() -> jiff::Timestamp {
    jiff::Timestamp::MAX
}

/// Tries one message. Returns the instant its channel's other messages should wait for when
/// the chat service failed in a way that may pass.
async fn deliver_one(
    pool: &AnyPool,
    memory: &Memory,
    settings: &ChatSettings,
    client: &reqwest::Client,
    channel: &Channel,
    row: &OutboxRow,
) -> AppResult<Option<jiff::Timestamp>> {
    let now = store::now();
    let give_up = later(now, settings.give_up_after);
    let message = match compose(pool, memory, settings, row, now).await {
        Ok(Composed::Ready(m)) => m,
        Ok(Composed::NotYet) => {
            cstore::retry_later(pool, row.id, now, later(now, FIRST_READ_POLL), far(), None)
                .await?;
            return Ok(None);
        }
        Err(e) => {
            let next = later(now, backoff(row.attempts, settings.backoff_max));
            let error = format!("could not compose the message: {e}");
            cstore::retry_later(pool, row.id, now, next, give_up, Some(&error)).await?;
            return Ok(None);
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
            Ok(None)
        }
        Err(SendError::Refused { message: error, .. }) => {
            tracing::warn!(chat_channel.id = channel.id, outbox.id = row.id, error = %error,
                "chat message refused");
            cstore::failed(pool, row.id, &error).await?;
            Ok(None)
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
            Ok(Some(next))
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
