//! The live incident page (issue #55): `GET /incidents/{id}/events`, a server-sent event
//! stream of the incident's changes, and what a page needs to follow it (the panels it
//! re-renders: [`panels`]; who has the incident open: [`viewers`]).
//!
//! One event per timeline event, its SSE `id` the timeline event's id (increasing, so per
//! incident it orders the changes): a reconnect sends `Last-Event-ID` (the WHATWG HTML
//! server-sent events spec, §9.2) and the stream first replays from the database what was
//! recorded after it, then follows the change notices of incident writes
//! ([`crate::store::changes::ChangeHub`]: published after commit on this instance, and fed from
//! PostgreSQL's `NOTIFY` for the writes of other instances). A page's first connection sends
//! `?after=` with the newest event the page showed, so a change made while it loaded is not
//! missed either.
//!
//! Around the events: a `presence` event with the names of the people who have the incident
//! open (on connect and whenever they change), heartbeat comments every
//! [`LiveSettings::heartbeat`] so proxies keep the connection open, an idle limit
//! ([`LiveSettings::idle_limit`]: the stream ends after that long without a change and the
//! browser reconnects, re-authenticating, from where it was), and a per-user limit of open
//! streams ([`LiveSettings::streams_per_user`], 429 above it).

pub mod panels;
pub mod viewers;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::auth::{AuthRejection, CurrentUser};
use super::errors::ApiError;
use super::{AppState, incident_id};
use crate::domain::{IncidentId, TimelineEvent};
use crate::error::AppError;
use crate::store::Db;
use crate::store::changes::{Change, Subscription};
use crate::store::listen::{Listener, PRESENCE_REFRESH, PresenceNotice, announce_presence};
use viewers::{Seat, Viewers};

/// Limits and timings of the live streams.
#[derive(Debug, Clone)]
pub struct LiveSettings {
    /// Open streams one user may hold on one instance (tabs, windows); a 429 above it.
    pub streams_per_user: usize,
    /// A stream that delivered no change for this long ends; the browser reconnects (with
    /// `Last-Event-ID`, so nothing is lost) and is authenticated again.
    pub idle_limit: Duration,
    /// Heartbeat comment interval while nothing else is sent (proxies close idle connections
    /// after 30–60 s).
    pub heartbeat: Duration,
    /// How long a browser waits before reconnecting after the stream ended (SSE `retry`).
    pub retry: Duration,
}

impl Default for LiveSettings {
    fn default() -> Self {
        Self {
            streams_per_user: 8,
            idle_limit: Duration::from_secs(30 * 60),
            heartbeat: Duration::from_secs(15),
            retry: Duration::from_secs(3),
        }
    }
}

/// The live side of the app, in [`AppState`]: who is following which incident.
#[derive(Debug)]
pub struct Live {
    /// Viewers per incident and streams per user.
    pub viewers: Arc<Viewers>,
    /// Turns true when the server shuts down: every open stream ends.
    closing: tokio::sync::watch::Sender<bool>,
    /// The PostgreSQL database other instances write to, when there can be any
    /// ([`Live::follow_instances_on`]).
    shared_database: std::sync::OnceLock<String>,
    /// The `LISTEN`er feeding the hub from other instances, started by the first stream.
    listener: tokio::sync::OnceCell<Listener>,
}

impl Default for Live {
    fn default() -> Self {
        Self {
            viewers: Arc::default(),
            closing: tokio::sync::watch::Sender::new(false),
            shared_database: std::sync::OnceLock::new(),
            listener: tokio::sync::OnceCell::new(),
        }
    }
}

impl Live {
    /// Follows the changes other instances make on the PostgreSQL database at `url` too (a
    /// `LISTEN`, [`crate::store::listen`], from the first stream on). Set once by
    /// [`crate::app::App::build`]; SQLite has no other instances.
    pub fn follow_instances_on(&self, url: &str) {
        let _ = self.shared_database.set(url.to_string());
    }

