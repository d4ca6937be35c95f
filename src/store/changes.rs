//! "Something happened to this incident": the change notices an incident write announces
//! (DESIGN.md §8), and the in-process hub that hands them to whoever follows an incident (the
//! live incident page of issue #55).
//!
//! A notice is collected by [`super::IncidentWrite::record_event`] for every timeline event it
//! writes. On PostgreSQL the same call sends `pg_notify('incident_changes', …)` inside the
//! write's transaction (PostgreSQL delivers it at commit; a rolled-back write announces
//! nothing), so other instances sharing the database can `LISTEN` to [`CHANNEL`]. After a
//! successful commit the write publishes its notices to this process's [`ChangeHub`]; a write
//! that fails or rolls back publishes nothing.
//!
//! The hub is a [`tokio::sync::broadcast`] channel: publishing never waits for a subscriber,
//! and a subscriber that falls more than [`CAPACITY`] notices behind is told how many it
//! missed ([`Missed`]) and reads on from the oldest kept; it can then reload what it shows (the
//! timeline's event ids are the per-incident order, so nothing is lost for good).

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::domain::IncidentId;

/// The PostgreSQL `NOTIFY` channel incident writes announce their changes on.
pub const CHANNEL: &str = "incident_changes";

/// How many notices the hub keeps for a slow subscriber before it reports [`Missed`].
pub const CAPACITY: usize = 1024;

/// One thing that happened to an incident: the timeline event an incident write recorded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Change {
    /// The incident it happened to.
    pub incident: IncidentId,
    /// The timeline event's id: increasing, so per incident it orders the changes (a stream's
    /// `Last-Event-ID`).
    pub event_id: i64,
    /// The timeline event's kind (`evidence_added`, `resolve`, `verdict`, …).
    pub kind: String,
    /// Who did it (a user name, an integration, `prometheus`).
    pub actor: String,
    /// The [`ChangeHub::origin`] of the process that made the change: a `LISTEN`er can skip
    /// the notices of its own process, which its hub has already published.
    pub origin: String,
}

impl Change {
    /// The notice as the JSON text sent with `pg_notify` (well under PostgreSQL's 8,000-byte
    /// payload limit: ids, a kind and a user name).
    pub fn payload(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The in-process hub of change notices, one per database handle ([`super::Db`]), reached from
/// `AppState` as `state.pool.changes()`. Cheap to clone: clones share one channel.
#[derive(Debug, Clone)]
pub struct ChangeHub {
    sender: broadcast::Sender<Arc<Change>>,
    origin: Arc<str>,
}

impl Default for ChangeHub {
    fn default() -> Self {
        Self {
            sender: broadcast::Sender::new(CAPACITY),
            origin: hex::encode(rand::random::<[u8; 8]>()).into(),
        }
    }
}

impl ChangeHub {
    /// This hub's id in the notices it makes (16 random hex digits per hub, so per process).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Hands `change` to every current subscriber of its incident; without subscribers it is
    /// dropped. Called by an incident write after it commits (and, on PostgreSQL, by whoever
    /// `LISTEN`s for the notices of other instances).
    pub fn publish(&self, change: Change) {
        // An error only means nobody is subscribed right now.
        let _ = self.sender.send(Arc::new(change));
    }

    /// Follows incident `incident` from now on: the changes published after this call.
    pub fn subscribe(&self, incident: &IncidentId) -> Subscription {
        Subscription {
            incident: incident.clone(),
            receiver: self.sender.subscribe(),
        }
    }

    /// Follows every incident from now on (the incident pages' cache reads an incident's state
    /// again after each of its changes): the receiver of every notice published after this call.
    /// A receiver that falls more than [`CAPACITY`] behind gets `RecvError::Lagged`.
    pub fn subscribe_all(&self) -> broadcast::Receiver<Arc<Change>> {
        self.sender.subscribe()
    }

    /// How many subscriptions are open, over every incident.
    pub fn subscribers(&self) -> usize {
        self.sender.receiver_count()
    }
}

/// A subscriber fell behind: this many notices (of any incident) were dropped before it read
/// them. What it shows may be stale; reload it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} change notices were missed")]
pub struct Missed(pub u64);

/// The changes of one incident, as [`ChangeHub::subscribe`] hands them out.
#[derive(Debug)]
pub struct Subscription {
    incident: IncidentId,
    receiver: broadcast::Receiver<Arc<Change>>,
}

impl Subscription {
    /// The next change of the incident; `None` when the hub is gone (the app shuts down).
    ///
    /// # Errors
    /// [`Missed`] when this subscriber fell more than [`CAPACITY`] notices behind; the next
    /// call reads on.
    pub async fn next(&mut self) -> Result<Option<Arc<Change>>, Missed> {
        loop {
            match self.receiver.recv().await {
                Ok(c) if c.incident == self.incident => return Ok(Some(c)),
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => return Err(Missed(n)),
                Err(broadcast::error::RecvError::Closed) => return Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(incident: &IncidentId, event_id: i64) -> Change {
        Change {
            incident: incident.clone(),
            event_id,
            kind: "evidence_added".into(),
            actor: "bob".into(),
            origin: "test".into(),
        }
    }

    #[tokio::test]
    async fn a_subscriber_gets_the_changes_of_its_incident_only_in_order() {
        let hub = ChangeHub::default();
        let (a, b) = (IncidentId::new(2026, 1), IncidentId::new(2026, 2));
        let mut sub = hub.subscribe(&a);
        hub.publish(change(&b, 1));
        hub.publish(change(&a, 2));
        hub.publish(change(&a, 3));
        assert_eq!(sub.next().await.unwrap().unwrap().event_id, 2);
        assert_eq!(sub.next().await.unwrap().unwrap().event_id, 3);
        assert_eq!(hub.subscribers(), 1);
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_told_how_many_it_missed() {
        let hub = ChangeHub::default();
        let a = IncidentId::new(2026, 1);
        let mut sub = hub.subscribe(&a);
        for i in 0..(CAPACITY as i64 + 5) {
            hub.publish(change(&a, i));
        }
        assert_eq!(sub.next().await, Err(Missed(5)));
        assert_eq!(sub.next().await.unwrap().unwrap().event_id, 5);
    }

    #[test]
    fn the_notice_payload_reads_back() {
        let c = change(&IncidentId::new(2026, 7), 42);
        let back: Change = serde_json::from_str(&c.payload()).unwrap();
        assert_eq!(back, c);
    }
}
