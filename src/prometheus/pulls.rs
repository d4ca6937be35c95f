//! How the alerts' pulls share the source and the machine: at most
//! [`PrometheusConfig::pull_concurrency`](super::PrometheusConfig::pull_concurrency) queries in
//! flight at once (the rest wait their turn, first come first served), identical queries (the
//! same PromQL over the same window and step) answered by one request while it waits for its
//! turn, is in flight, or was answered less than [`COALESCE_FOR`] ago ([`SETTLED_SHARE_FOR`]
//! when the window ended [`SETTLED_AFTER`] ago or more), a failed query tried again after a
//! short backoff when the failure may pass ([`PromError::is_transient`]), and the database
//! written in turns ([`Prometheus::write_line`]): one pulled document at a time, in one line
//! with the alert deliveries of an app with this source, so a burst of alerts never puts more
//! than one pull's write in front of a webhook's own and never sends a webhook into SQLite's
//! busy wait. A bounded number of alerts wait ([`MAX_WAITING`]); past it an alert is not
//! pulled, and its incident says so.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};
use tokio::sync::Semaphore;

use super::{PromError, Prometheus, RangeResult, Window};

/// How long after it came a query's answer also answers the same query over the same window.
pub const COALESCE_FOR: Duration = Duration::from_secs(2);
/// A window that ended at least this long ago is settled: its samples are in (scrapes and
/// rule evaluations run every 15 s to 1 min), so its answer no longer changes.
pub const SETTLED_AFTER: Duration = Duration::from_secs(5 * 60);
/// How long after it came the answer over a settled window also answers the same query; the
/// alerts of one rule that ended together (a group resolved at once, delivered in several
/// webhooks) are pulled with one request even when their turns are far apart.
pub const SETTLED_SHARE_FOR: Duration = Duration::from_secs(10 * 60);
/// Alerts waiting for their pull at most; past it an alert is not pulled.
pub const MAX_WAITING: usize = 10_000;

type Answer = Result<RangeResult, PromError>;
type Pending = Shared<BoxFuture<'static, Answer>>;

/// Longest a query stays shared while it waits or is in flight; past it (a request nobody
/// awaits any more, or one stuck past every timeout) the next alert asks again.
const SHARED_AT_MOST: Duration = Duration::from_secs(300);

/// A query asked recently: its shared answer, when it was asked and answered, and how long
/// its answer is shared after that.
struct Recent {
    end: i64,
    asked: Instant,
    answered: Arc<OnceLock<Instant>>,
    shared_for: Duration,
    pending: Pending,
}

impl Recent {
    /// Whether this answer serves a window ending at `end` (Unix seconds): the same end, or one
    /// up to [`COALESCE_FOR`] later. A firing alert's window ends now, so alerts of one rule
    /// pulled a second apart differ by that second; the answer misses at most that much.
    fn covers(&self, end: i64) -> bool {
        let slack = i64::try_from(COALESCE_FOR.as_secs()).unwrap_or(i64::MAX);
        end >= self.end && end - self.end <= slack
    }

    /// Whether a query asked now may share this answer: it is still coming, or came less than
    /// `shared_for` ago.
    fn fresh(&self, now: Instant) -> bool {
        match self.answered.get() {
            Some(at) => now.duration_since(*at) < self.shared_for,
            None => now.duration_since(self.asked) < SHARED_AT_MOST,
        }
    }
}

/// How long the answer over `window` is shared after it came: [`SETTLED_SHARE_FOR`] when the
/// window ended [`SETTLED_AFTER`] or longer before `now`, else [`COALESCE_FOR`].
fn share_for(window: &Window, now: jiff::Timestamp) -> Duration {
    let settled = now
        .checked_sub(SETTLED_AFTER)
        .is_ok_and(|line| window.end <= line);
    if settled {
        SETTLED_SHARE_FOR
    } else {
        COALESCE_FOR
    }
}

/// A query over a window from its start at its step, to the second; the window's end is matched
/// apart ([`Recent::covers`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    query: String,
    start: i64,
    step: i64,
}

