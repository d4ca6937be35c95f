//! The incident pages as last rendered ([`RenderedPages`], held in [`super::AppState`]): the
//! state of each incident a page shows ([`PageStamp`], kept in memory so a view of an unchanged
//! page reads nothing from the database), the rendered copies, and the validators (`ETag`,
//! RFC 9110 §8.8.3) a browser revalidates with `If-None-Match` (answered 304, §13.1.2).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sqlx::AnyPool;

use super::errors::PageError;
use crate::domain::IncidentId;
use crate::error::{AppError, AppResult};

/// What a cached copy of an incident's page depends on, as the database last said it
/// ([`crate::services::incidents::page_state`]): the incident's version (moved by each state
/// change) and revision (moved by triggers on every row hanging off the incident: evidence,
/// timeline, investigations…), and the memory's recall generation `(epoch, value)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageStamp {
    /// The incident's version.
    pub version: i64,
    /// The incident's revision.
    pub revision: i64,
    /// The recall generation's epoch (a new database is a new epoch).
    pub epoch: Arc<str>,
    /// The recall generation's value.
    pub generation: i64,
}

impl PageStamp {
    /// The incident's JSON validator (`GET /api/v1/incidents/{id}`): `W/"<version>.<revision>"`.
    /// The JSON holds the incident and its timeline, in UTC, the same for every viewer; its
    /// leading number is the version, so the tag sent back as `If-Match` names the version a
    /// write is based on (`web::api::BaseVersion`).
    pub fn json_etag(&self) -> HeaderValue {
        let tag = format!("W/\"{}.{}\"", self.version, self.revision);
        HeaderValue::from_str(&tag).unwrap_or_else(|_| HeaderValue::from_static("W/\"0\""))
    }
}

/// One incident page as rendered: the status it is served with, its HTML, and whether it may
/// be kept and revalidated (a 200 whose recall is whole: a page still waiting for its recall
/// is neither, so a reload fetches the recall).
#[derive(Debug)]
pub struct RenderedPage {
    /// The status.
    pub status: StatusCode,
    /// The page.
    pub html: axum::body::Bytes,
    /// Whether the page shows everything it will (its recall included).
    pub whole: bool,
}

/// Incident pages as last rendered, by a key that names everything a page shows: the
/// incident's [`PageStamp`], the viewer's name, role and time zone, and the minute (the page
/// shows ages). A view of an unchanged incident costs a lookup and a copy: the stamp is kept
/// in memory, so no database read, and the copy is rendered once, however many views miss it
/// together (the cache's `try_get_with` is the single flight: at 200 connections, every viewer
/// at the turn of a minute waits for one render instead of each rendering).
///
/// A stamp is read again from the database after [`STAMP_TTL`], and at once after any write
/// this process answers (`web::wake_memory_after_writes` calls [`RenderedPages::wrote`]) or
/// any change notice it hears ([`RenderedPages::follow`]: its own background writes, and on
/// PostgreSQL other instances' writes): a page after such a write shows it; a write nobody
/// announces here (the CLI on SQLite) shows within [`STAMP_TTL`]. Held in
/// [`super::AppState`].
pub struct RenderedPages {
    /// The rendered copies, weighed by their bytes.
    copies: moka::future::Cache<String, Arc<RenderedPage>>,
    /// The stamp of an incident, by its id and the count of writes answered when the read
    /// began: after a write the key is new, so the next view reads again (one read however
    /// many views ask together), and a read that raced a write is never used after it.
    stamps: moka::future::Cache<(IncidentId, u64), PageStamp>,
    /// Writes this process answered ([`RenderedPages::wrote`]); a stamp read before the last
    /// one is not trusted.
    writes: AtomicU64,
}

/// How long a [`PageStamp`] read from the database is trusted when this process answered no
/// write since: the longest a change made outside this process's requests takes to show.
pub const STAMP_TTL: Duration = Duration::from_secs(1);

/// Stamps kept (about 100 bytes each).
const STAMPS: u64 = 10_000;

/// Bytes of rendered pages kept: a page is a few tens of kB, so a hundred or more pages, the
/// ones viewed in the last minutes (each copy is keyed by its minute; the heap holds what this
/// keeps, and `soak-bench` judges its growth).
const RENDERED_BYTES: u64 = 4 * 1024 * 1024;

/// A copy is keyed by the minute it was rendered in: a copy older than two minutes is never
/// asked for again, and goes.
const RENDERED_TTL: Duration = Duration::from_secs(120);

/// The largest page kept, in bytes (a page with thousands of observations is rendered each
/// time rather than held).
pub const RENDERED_PAGE_MAX: usize = 256 * 1024;

