//! Who has an incident open right now on this instance, and how many live streams each user
//! holds: the presence shown in the incident page's header and the per-user stream limit of
//! `GET /incidents/{id}/events` (issue #55).
//!
//! A stream takes a [`Seat`] when it opens and gives it back when it ends (on drop): the seat
//! counts the user's streams (several tabs are several streams), and the incident's room
//! publishes its viewers' names, sorted, on a [`tokio::sync::watch`] channel whenever that set
//! of names changes (a second tab of the same person changes nothing). On PostgreSQL the names
//! also include the viewers other instances announce ([`Viewers::heard`]), kept for
//! [`REMOTE_KEPT`] after their last announcement, and this instance's own changes are handed to
//! the announcer ([`Viewers::announce_with`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use crate::store::listen::{PRESENCE_REFRESH, PresenceNotice};

use crate::domain::IncidentId;
use crate::error::AppError;
use crate::store::users::User;

/// The names of the people who have one incident open, sorted, each once.
pub type Present = Arc<Vec<String>>;

/// How long another instance's viewers are shown after its last announcement.
pub const REMOTE_KEPT: Duration = Duration::from_secs(3 * PRESENCE_REFRESH.as_secs());

/// The viewers of every incident on this instance and the streams of every user (in
/// [`super::Live`]).
#[derive(Debug, Default)]
pub struct Viewers {
    inner: Mutex<Inner>,
    /// Where this instance's changed viewer lists go (PostgreSQL: to the other instances).
    announcer: OnceLock<mpsc::UnboundedSender<(IncidentId, Vec<String>)>>,
}

/// Other instances' viewers of one incident: names and when heard, per instance.
type Remote = HashMap<String, (Vec<String>, Instant)>;

#[derive(Debug, Default)]
struct Inner {
    rooms: HashMap<IncidentId, Room>,
    /// Open streams per user id.
    per_user: HashMap<i64, usize>,
    /// Viewers on other instances, per incident.
    remote: HashMap<IncidentId, Remote>,
}

#[derive(Debug)]
struct Room {
    /// Open streams per viewer name.
    names: BTreeMap<String, usize>,
    present: watch::Sender<Present>,
}

impl Room {
    fn local(&self) -> Vec<String> {
        self.names.keys().cloned().collect()
    }

    fn publish(&self, remote: Option<&Remote>) {
        let mut all: BTreeSet<&String> = self.names.keys().collect();
        for (names, heard) in remote.into_iter().flat_map(HashMap::values) {
            if heard.elapsed() < REMOTE_KEPT {
                all.extend(names);
            }
        }
        let names: Vec<String> = all.into_iter().cloned().collect();
        self.present.send_if_modified(|now| {
            let changed = **now != names;
            if changed {
                *now = Arc::new(names);
            }
            changed
        });
    }
}

impl Viewers {
    /// Opens a stream of `user` on `incident`: a seat, or [`AppError::TooManyRequests`] when
    /// the user already holds `per_user` streams (on this instance).
    ///
    /// # Errors
    /// [`AppError::TooManyRequests`] over the limit (`Retry-After` 30 s: a closed tab frees its
    /// stream within a heartbeat).
    pub fn join(
        self: &Arc<Self>,
        incident: &IncidentId,
        user: &User,
        per_user: usize,
    ) -> Result<Seat, AppError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let held = inner.per_user.get(&user.id).copied().unwrap_or(0);
        if held >= per_user {
            return Err(AppError::TooManyRequests {
                what: format!(
                    "live incident streams for {} (at most {per_user} open at once)",
                    user.name
                ),
                retry_after_secs: 30,
            });
        }
        inner.per_user.insert(user.id, held + 1);
        let Inner { rooms, remote, .. } = &mut *inner;
        let room = rooms.entry(incident.clone()).or_insert_with(|| Room {
            names: BTreeMap::new(),
            present: watch::Sender::new(Arc::new(Vec::new())),
        });
        let count = room.names.entry(user.name.clone()).or_insert(0);
        *count += 1;
        if *count == 1 {
            self.announce(incident, room.local());
        }
        room.publish(remote.get(incident));
        let present = room.present.subscribe();
        Ok(Seat {
            viewers: Arc::clone(self),
            incident: incident.clone(),
            user_id: user.id,
            name: user.name.clone(),
            present,
        })
    }

    /// The people who have `incident` open on this instance, sorted.
    pub fn present(&self, incident: &IncidentId) -> Vec<String> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .rooms
            .get(incident)
            .map(Room::local)
            .unwrap_or_default()
    }

    /// Hands every change of this instance's viewer lists to `announcer` from now on (set once).
    pub fn announce_with(&self, announcer: mpsc::UnboundedSender<(IncidentId, Vec<String>)>) {
        let _ = self.announcer.set(announcer);
    }

    fn announce(&self, incident: &IncidentId, names: Vec<String>) {
        if let Some(a) = self.announcer.get() {
            let _ = a.send((incident.clone(), names));
        }
    }

    /// This instance's viewers of every incident it has open, for the periodic announcement.
    pub fn local(&self) -> Vec<(IncidentId, Vec<String>)> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner
            .rooms
            .iter()
            .map(|(id, r)| (id.clone(), r.local()))
            .filter(|(_, names)| !names.is_empty())
            .collect()
    }

    /// Another instance announced its viewers of an incident: the pages here list them too.
    pub fn heard(&self, notice: PresenceNotice) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Inner { rooms, remote, .. } = &mut *inner;
        let of = remote.entry(notice.incident.clone()).or_default();
        if notice.names.is_empty() {
            of.remove(&notice.origin);
        } else {
            of.insert(notice.origin, (notice.names, Instant::now()));
        }
        if let Some(room) = rooms.get(&notice.incident) {
            room.publish(remote.get(&notice.incident));
        }
        Self::forget_old(remote);
    }

    /// Forgets other instances' viewers not announced again within [`REMOTE_KEPT`] and lists
    /// every page's viewers without them.
    pub fn expire(&self) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Inner { rooms, remote, .. } = &mut *inner;
        Self::forget_old(remote);
        for (id, room) in rooms.iter() {
            room.publish(remote.get(id));
        }
    }

    fn forget_old(remote: &mut HashMap<IncidentId, Remote>) {
        remote.retain(|_, of| {
            of.retain(|_, (_, heard)| heard.elapsed() < REMOTE_KEPT);
            !of.is_empty()
        });
    }

    /// Open streams over every incident.
    pub fn streams(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.per_user.values().sum()
    }

    fn leave(&self, incident: &IncidentId, user_id: i64, name: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = inner.per_user.get_mut(&user_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                inner.per_user.remove(&user_id);
            }
        }
        let Inner { rooms, remote, .. } = &mut *inner;
        let Some(room) = rooms.get_mut(incident) else {
            return;
        };
        if let Some(n) = room.names.get_mut(name) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                room.names.remove(name);
                self.announce(incident, room.local());
            }
        }
        room.publish(remote.get(incident));
        if room.names.is_empty() {
            rooms.remove(incident);
        }
    }
}

