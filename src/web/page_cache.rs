//! The incident pages as last rendered ([`RenderedPages`], held in [`super::AppState`]).

use axum::http::StatusCode;

/// Incident pages as last rendered, most recently viewed kept, by a key that names everything
/// the page shows: the incident's version and revision and the memory's recall generation
/// ([`crate::services::incidents::page_state`]), the viewer's name, role and time zone, and the minute (the page
/// shows ages). A view of an unchanged incident costs one indexed read, not a dozen queries
/// and a render. Each entry is filled once: views that miss together (every viewer at the turn
/// of a minute) wait for one render instead of each rendering (at 200 connections that herd
/// stalled the page for half a second each minute). Held in [`AppState`].
pub struct RenderedPages(std::sync::Mutex<lru::LruCache<String, std::sync::Arc<RenderedPage>>>);

/// One incident page as rendered, with the status it is served with and whether it may be kept
/// (its recall was whole); filled once.
pub(super) type RenderedPage = tokio::sync::OnceCell<(StatusCode, axum::body::Bytes, bool)>;

/// Incident pages kept by [`RenderedPages`] (each a few tens of kB). A page is keyed by the
/// minute it was rendered in, so only the pages viewed this minute are worth holding: 64 of
/// them. A larger cache fills with the last minutes' copies, which nobody asks for again, and
/// the heap grows while it does (`soak-bench` shows it)…
const RENDERED_PAGES: usize = 64;
/// …and the largest page kept, in bytes (a page with thousands of observations is rendered
/// each time rather than held), so the cache stays under 16 MB.
pub(super) const RENDERED_PAGE_MAX: usize = 256 * 1024;

impl std::fmt::Debug for RenderedPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RenderedPages")
    }
}

impl Default for RenderedPages {
    fn default() -> Self {
        let capacity =
            std::num::NonZeroUsize::new(RENDERED_PAGES).unwrap_or(std::num::NonZeroUsize::MIN);
        Self(std::sync::Mutex::new(lru::LruCache::new(capacity)))
    }
}

impl RenderedPages {
    /// The pages; a panic while the lock was held left nothing half-written (an LRU put is one
    /// step), so a poisoned lock is taken over.
    pub(super) fn pages(
        &self,
    ) -> std::sync::MutexGuard<'_, lru::LruCache<String, std::sync::Arc<RenderedPage>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
