//! How the alerts' pulls share the source and the machine: at most
//! [`PrometheusConfig::pull_concurrency`](super::PrometheusConfig::pull_concurrency) queries in
//! flight at once (the rest wait their turn, first come first served), identical queries (the
//! same PromQL over the same window and step) started within [`COALESCE_FOR`] of each other
//! answered by one request, a failed query tried again after a short backoff when the failure
//! may pass ([`PromError::is_transient`]), and the pulled documents stored one at a time
//! ([`Prometheus::store_turn`]), so a burst of alerts never puts more than one pull's write in
//! front of the webhook's own. A bounded number of alerts wait ([`MAX_WAITING`]); past it an
//! alert is not pulled, and its incident says so.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::{PromError, Prometheus, RangeResult, Window};

/// How long a query's answer also answers the same query over the same window started after it.
pub const COALESCE_FOR: Duration = Duration::from_secs(2);
/// Alerts waiting for their pull at most; past it an alert is not pulled.
pub const MAX_WAITING: usize = 10_000;

type Answer = Result<RangeResult, PromError>;
type Pending = Shared<BoxFuture<'static, Answer>>;

/// A query over a window, to the second.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    query: String,
    start: i64,
    end: i64,
    step: i64,
}

impl Key {
    fn of(query: &str, window: &Window) -> Self {
        Self {
            query: query.to_string(),
            start: window.start.as_second(),
            end: window.end.as_second(),
            step: window.step_secs,
        }
    }
}

/// The pulls' shared state, in [`Prometheus`].
pub(super) struct Pulls {
    queries: Semaphore,
    store: Semaphore,
    waiting: AtomicUsize,
    recent: Mutex<HashMap<Key, (Instant, Pending)>>,
}

impl Pulls {
    /// `concurrency` queries at once (at least one).
    pub(super) fn new(concurrency: usize) -> Self {
        Self {
            queries: Semaphore::new(concurrency.max(1)),
            store: Semaphore::new(1),
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

    /// Waits for the turn to store a pulled document (one at a time); the turn ends when the
    /// permit is dropped. `None` only if the source is shutting down.
    pub async fn store_turn(&self) -> Option<SemaphorePermit<'_>> {
        self.pulls.store.acquire().await.ok()
    }

    /// An alert's query: [`Prometheus::query_range`] within the concurrency limit, shared with
    /// the same query over the same window started within [`COALESCE_FOR`], and tried again up
    /// to [`PrometheusConfig::retries`](super::PrometheusConfig::retries) times after a transient
    /// failure, waiting [`PrometheusConfig::retry_backoff`](super::PrometheusConfig::retry_backoff)
    /// and then twice as long each time. Returns the last answer and how many requests it took.
    pub async fn pull(self: &Arc<Self>, query: &str, window: &Window) -> (Answer, u32) {
        let key = Key::of(query, window);
        let mut backoff = self.config.retry_backoff;
        let mut attempt = 0u32;
        loop {
            let answer = {
                let _turn = self.pulls.queries.acquire().await.ok();
                self.shared(&key, window).await
            };
            match answer {
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

    /// The answer of the request for `key` started within [`COALESCE_FOR`], or of a new one.
    async fn shared(self: &Arc<Self>, key: &Key, window: &Window) -> Answer {
        let pending = {
            let Ok(mut recent) = self.pulls.recent.lock() else {
                return self.query_range(&key.query, window).await;
            };
            let now = Instant::now();
            recent.retain(|_, (at, _)| now.duration_since(*at) < COALESCE_FOR);
            match recent.get(key) {
                Some((_, p)) => p.clone(),
                None => {
                    // Weak: the stored answer must not keep the source alive.
                    let this = Arc::downgrade(self);
                    let (query, window) = (key.query.clone(), *window);
                    let p = async move {
                        match this.upgrade() {
                            Some(this) => this.query_range(&query, &window).await,
                            None => Err(PromError::Unreachable("the source was closed".into())),
                        }
                    }
                    .boxed()
                    .shared();
                    recent.insert(key.clone(), (now, p.clone()));
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