    /// Starts the listener on first use (feeding `db`'s change hub, with the presence
    /// announcements: this instance's viewers sent to the others, theirs heard) and waits (at
    /// most 5 s) until it listens; its reconnection counter, or `None` on SQLite.
    async fn other_instances(&self, db: &Db) -> Option<tokio::sync::watch::Receiver<u64>> {
        let url = self.shared_database.get()?;
        let listener = self
            .listener
            .get_or_init(|| async move {
                let (heard_tx, heard) = tokio::sync::mpsc::unbounded_channel();
                let (announce_tx, announce) = tokio::sync::mpsc::unbounded_channel();
                self.viewers.announce_with(announce_tx);
                tokio::spawn(share_presence(
                    Arc::clone(&self.viewers),
                    db.pool().clone(),
                    db.changes().origin().to_string(),
                    heard,
                    announce,
                ));
                Listener::spawn(url.clone(), db.changes().clone(), heard_tx)
            })
            .await;
        if !listener.ready(Duration::from_secs(5)).await {
            tracing::warn!(
                "live stream: not listening to other instances yet; their changes show after a reconnect"
            );
        }
        Some(listener.resyncs())
    }

    /// Ends every open stream (at shutdown: a graceful shutdown waits for open responses).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }
}

#[derive(Deserialize)]
pub(super) struct EventsQuery {
    /// The newest timeline event the page showed (a first connection; a reconnect's
    /// `Last-Event-ID` wins over it).
    #[serde(default)]
    after: Option<i64>,
}

/// Shares presence with the other instances (PostgreSQL): announces this instance's viewer
/// lists when they change (asking the others to answer with theirs, so a page opened on an
/// instance that just started listening lists them at once) and every [`PRESENCE_REFRESH`],
/// and hands the others' to `viewers`.
async fn share_presence(
    viewers: Arc<Viewers>,
    pool: sqlx::AnyPool,
    origin: String,
    mut heard: tokio::sync::mpsc::UnboundedReceiver<PresenceNotice>,
    mut announce: tokio::sync::mpsc::UnboundedReceiver<(IncidentId, Vec<String>)>,
) {
    let mut refresh = tokio::time::interval(PRESENCE_REFRESH);
    loop {
        let mut notices: Vec<(IncidentId, Vec<String>, bool)> = Vec::new();
        tokio::select! {
            h = heard.recv() => match h {
                Some(n) => {
                    let (incident, ask) = (n.incident.clone(), n.ask);
                    viewers.heard(n);
                    let here = viewers.present(&incident);
                    if ask && !here.is_empty() {
                        notices.push((incident, here, false));
                    }
                }
                None => return,
            },
            a = announce.recv() => match a {
                Some((incident, names)) => notices.push((incident, names, true)),
                None => return,
            },
            _ = refresh.tick() => {
                viewers.expire();
                notices = viewers.local().into_iter().map(|(i, n)| (i, n, false)).collect();
            }
        }
        for (incident, names, ask) in notices {
            let notice = PresenceNotice {
                incident,
                origin: origin.clone(),
                names,
                ask,
            };
            if let Err(e) = announce_presence(&pool, &notice).await {
                tracing::warn!(error = %e, "live presence: announcement failed");
            }
        }
    }
}

/// Where a stream starts: the `Last-Event-ID` header (a reconnect), else `?after=`, else now.
fn resume_point(headers: &HeaderMap, after: Option<i64>) -> Result<Option<i64>, AppError> {
    let invalid = || {
        AppError::BadRequest(
            "Last-Event-ID must be the id of a timeline event (a whole number of 0 or more)".into(),
        )
    };
    match headers.get("last-event-id") {
        Some(v) => {
            let text = v.to_str().map_err(|_| invalid())?.trim();
            if text.is_empty() {
                return Ok(after.filter(|a| *a >= 0));
            }
            let id: i64 = text.parse().map_err(|_| invalid())?;
            if id < 0 {
                return Err(invalid());
            }
            Ok(Some(id))
        }
        None => match after {
            Some(a) if a < 0 => Err(AppError::BadRequest(
                "after must be the id of a timeline event (a whole number of 0 or more)".into(),
            )),
            a => Ok(a),
        },
    }
}

