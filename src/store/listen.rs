//! The other instances' incident changes: a `LISTEN` on PostgreSQL's
//! [`super::changes::CHANNEL`] that hands every notice another instance's incident write sent
//! (`pg_notify` inside its transaction, delivered at its commit) to this process's
//! [`ChangeHub`], so a live page on instance A sees a change made on instance B (issue #55).
//! This process's own notices are skipped: its writes publish them to the hub themselves.
//!
//! One dedicated connection (sqlx's [`PgListener`]), started by the first live stream. When it
//! is lost, notices sent before it is back are lost with it: the listener connects again (1 s,
//! doubling to 30 s) and, once it listens again, moves [`Listener::resyncs`] so every stream
//! reads what it may have missed from the timeline.

use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::watch;

use super::changes::{CHANNEL, Change, ChangeHub};

/// A running listener: whether it listens now, and how many times it came back.
#[derive(Debug)]
pub struct Listener {
    listening: watch::Receiver<bool>,
    resyncs: watch::Receiver<u64>,
}

impl Listener {
    /// Starts listening on the PostgreSQL database at `url` and hands other instances' notices
    /// to `hub`, in a task that runs until `hub`'s process ends (the runtime stops).
    pub fn spawn(url: String, hub: ChangeHub) -> Self {
        let (listening_tx, listening) = watch::channel(false);
        let (resyncs_tx, resyncs) = watch::channel(0u64);
        tokio::spawn(run(url, hub, listening_tx, resyncs_tx));
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
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

async fn run(
    url: String,
    hub: ChangeHub,
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