/// One open stream: its place among the incident's viewers and in its user's count, given back
/// when dropped.
#[derive(Debug)]
pub struct Seat {
    viewers: Arc<Viewers>,
    incident: IncidentId,
    user_id: i64,
    name: String,
    /// The incident's viewers, as they change.
    pub present: watch::Receiver<Present>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.viewers.leave(&self.incident, self.user_id, &self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Role;

    fn user(id: i64, name: &str) -> User {
        User {
            id,
            name: name.into(),
            role: Role::Responder,
            time_zone: None,
            generation: 0,
        }
    }

    #[test]
    fn viewers_are_listed_once_each_and_leave_when_their_last_stream_ends() {
        let viewers = Arc::new(Viewers::default());
        let inc = IncidentId::new(2026, 3);
        let (ada, bob) = (user(1, "ada"), user(2, "bob"));
        let a1 = viewers.join(&inc, &ada, 8).unwrap();
        let a2 = viewers.join(&inc, &ada, 8).unwrap();
        let b = viewers.join(&inc, &bob, 8).unwrap();
        assert_eq!(viewers.present(&inc), ["ada", "bob"]);
        assert_eq!(**a1.present.borrow(), ["ada", "bob"]);
        drop(a1);
        assert_eq!(
            viewers.present(&inc),
            ["ada", "bob"],
            "ada's second tab is open"
        );
        drop(b);
        assert_eq!(**a2.present.borrow(), ["ada"]);
        drop(a2);
        assert!(viewers.present(&inc).is_empty());
        assert_eq!(viewers.streams(), 0);
    }

    #[test]
    fn other_instances_viewers_are_listed_until_they_leave_and_changes_here_are_announced() {
        let viewers = Arc::new(Viewers::default());
        let (tx, mut announced) = mpsc::unbounded_channel();
        viewers.announce_with(tx);
        let inc = IncidentId::new(2026, 9);
        let ada = viewers.join(&inc, &user(1, "ada"), 8).unwrap();
        assert_eq!(
            announced.try_recv().unwrap(),
            (inc.clone(), vec!["ada".to_string()])
        );
        let notice = |names: &[&str]| PresenceNotice {
            incident: inc.clone(),
            origin: "instance-b".into(),
            names: names.iter().map(|n| n.to_string()).collect(),
            ask: false,
        };
        viewers.heard(notice(&["bob", "ada"]));
        assert_eq!(**ada.present.borrow(), ["ada", "bob"], "each name once");
        viewers.heard(notice(&[]));
        assert_eq!(**ada.present.borrow(), ["ada"]);
        drop(ada);
        assert_eq!(
            announced.try_recv().unwrap(),
            (inc, Vec::new()),
            "the last one left"
        );
    }

    #[test]
    fn a_user_over_the_stream_limit_is_refused_until_one_closes() {
        let viewers = Arc::new(Viewers::default());
        let (one, two) = (IncidentId::new(2026, 1), IncidentId::new(2026, 2));
        let ada = user(1, "ada");
        let first = viewers.join(&one, &ada, 2).unwrap();
        let _second = viewers.join(&two, &ada, 2).unwrap();
        let refused = viewers.join(&one, &ada, 2).unwrap_err();
        assert!(
            matches!(refused, AppError::TooManyRequests { .. }),
            "{refused}"
        );
        assert!(
            viewers.join(&one, &user(2, "bob"), 2).is_ok(),
            "another user is not counted"
        );
        drop(first);
        assert!(viewers.join(&one, &ada, 2).is_ok());
    }
}