/// `GET /incidents/{id}/events`: the incident's changes as server-sent events (see the module
/// documentation). A session cookie or an API token, as for the page; 401 without either
/// (never the sign-in redirect: an `EventSource` cannot follow it), 404 for an unknown
/// incident, 400 for a malformed `Last-Event-ID`, 429 over the per-user limit.
pub(super) async fn events(
    State(state): State<AppState>,
    user: Result<CurrentUser, AuthRejection>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Response, ApiError> {
    let user = match user {
        Ok(CurrentUser(u)) => u,
        Err(AuthRejection::Page { .. }) => return Err(AppError::Unauthenticated.into()),
        Err(AuthRejection::Api(e) | AuthRejection::PageFailure(e)) => return Err(e.into()),
    };
    let id = incident_id(&id)?;
    let resume = resume_point(&headers, q.after)?;
    let settings = state.settings.live.clone();
    // Listening (PostgreSQL) before taking the seat: the seat's announcement then reaches the
    // other instances, who answer with their viewers.
    let resyncs = state.live.other_instances(&state.pool).await;
    let seat = state
        .live
        .viewers
        .join(&id, &user, settings.streams_per_user)?;
    // Subscribe before reading what was missed: a change committed in between is then both
    // read and announced, and the announcement is skipped (its id is not above `replayed`).
    let changes = state.pool.changes().subscribe(&id);
    let (_, missed) =
        crate::services::incidents::events_after(&state.pool, &id, resume.unwrap_or(i64::MAX))
            .await?;
    let mut follow = Follow {
        state: state.clone(),
        incident: id,
        replayed: resume.unwrap_or(0),
        queue: VecDeque::new(),
        changes,
        seat,
        idle: settings.idle_limit,
        idle_until: tokio::time::Instant::now() + settings.idle_limit,
        closing: state.live.closing.subscribe(),
        resyncs,
        ended: false,
    };
    let names = follow.seat.present.borrow_and_update().clone();
    follow
        .queue
        .push_back(presence_event(&names).retry(settings.retry));
    follow.queue_replay(missed);
    let stream = futures::stream::unfold(follow, |mut f| async move {
        let event = f.next_event().await?;
        Some((Ok::<_, Infallible>(event), f))
    });
    let keep_alive = KeepAlive::new()
        .interval(settings.heartbeat)
        .text("heartbeat");
    let mut response = Sse::new(stream).keep_alive(keep_alive).into_response();
    // Tell nginx-style proxies not to buffer the stream.
    response.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    Ok(response)
}

/// One open stream's state between events.
struct Follow {
    state: AppState,
    incident: IncidentId,
    /// The newest event id read from the database: announcements at or below it were sent.
    replayed: i64,
    queue: VecDeque<Event>,
    changes: Subscription,
    seat: Seat,
    idle: Duration,
    idle_until: tokio::time::Instant,
    closing: tokio::sync::watch::Receiver<bool>,
    /// Moves when the `LISTEN`er came back after losing its connection (PostgreSQL only).
    resyncs: Option<tokio::sync::watch::Receiver<u64>>,
    ended: bool,
}

impl Follow {
    /// Queues the events read from the database (a replay), or a `reload` event when there
    /// were more than one read returns.
    fn queue_replay(&mut self, events: Vec<TimelineEvent>) {
        let too_many =
            i64::try_from(events.len()).is_ok_and(|n| n >= crate::services::incidents::REPLAY_MAX);
        if let Some(last) = events.last() {
            self.replayed = self.replayed.max(last.id);
        }
        if too_many {
            self.queue.push_back(
                Event::default()
                    .event("reload")
                    .id(self.replayed.to_string())
                    .data("{}"),
            );
            return;
        }
        for e in events {
            self.queue.push_back(change_event(e.id, &e.kind, &e.actor));
        }
    }

    /// Reads what was recorded after the newest event sent (after a missed announcement).
    async fn replay(&mut self) {
        match crate::services::incidents::events_after(
            &self.state.pool,
            &self.incident,
            self.replayed,
        )
        .await
        {
            Ok((_, events)) => self.queue_replay(events),
            Err(e) => {
                tracing::warn!(error = %e, "live stream: replay failed; the browser reconnects");
                self.ended = true;
            }
        }
    }

    fn announce(&mut self, change: &Change) {
        if change.event_id <= self.replayed {
            return;
        }
        self.replayed = change.event_id;
        self.idle_until = tokio::time::Instant::now() + self.idle;
        self.queue
            .push_back(change_event(change.event_id, &change.kind, &change.actor));
    }

    /// The next event to send; `None` ends the stream.
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            if self.ended {
                return None;
            }
            let wake = tokio::select! {
                change = self.changes.next() => match change {
                    Ok(Some(c)) => Wake::Change(c),
                    Ok(None) => Wake::End,
                    Err(_missed) => Wake::Replay,
                },
                seen = self.seat.present.changed() => match seen {
                    Ok(()) => Wake::Presence,
                    Err(_) => Wake::End,
                },
                _ = self.closing.wait_for(|c| *c) => Wake::End,
                moved = resynced(self.resyncs.as_mut()) => match moved {
                    Ok(()) => Wake::Replay,
                    Err(_) => Wake::ListenerGone,
                },
                () = tokio::time::sleep_until(self.idle_until) => Wake::Idle,
            };
            match wake {
                Wake::Change(c) => self.announce(&c),
                Wake::Replay => self.replay().await,
                Wake::Presence => {
                    let names = self.seat.present.borrow_and_update().clone();
                    self.queue.push_back(presence_event(&names));
                }
                Wake::ListenerGone => self.resyncs = None,
                Wake::Idle => {
                    self.queue
                        .push_back(Event::default().comment("idle limit reached: reconnect"));
                    self.ended = true;
                }
                Wake::End => self.ended = true,
            }
        }
    }
}

