//! The other instances' incident changes: a `LISTEN` on PostgreSQL's
//! [`super::changes::CHANNEL`] that hands every notice another instance's incident write sent
//! (`pg_notify` inside its transaction, delivered at its commit) to this process's
//! [`ChangeHub`], so a live page on instance A sees a change made on instance B (issue #55).
//! This process's own notices are skipped: its writes publish them to the hub themselves.
//!
//! The same connection hears [`PRESENCE_CHANNEL`]: each instance announces who has an incident
//! open on it ([`announce_presence`]) when that changes and every [`PRESENCE_REFRESH`], so a
//! page's "Here now" lists the viewers of every instance.
//!
//! One dedicated connection (sqlx's [`PgListener`]), started by the first live stream. When it
//! is lost, notices sent before it is back are lost with it: the listener connects again (1 s,
//! doubling to 30 s) and, once it listens again, moves [`Listener::resyncs`] so every stream
//! reads what it may have missed from the timeline.

use std::time::Duration;

use sqlx::AnyPool;
use sqlx::postgres::PgListener;
use tokio::sync::{mpsc, watch};

use super::changes::{CHANNEL, Change, ChangeHub};
use crate::domain::IncidentId;
use crate::error::AppResult;

/// The `NOTIFY` channel instances announce their incidents' viewers on.
pub const PRESENCE_CHANNEL: &str = "incident_presence";

/// How often an instance announces its viewers again (another instance forgets them after
/// three times this without news: an instance that died leaves no ghosts for long).
pub const PRESENCE_REFRESH: Duration = Duration::from_secs(20);

/// Who has one incident open on one instance.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PresenceNotice {
    /// The incident.
    pub incident: IncidentId,
    /// The announcing instance ([`ChangeHub::origin`]).
    pub origin: String,
    /// Its viewers' names, sorted (empty: nobody any more).
    pub names: Vec<String>,
    /// Whether the other instances should answer with their own viewers of the incident (sent
    /// when this instance's viewers change).
    #[serde(default)]
    pub ask: bool,
}

/// Announces `notice` to every instance listening (`pg_notify` on [`PRESENCE_CHANNEL`]).
///
/// # Errors
/// Database errors.
pub async fn announce_presence(pool: &AnyPool, notice: &PresenceNotice) -> AppResult<()> {
    let payload = serde_json::to_string(notice).unwrap_or_default();
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(PRESENCE_CHANNEL)
        .bind(payload)
        .execute(pool)
        .await?;
    Ok(())
}

/// A running listener: whether it listens now, and how many times it came back.
#[derive(Debug)]
pub struct Listener {
    listening: watch::Receiver<bool>,
    resyncs: watch::Receiver<u64>,
}

impl Listener {
    /// Starts listening on the PostgreSQL database at `url` and hands other instances' change
    /// notices to `hub` and their presence notices to `presence`, in a task that runs until the
    /// runtime stops.
    pub fn spawn(
        url: String,
        hub: ChangeHub,
        presence: mpsc::UnboundedSender<PresenceNotice>,
    ) -> Self {
        let (listening_tx, listening) = watch::channel(false);
        let (resyncs_tx, resyncs) = watch::channel(0u64);
        tokio::spawn(run(url, hub, presence, listening_tx, resyncs_tx));
        Self { listening, resyncs }
    }

    /// Waits until the listener listens, at most `within`; whether it does.
    pub async fn ready(&self, within: Duration) -> bool {
        let mut listening = self.listening.clone();
        matches!(
            tokio::time::timeout(within, listening.wait_for(|l| *l)).await,
            Ok(Ok(_))
        )
    }

    /// Moves each time the listener listens again after losing its connection: what was
    /// announced in between was not heard.
    pub fn resyncs(&self) -> watch::Receiver<u64> {
        self.resyncs.clone()
    }
}

async fn connect(url: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect(url).await?;
    listener.listen_all([CHANNEL, PRESENCE_CHANNEL]).await?;
    Ok(listener)
}

async fn run(
    url: String,
    hub: ChangeHub,
    presence: mpsc::UnboundedSender<PresenceNotice>,
    listening: watch::Sender<bool>,
    resyncs: watch::Sender<u64>,
) {
    let mut backoff = Duration::from_secs(1);
    let mut first = true;
    loop {
        let mut listener = match connect(&url).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, retry_secs = backoff.as_secs(), "live changes: cannot LISTEN; trying again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        backoff = Duration::from_secs(1);
        listening.send_replace(true);
        if !first {
            resyncs.send_modify(|n| *n += 1);
        }
        first = false;
        loop {
            match listener.try_recv().await {
                Ok(Some(notice)) if notice.channel() == PRESENCE_CHANNEL => {
                    match serde_json::from_str::<PresenceNotice>(notice.payload()) {
                        Ok(p) if p.origin != hub.origin() => {
                            let _ = presence.send(p);
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "live presence: unreadable notice ignored")
                        }
                    }
                }
                Ok(Some(notice)) => match serde_json::from_str::<Change>(notice.payload()) {
                    Ok(change) if change.origin != hub.origin() => hub.publish(change),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "live changes: unreadable notice ignored"),
                },
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "live changes: LISTEN connection failed");
                    break;
                }
            }
        }
        listening.send_replace(false);
        tracing::warn!("live changes: LISTEN connection lost; connecting again");
    }
}