/// `Cache-Control` of a page or answer with a validator: the browser may keep it (never a
/// shared cache: it is one viewer's) and must revalidate it before each use (RFC 9111 §5.2.2.4,
/// §5.2.2.7), so an unchanged page costs a 304 and a changed one is never shown stale. After
/// sign-out, the sign-out answer clears the browser's cache (`Clear-Site-Data`).
pub const REVALIDATE: &str = "private, no-cache";

impl std::fmt::Debug for RenderedPages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RenderedPages")
    }
}

impl Default for RenderedPages {
    fn default() -> Self {
        Self {
            copies: moka::future::Cache::builder()
                .max_capacity(RENDERED_BYTES)
                .weigher(|key: &String, page: &Arc<RenderedPage>| {
                    u32::try_from(key.len() + page.html.len()).unwrap_or(u32::MAX)
                })
                .time_to_live(RENDERED_TTL)
                .build(),
            stamps: moka::future::Cache::builder()
                .max_capacity(STAMPS)
                .time_to_live(STAMP_TTL)
                .build(),
            writes: AtomicU64::new(0),
        }
    }
}

impl RenderedPages {
    /// The [`PageStamp`] of incident `id`: the one kept when it is fresh, else read from the
    /// database (and kept, unless a write was answered meanwhile).
    ///
    /// # Errors
    /// [`AppError::NotFound`] for an unknown incident; database errors.
    pub async fn stamp(&self, pool: &AnyPool, id: &IncidentId) -> AppResult<PageStamp> {
        let key = (id.clone(), self.writes.load(Ordering::Acquire));
        self.stamps
            .try_get_with(key, async {
                let (version, revision, epoch, generation) =
                    crate::services::incidents::page_state(pool, id).await?;
                Ok::<_, AppError>(PageStamp {
                    version,
                    revision,
                    epoch: epoch.into(),
                    generation,
                })
            })
            .await
            .map_err(|e| match Arc::try_unwrap(e) {
                Ok(e) => e,
                Err(shared) => match &*shared {
                    AppError::NotFound(what) => AppError::NotFound(what.clone()),
                    other => AppError::Internal(anyhow::anyhow!("incident page state: {other}")),
                },
            })
    }

    /// A write was answered (its transaction committed): every kept stamp is read again
    /// before it is used. Called for every request that may write, before its answer leaves.
    pub fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::AcqRel);
    }

    /// Reads kept stamps again after every change notice of `hub`
    /// ([`crate::store::changes`]): a write made outside this process's requests (a Prometheus
    /// pull, the chat worker, and on PostgreSQL another instance or the CLI, through `LISTEN`)
    /// shows on the next view instead of within [`STAMP_TTL`]. Spawns a task that ends when the
    /// hub or these pages are gone. Needs a Tokio runtime.
    pub fn follow(self: &Arc<Self>, hub: &crate::store::changes::ChangeHub) {
        let mut notices = hub.subscribe_all();
        let pages = Arc::downgrade(self);
        tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                match notices.recv().await {
                    Ok(_) | Err(RecvError::Lagged(_)) => match pages.upgrade() {
                        Some(pages) => pages.wrote(),
                        None => return,
                    },
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }

    /// The page kept under `key`, else the one `render` makes (once, however many views ask
    /// together), kept when it is whole and not over [`RENDERED_PAGE_MAX`].
    ///
    /// # Errors
    /// `render`'s error, to every view that waited for it.
    pub async fn get_or_render(
        &self,
        key: String,
        render: impl Future<Output = Result<RenderedPage, PageError>>,
    ) -> Result<Arc<RenderedPage>, PageError> {
        let page = self
            .copies
            .try_get_with_by_ref(&key, async { render.await.map(Arc::new) })
            .await
            .map_err(shared_error)?;
        if page.status != StatusCode::OK || page.html.len() > RENDERED_PAGE_MAX || !page.whole {
            self.copies.invalidate(&key).await;
        }
        Ok(page)
    }
}

/// The error of a render that several views waited for, for one of them: the error itself
/// when this view holds the last reference, else the same kind of error (a 404 stays a 404; an
/// internal error was logged by the view that owned it).
fn shared_error(e: Arc<PageError>) -> PageError {
    match Arc::try_unwrap(e) {
        Ok(e) => e,
        Err(shared) => PageError(match &shared.0 {
            AppError::NotFound(what) => AppError::NotFound(what.clone()),
            AppError::StorageFull => AppError::StorageFull,
            other => AppError::Internal(anyhow::anyhow!("incident page: {other}")),
        }),
    }
}

/// The validator of an incident page under `key` (the cache key: the incident's stamp, the
/// viewer, the zone, the minute): `W/"p<24 hex digits of its SHA-256>"`, so the tag names no
/// viewer. Weak (RFC 9110 §8.8.1): the same key renders the same page, byte for byte only as
/// long as the binary is the same.
pub fn page_etag(key: &str) -> HeaderValue {
    let digest = crate::digest::sha256_hex(key.as_bytes());
    let tag = format!("W/\"p{}\"", digest.get(..24).unwrap_or(&digest));
    HeaderValue::from_str(&tag).unwrap_or_else(|_| HeaderValue::from_static("W/\"p\""))
}