/// What woke a waiting stream.
enum Wake {
    /// An incident write announced a change.
    Change(Arc<Change>),
    /// Announcements may have been missed: read the timeline.
    Replay,
    /// The incident's viewers changed.
    Presence,
    /// The listener is gone for good (its task ended).
    ListenerGone,
    /// Nothing happened for the idle limit.
    Idle,
    /// The hub is gone or the server shuts down.
    End,
}

/// Resolves when the listener came back (`Err` when it is gone); never without one.
async fn resynced(
    resyncs: Option<&mut tokio::sync::watch::Receiver<u64>>,
) -> Result<(), tokio::sync::watch::error::RecvError> {
    match resyncs {
        Some(r) => r.changed().await,
        None => std::future::pending().await,
    }
}

/// The `change` event of timeline event `id`: its kind, who did it, what the quiet line says
/// and which panels to re-render.
fn change_event(id: i64, kind: &str, actor: &str) -> Event {
    let (what, panels) = panels::change_of(kind);
    let data = serde_json::json!({
        "id": id,
        "kind": kind,
        "actor": actor,
        "what": what,
        "panels": panels.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
    });
    Event::default()
        .event("change")
        .id(id.to_string())
        .data(data.to_string())
}

/// The `presence` event: who has the incident open (no `id`, so it moves no `Last-Event-ID`).
fn presence_event(names: &[String]) -> Event {
    Event::default()
        .event("presence")
        .data(serde_json::json!({ "here": names }).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(last: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(v) = last {
            h.insert("last-event-id", v.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_reconnect_resumes_after_its_last_event_id_before_the_page_s_first_point() {
        assert_eq!(resume_point(&with(Some("42")), Some(7)).unwrap(), Some(42));
        assert_eq!(resume_point(&with(None), Some(7)).unwrap(), Some(7));
        assert_eq!(resume_point(&with(Some("")), Some(7)).unwrap(), Some(7));
        assert_eq!(resume_point(&with(None), None).unwrap(), None);
        for bad in ["-1", "seven", "1.5"] {
            let e = resume_point(&with(Some(bad)), None).unwrap_err();
            assert!(e.to_string().contains("Last-Event-ID"), "{bad}: {e}");
        }
        assert!(resume_point(&with(None), Some(-3)).is_err());
    }
}