impl Key {
    fn of(query: &str, window: &Window) -> Self {
        Self {
            query: query.to_string(),
            start: window.start.as_second(),
            step: window.step_secs,
        }
    }
}

/// The pulls' shared state, in [`Prometheus`].
pub(super) struct Pulls {
    queries: Semaphore,
    writes: Semaphore,
    waiting: AtomicUsize,
    recent: Mutex<HashMap<Key, Recent>>,
}

impl Pulls {
    /// `concurrency` queries at once (at least one).
    pub(super) fn new(concurrency: usize) -> Self {
        Self {
            queries: Semaphore::new(concurrency.max(1)),
            writes: Semaphore::new(1),
            waiting: AtomicUsize::new(0),
            recent: Mutex::default(),
        }
    }
}

/// The places of a delivery's alerts among those waiting for their pull; left when dropped.
#[derive(Debug)]
pub struct Waiting {
    source: Arc<Prometheus>,
    alerts: usize,
}

impl Waiting {
    /// The source the alerts wait for.
    pub fn source(&self) -> &Arc<Prometheus> {
        &self.source
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.source
            .pulls
            .waiting
            .fetch_sub(self.alerts, Ordering::AcqRel);
    }
}

impl Prometheus {
    /// Puts `alerts` alerts in line for their pull; `None` when that would make more than
    /// [`MAX_WAITING`] wait.
    pub fn wait_in_line(self: &Arc<Self>, alerts: usize) -> Option<Waiting> {
        let count = &self.pulls.waiting;
        let mut now = count.load(Ordering::Acquire);
        loop {
            if now + alerts > MAX_WAITING {
                return None;
            }
            match count.compare_exchange_weak(
                now,
                now + alerts,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Some(Waiting {
                        source: Arc::clone(self),
                        alerts,
                    });
                }
                Err(seen) => now = seen,
            }
        }
    }

    /// Alerts waiting for their pull or being pulled now.
    pub fn waiting(&self) -> usize {
        self.pulls.waiting.load(Ordering::Acquire)
    }

    /// The line to write to the database in: a fair semaphore of one permit, taken right
    /// before a write transaction and held until it ends.
    ///
    /// Each pulled document's write and note takes it, and so does each alert group a delivery
    /// writes ([`crate::services::ingest::ingest`]): one holder at a time in arrival order.
    /// Without it a delivery whose `BEGIN IMMEDIATE` meets a pulled document's write sleeps in
    /// SQLite's busy handler (1, 2, 5, 10, 15 … ms between tries: the
    /// `sqliteDefaultBusyCallback` schedule behind `sqlite3_busy_timeout`) and may lose the lock
    /// again to the next writer while it sleeps; in line it waits for one transaction at most.
    /// Only transactions wait in it: reading, redacting and extracting happen outside.
    /// `prometheus-bench` measures it: the webhook's p99 with the source on ÷ off
    /// (docs/benchmarks.md).
    pub fn write_line(&self) -> &Semaphore {
        &self.pulls.writes
    }

    /// An alert's query: [`Prometheus::query_range`] within the concurrency limit, shared with
    /// the same query over the same window that is waiting, in flight or answered less than
    /// [`COALESCE_FOR`] ago, and tried again up to
    /// [`PrometheusConfig::retries`](super::PrometheusConfig::retries) times after a transient
    /// failure, waiting [`PrometheusConfig::retry_backoff`](super::PrometheusConfig::retry_backoff)
    /// and then twice as long each time. Returns the last answer and how many requests it took.
    pub async fn pull(self: &Arc<Self>, query: &str, window: &Window) -> (Answer, u32) {
        let key = Key::of(query, window);
        let mut backoff = self.config.retry_backoff;
        let mut attempt = 0u32;
        loop {
            match self.shared(&key, window).await {
                Err(e) if e.is_transient() && attempt < self.config.retries => {
                    self.forget(&key);
                    attempt += 1;
                    tracing::debug!(attempt, error = %e, "a Prometheus query is tried again");
                    tokio::time::sleep(backoff).await;
                    backoff = backoff.saturating_mul(2);
                }
                other => return (other, attempt + 1),
            }
        }
    }

    /// The answer of the request for `key` that is waiting for its turn, in flight, or answered
    /// less than [`COALESCE_FOR`] ago ([`SETTLED_SHARE_FOR`] over a settled window); else of a new one, which takes its turn among the
    /// [`PrometheusConfig::pull_concurrency`](super::PrometheusConfig::pull_concurrency) queries
    /// in flight. Joining an identical query takes no turn of its own.
    async fn shared(self: &Arc<Self>, key: &Key, window: &Window) -> Answer {
        let pending = {
            let Ok(mut recent) = self.pulls.recent.lock() else {
                let _turn = self.pulls.queries.acquire().await.ok();
                return self.query_range(&key.query, window).await;
            };
            let now = Instant::now();
            recent.retain(|_, entry| entry.fresh(now));
            let end = window.end.as_second();
            match recent.get(key).filter(|entry| entry.covers(end)) {
                Some(entry) => entry.pending.clone(),
                None => {
                    let answered = Arc::new(OnceLock::new());
                    // Weak: the stored answer must not keep the source alive.
                    let this = Arc::downgrade(self);
                    let (query, window, done) = (key.query.clone(), *window, Arc::clone(&answered));
                    let p = async move {
                        let answer = match this.upgrade() {
                            Some(this) => {
                                let _turn = this.pulls.queries.acquire().await.ok();
                                this.query_range(&query, &window).await
                            }
                            None => Err(PromError::Unreachable("the source was closed".into())),
                        };
                        let _ = done.set(Instant::now());
                        answer
                    }
                    .boxed()
                    .shared();
                    recent.insert(
                        key.clone(),
                        Recent {
                            end,
                            asked: now,
                            answered,
                            shared_for: share_for(&window, jiff::Timestamp::now()),
                            pending: p.clone(),
                        },
                    );
                    p
                }
            }
        };
        pending.await
    }

    /// Drops the shared answer of `key`, so the next attempt asks Prometheus again.
    fn forget(&self, key: &Key) {
        if let Ok(mut recent) = self.pulls.recent.lock() {
            recent.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_window_that_ended_five_minutes_ago_or_more_is_shared_for_long() {
        let now: jiff::Timestamp = "2026-12-04T12:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let window = |end: &str| Window::fit(at("2026-12-04T11:00:00Z"), at(end), 100);
        assert_eq!(
            share_for(&window("2026-12-04T11:55:00Z"), now),
            SETTLED_SHARE_FOR
        );
        assert_eq!(
            share_for(&window("2026-12-04T11:10:00Z"), now),
            SETTLED_SHARE_FOR
        );
        assert_eq!(
            share_for(&window("2026-12-04T11:55:01Z"), now),
            COALESCE_FOR
        );
        assert_eq!(
            share_for(&window("2026-12-04T12:00:00Z"), now),
            COALESCE_FOR
        );
    }

    #[test]
    fn an_answer_is_shared_while_it_comes_and_for_its_span_after() {
        let p: Pending = async { Err(PromError::Unreachable("x".into())) }
            .boxed()
            .shared();
        let asked = Instant::now();
        let recent = Recent {
            end: 1_000,
            asked,
            answered: Arc::new(OnceLock::new()),
            shared_for: COALESCE_FOR,
            pending: p,
        };
        assert!(
            recent.fresh(asked + Duration::from_secs(60)),
            "still coming"
        );
        assert!(
            !recent.fresh(asked + SHARED_AT_MOST),
            "stuck past every timeout"
        );
        let _ = recent.answered.set(asked + Duration::from_secs(10));
        assert!(recent.fresh(asked + Duration::from_secs(11)));
        assert!(!recent.fresh(asked + Duration::from_secs(12)));
        assert!(recent.covers(1_000) && recent.covers(1_002));
        assert!(!recent.covers(1_003), "three seconds more than it answered");
        assert!(!recent.covers(999), "an earlier end is another window");
    }
}
