//! How busy the doors are with writes, for background work that should yield to them.
//!
//! [`Foreground`] counts write requests in flight (every method but `GET`, `HEAD` and
//! `OPTIONS`: webhooks, forms, pastes, Learn) and when the last one ended. A background worker
//! that is about to do a burst of work nobody waits on (the chat outbox composing and posting
//! messages) first waits for a quiet moment ([`Foreground::yield_to_writes`]), for a bounded
//! time, so an alert storm's webhooks are not slowed by the messages about it (issue #50: on
//! two cores, composing first reads beside the storm raised the webhook's p99 by about half).
//! Reads are not counted: a page kept open by a dozen people, or a live stream that stays open
//! for hours, must not hold the chat back.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Write requests in flight, and when the last one ended.
#[derive(Debug)]
pub struct Foreground {
    /// The clock's origin: instants are kept as nanoseconds since it.
    origin: Instant,
    in_flight: AtomicUsize,
    /// Nanoseconds after `origin` when the last write request ended (0: none yet).
    last_end: AtomicU64,
}

impl Default for Foreground {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_end: AtomicU64::new(0),
        }
    }
}

/// One write request in flight; counted until dropped (answered, or cancelled).
#[derive(Debug)]
pub struct InFlight<'a>(&'a Foreground);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let f = self.0;
        f.last_end.store(f.nanos(), Ordering::Relaxed);
        f.in_flight.fetch_sub(1, Ordering::Release);
    }
}

impl Foreground {
    /// Counts a write request until the returned guard is dropped.
    pub fn enter(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Acquire);
        InFlight(self)
    }

    /// Whether no write request is in flight and none ended within `quiet`.
    pub fn is_quiet(&self, quiet: Duration) -> bool {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return false;
        }
        let last = self.last_end.load(Ordering::Relaxed);
        last == 0 || self.nanos().saturating_sub(last) >= quiet.as_nanos() as u64
    }

    /// Waits until [`Self::is_quiet`] for `quiet`, looking every `quiet / 4` (at least 1 ms),
    /// but at most `max`. Returns how long it waited.
    pub async fn yield_to_writes(&self, quiet: Duration, max: Duration) -> Duration {
        let started = tokio::time::Instant::now();
        let step = (quiet / 4).max(Duration::from_millis(1));
        while !self.is_quiet(quiet) && started.elapsed() < max {
            tokio::time::sleep(step).await;
        }
        started.elapsed()
    }

    fn nanos(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn background_work_waits_for_a_quiet_moment_and_no_longer_than_its_bound() {
        let f = Foreground::default();
        assert!(f.is_quiet(Duration::from_millis(20)), "nothing ran yet");
        let waited = f
            .yield_to_writes(Duration::from_millis(20), Duration::from_secs(5))
            .await;
        assert!(
            waited < Duration::from_millis(5),
            "quiet: no wait ({waited:?})"
        );
        let held = f.enter();
        assert!(!f.is_quiet(Duration::ZERO), "a write in flight");
        let waited = f
            .yield_to_writes(Duration::from_millis(20), Duration::from_millis(80))
            .await;
        assert!(
            waited >= Duration::from_millis(80),
            "bounded wait ran out: {waited:?}"
        );
        drop(held);
        assert!(!f.is_quiet(Duration::from_secs(60)), "one just ended");
        let waited = f
            .yield_to_writes(Duration::from_millis(30), Duration::from_secs(5))
            .await;
        assert!(
            waited >= Duration::from_millis(20) && waited < Duration::from_secs(2),
            "waited for the quiet, not the bound: {waited:?}"
        );
        assert!(f.is_quiet(Duration::from_millis(30)));
    }
}