/// Whether the request's `If-None-Match` matches `etag` (weak comparison, `*` matches
/// anything, RFC 9110 §13.1.2): the client's copy is current, and the answer is 304.
pub fn not_modified(headers: &HeaderMap, etag: &HeaderValue) -> bool {
    use axum_extra::headers::{ETag, HeaderMapExt, IfNoneMatch};
    let Some(condition) = headers.typed_get::<IfNoneMatch>() else {
        return false;
    };
    etag.to_str()
        .ok()
        .and_then(|t| t.parse::<ETag>().ok())
        .is_some_and(|tag| !condition.precondition_passes(&tag))
}

/// 304 Not Modified with `etag` and [`REVALIDATE`], no body (RFC 9110 §15.4.5: the headers a
/// 200 would carry that describe the representation's caching).
pub fn not_modified_response(etag: HeaderValue) -> Response {
    (
        StatusCode::NOT_MODIFIED,
        [
            (header::ETAG, etag),
            (header::CACHE_CONTROL, HeaderValue::from_static(REVALIDATE)),
        ],
    )
        .into_response()
}

/// Marks `response` (a 200 of the page or the JSON) with its validator `etag` and
/// [`REVALIDATE`].
pub fn with_validator(mut response: Response, etag: HeaderValue) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::ETAG, etag);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(REVALIDATE));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_if_none_match(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(value).expect("header"),
        );
        h
    }

    #[test]
    fn if_none_match_matches_the_same_tag_weakly_in_a_list_and_as_a_star() {
        let tag = page_etag("INC-2026-0001|3|7|e|2|rita|responder|UTC|100");
        let text = tag.to_str().expect("ascii").to_string();
        assert!(
            text.starts_with("W/\"p") && text.len() == 4 + 24 + 1,
            "{text}"
        );
        assert!(not_modified(&with_if_none_match(&text), &tag));
        let strong = text.trim_start_matches("W/");
        assert!(
            not_modified(&with_if_none_match(strong), &tag),
            "weak comparison"
        );
        assert!(not_modified(
            &with_if_none_match(&format!("\"other\", {text}")),
            &tag
        ));
        assert!(not_modified(&with_if_none_match("*"), &tag));
        assert!(!not_modified(&with_if_none_match("W/\"pother\""), &tag));
        assert!(!not_modified(&HeaderMap::new(), &tag));
    }

    #[test]
    fn another_viewer_zone_or_minute_is_another_tag() {
        let base = page_etag("INC-2026-0001|3|7|e|2|rita|responder|UTC|100");
        for other in [
            "INC-2026-0001|3|7|e|2|victor|responder|UTC|100",
            "INC-2026-0001|3|7|e|2|rita|reviewer|UTC|100",
            "INC-2026-0001|3|7|e|2|rita|responder|Europe/Paris|100",
            "INC-2026-0001|3|7|e|2|rita|responder|UTC|101",
            "INC-2026-0001|3|8|e|2|rita|responder|UTC|100",
        ] {
            assert_ne!(page_etag(other), base, "{other}");
        }
    }

    #[test]
    fn the_json_tag_leads_with_the_version() {
        let stamp = PageStamp {
            version: 3,
            revision: 17,
            epoch: "e".into(),
            generation: 2,
        };
        assert_eq!(stamp.json_etag(), "W/\"3.17\"");
    }

    #[tokio::test]
    async fn a_stamp_is_read_once_and_again_after_a_write() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("stamps.db");
        let pool = crate::store::connect(path.to_str().expect("utf-8 path"))
            .await
            .expect("pool");
        let pages = RenderedPages::default();
        let id = IncidentId::parse("INC-2026-0001").expect("id");
        let missing = pages.stamp(&pool, &id).await;
        assert!(matches!(missing, Err(AppError::NotFound(_))), "{missing:?}");
        sqlx::query(
            "INSERT INTO incidents (id, title, service, severity, description, state, opened_by, \
             opened_at, updated_at, version) VALUES ($1, 't', 's', 'SEV2', '', 'investigating', \
             'rita', '2026-06-01T00:00:00Z', '2026-06-01T00:00:00Z', 1)",
        )
        .bind(id.as_str())
        .execute(&pool)
        .await
        .expect("insert");
        let first = pages.stamp(&pool, &id).await.expect("stamp");
        sqlx::query("UPDATE incidents SET version = 2 WHERE id = $1")
            .bind(id.as_str())
            .execute(&pool)
            .await
            .expect("update");
        assert_eq!(
            pages.stamp(&pool, &id).await.expect("stamp"),
            first,
            "kept: no read"
        );
        pages.wrote();
        assert_eq!(pages.stamp(&pool, &id).await.expect("stamp").version, 2);
    }
}
