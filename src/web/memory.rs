//! Organizational memory over HTTP: the memory browser, notes and runbooks, supersede and
//! retract (reviewers), recall — as pages and as JSON under `/api/v1`.
//!
//! Long because it is one resource's module (as every resource in `web/` has one): its pages and
//! JSON handlers, and their tests (about 240 lines).

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::CurrentUser;
use super::errors::{ApiError, ApiJson, PageError, PageForm, form_outcome};
use super::examples;
use super::layout::Layout;
use super::schema::MemoryPath;
use super::view::Clock;
use crate::domain::memory::{MemoryRecord, NewRecord};
use crate::domain::{MemoryKind, Role, Validation, ValidationError, optional_text, required_text};
use crate::error::AppError;
use crate::memory::recall::{RecallQuery, RecallResult, recall};
use crate::services::memory as msvc;
use crate::store::memory::{self as mstore, MemoryFilter};

/// Query of the memory list (API and browser); empty = any.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MemoryQuery {
    /// Full-text search.
    #[serde(default)]
    pub q: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Service.
    #[serde(default)]
    pub service: String,
    /// Failure-mode tag.
    #[serde(default)]
    pub failure_mode: String,
    /// Incident id.
    #[serde(default)]
    pub incident: String,
    /// Validation state.
    #[serde(default)]
    pub validation: String,
    /// `newest` (default) or `oldest`; a search (`q`) orders by relevance.
    #[serde(default)]
    pub sort: String,
    /// Keyset pagination: the last record id of the previous page (`MEM-` prefix allowed).
    #[serde(default)]
    pub after: String,
    /// A search's page, from 1 (default) to [`SEARCH_PAGES`]: matches are ranked by relevance,
    /// which has no key to page on, so a search pages by position.
    #[serde(default)]
    pub page: String,
}

/// Records per page in the memory browser.
const PAGE_SIZE: i64 = 50;

/// Pages a search may go to (the best 1,000 matches at [`PAGE_SIZE`] a page).
const SEARCH_PAGES: i64 = 20;

fn nonempty(s: &str) -> Option<String> {
    Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_string)
}

impl MemoryQuery {
    fn to_filter(&self) -> Result<MemoryFilter, ValidationError> {
        Ok(MemoryFilter {
            q: nonempty(&self.q),
            kind: nonempty(&self.kind)
                .map(|k| MemoryKind::parse(&k))
                .transpose()?,
            service: nonempty(&self.service).map(|s| s.to_lowercase()),
            failure_mode: nonempty(&self.failure_mode),
            incident: nonempty(&self.incident),
            validation: nonempty(&self.validation)
                .map(|v| Validation::parse(&v))
                .transpose()?,
            include_working: false,
            limit: None,
            oldest_first: match self.sort.trim() {
                "" | "newest" => false,
                "oldest" => true,
                other => {
                    return Err(ValidationError::new(
                        "sort",
                        format!("'{other}' is not an order; use newest or oldest"),
                    ));
                }
            },
            after_id: nonempty(&self.after)
                .map(|a| {
                    a.trim_start_matches("MEM-").parse::<i64>().map_err(|_| {
                        ValidationError::new("after", "is not a record id from this list")
                    })
                })
                .transpose()?,
            offset: Some((self.search_page()? - 1) * PAGE_SIZE),
        })
    }

    /// The search page asked for ([`MemoryQuery::page`]), 1 when absent.
    fn search_page(&self) -> Result<i64, ValidationError> {
        match nonempty(&self.page) {
            None => Ok(1),
            Some(p) => p
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=SEARCH_PAGES).contains(n))
                .ok_or_else(|| {
                    ValidationError::new(
                        "page",
                        format!("is a search page from 1 to {SEARCH_PAGES}, not '{p}'"),
                    )
                }),
        }
    }

    /// Query string of the same filters (for page links), with `after` when given.
    fn query_string(&self, after: Option<i64>) -> String {
        self.query_string_at(after, None)
    }

    /// Query string of the same filters with `after` or a search `page` when given.
    fn query_string_at(&self, after: Option<i64>, page: Option<i64>) -> String {
        let after = after.map(|a| a.to_string());
        let page = page.map(|p| p.to_string());
        let mut pairs: Vec<(&str, &str)> = vec![
            ("q", self.q.as_str()),
            ("kind", self.kind.as_str()),
            ("service", self.service.as_str()),
            ("failure_mode", self.failure_mode.as_str()),
            ("incident", self.incident.as_str()),
            ("validation", self.validation.as_str()),
            ("sort", self.sort.as_str()),
        ];
        if let Some(a) = &after {
            pairs.push(("after", a));
        }
        if let Some(p) = &page {
            pairs.push(("page", p));
        }
        pairs.retain(|(_, v)| !v.is_empty());
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    }
}

/// `GET /api/v1/memories`.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct MemoryList {
    /// One page of records.
    memories: Vec<MemoryRecord>,
}

#[utoipa::path(
    get,
    path = "/api/v1/memories",
    operation_id = "listMemories",
    summary = "List durable memory records",
    tag = "memory",
    params(MemoryQuery),
    responses(
        (status = 200, description = "Durable memory records, newest first (50 a page)", body = MemoryList,
         example = json!(examples::memory_list())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_list(
    State(s): State<AppState>,
    _u: CurrentUser,
    Query(q): Query<MemoryQuery>,
) -> Result<Json<MemoryList>, ApiError> {
    Ok(Json(MemoryList {
        memories: mstore::list(&s.pool, &q.to_filter()?).await?,
    }))
}

/// `GET /api/v1/memories/{id}`: the record's fields, what it cites and what happened to it.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct MemoryDetail {
    #[serde(flatten)]
    memory: MemoryRecord,
    /// The records of its `sources`.
    source_records: Vec<MemoryRecord>,
    /// Writes, supersessions and retractions, oldest first.
    history: Vec<HistoryEntry>,
}

/// One change of a memory record.
#[derive(Serialize, utoipa::ToSchema)]
struct HistoryEntry {
    /// When (RFC 3339 UTC).
    at: String,
    /// Who.
    actor: String,
    /// `written`, `superseded`, `retracted`, …
    change: String,
    /// In words.
    detail: String,
}

async fn detail(s: &AppState, id: i64) -> Result<MemoryDetail, AppError> {
    let memory = mstore::get(&s.pool, id).await?;
    let source_records = mstore::get_many(&s.pool, &memory.sources).await?;
    let history = mstore::history(&s.pool, id)
        .await?
        .into_iter()
        .map(|(at, actor, change, detail)| HistoryEntry {
            at,
            actor,
            change,
            detail,
        })
        .collect();
    Ok(MemoryDetail {
        memory,
        source_records,
        history,
    })
}

fn parse_mem_id(id: &str) -> Result<i64, AppError> {
    id.trim_start_matches("MEM-")
        .parse()
        .map_err(|_| AppError::NotFound(format!("memory {id}")))
}

#[utoipa::path(
    get,
    path = "/api/v1/memories/{id}",
    operation_id = "getMemory",
    summary = "Show a memory record with its sources and history",
    tag = "memory",
    params(MemoryPath),
    responses(
        (status = 200, description = "The record, the records it cites and its history", body = MemoryDetail,
         example = json!(examples::memory_detail())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_show(
    State(s): State<AppState>,
    _u: CurrentUser,
    Path(id): Path<String>,
) -> Result<Json<MemoryDetail>, ApiError> {
    Ok(Json(detail(&s, parse_mem_id(&id)?).await?))
}

/// Body of `POST /api/v1/memories`: a note (service_fact, dependency) or runbook written by a
/// person. Runbooks carry `title`, `steps` and `common_causes`; a dependency carries
/// `depends_on`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
pub struct CreateMemory {
    /// `service_fact`, `dependency` or `runbook`.
    pub kind: String,
    /// The fact, or the runbook's summary.
    #[serde(default)]
    pub text: String,
    /// Service it is about.
    #[serde(default)]
    pub service: String,
    /// Failure-mode tags (comma-separated in forms).
    #[serde(default)]
    pub failure_modes: Vec<String>,
    /// Runbook title.
    #[serde(default)]
    pub title: String,
    /// Runbook steps, one per line.
    #[serde(default)]
    pub steps: String,
    /// Runbook common causes, one per line.
    #[serde(default)]
    pub common_causes: String,
    /// For a dependency: the service depended on.
    #[serde(default)]
    pub depends_on: String,
    /// For a new version of a runbook or note: the record it replaces.
    #[serde(default)]
    pub replaces: Option<i64>,
}

impl CreateMemory {
    fn to_record(&self, author: &str) -> Result<NewRecord, AppError> {
        let kind = MemoryKind::parse(&self.kind)?;
        let service = crate::domain::incident::parse_service(&self.service)?;
        let failure_modes: Vec<String> = self
            .failure_modes
            .iter()
            .flat_map(|t| t.split(','))
            .map(|t| t.trim().to_lowercase())
            .filter(|t| !t.is_empty())
            .collect();
        let (text, data) = match kind {
            MemoryKind::ServiceFact => (
                required_text("text", &self.text, 5000)?,
                serde_json::json!({}),
            ),
            MemoryKind::Dependency => {
                let on = crate::domain::incident::parse_service(&self.depends_on)
                    .map_err(|e| ValidationError::new("depends_on", e.message))?;
                let extra = optional_text("text", &self.text, 2000)?;
                (
                    format!("{service} depends on {on}. {extra}")
                        .trim()
                        .to_string(),
                    serde_json::json!({"depends_on": on}),
                )
            }
            MemoryKind::Runbook => {
                let title = required_text("title", &self.title, 200)?;
                let steps: Vec<String> = self
                    .steps
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect();
                if steps.is_empty() {
                    return Err(ValidationError::new(
                        "steps",
                        "a runbook needs at least one step (one per line)",
                    )
                    .into());
                }
                let causes: Vec<String> = self
                    .common_causes
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect();
                let summary = optional_text("text", &self.text, 5000)?;
                let text =
                    crate::domain::proposals::runbook_text(&title, &summary, &steps, &causes);
                (
                    text,
                    serde_json::json!({"title": title, "steps": steps, "common_causes": causes}),
                )
            }
            other => {
                return Err(ValidationError::new(
                    "kind",
                    format!("{other} records are written by the incident workflow; people write service_fact, dependency or runbook here"),
                )
                .into());
            }
        };
        let mut r = NewRecord::new(kind, text, author);
        r.services = vec![service];
        r.failure_modes = failure_modes;
        r.data = data;
        Ok(r)
    }
}

/// Writes a note or runbook (and, for a new version, supersedes the one it replaces; runbook
/// versions count up in `data.version`).
async fn create_memory(
    s: &AppState,
    user: &crate::store::users::User,
    body: &CreateMemory,
) -> Result<MemoryRecord, AppError> {
    let mut rec = body.to_record(&user.name)?;
    if let Some(old) = body.replaces {
        let prev = mstore::get(&s.pool, old).await?;
        if prev.kind != rec.kind {
            return Err(ValidationError::new(
                "replaces",
                format!("MEM-{old} is a {}, not a {}", prev.kind, rec.kind),
            )
            .into());
        }
        let version = prev
            .data
            .get("version")
            .and_then(|v| v.as_i64())
            .unwrap_or(1)
            + 1;
        if let Some(obj) = rec.data.as_object_mut() {
            obj.insert("version".into(), version.into());
            obj.insert("previous".into(), old.into());
        }
    } else if let Some(obj) = rec.data.as_object_mut() {
        obj.insert("version".into(), 1.into());
    }
    let written = msvc::write_note(&s.pool, rec).await?;
    if let Some(old) = body.replaces {
        msvc::supersede(&s.pool, &user.name, old, written.id, "new version").await?;
    }
    Ok(written)
}

#[utoipa::path(
    post,
    path = "/api/v1/memories",
    operation_id = "writeMemory",
    summary = "Write a note or a runbook",
    tag = "memory",
    request_body(content = CreateMemory, description = "A note (service_fact, dependency) or a runbook",
                 example = json!(examples::create_memory())),
    responses(
        (status = 201, description = "The record, written (confirmed)", body = MemoryRecord,
         example = json!(examples::memory_record())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_create(
    State(s): State<AppState>,
    CurrentUser(user): CurrentUser,
    ApiJson(body): ApiJson<CreateMemory>,
) -> Result<impl IntoResponse, ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(create_memory(&s, &user, &body).await?),
    ))
}

/// Body of supersede.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct SupersedeBody {
    /// Id of the newer record.
    pub by: i64,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

/// Body of retract.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct RetractBody {
    /// Why (required).
    #[serde(default)]
    pub reason: String,
}

#[utoipa::path(
    post,
    path = "/api/v1/memories/{id}/supersede",
    operation_id = "supersedeMemory",
    summary = "Supersede a memory record by a newer one (reviewers)",
    tag = "memory",
    params(MemoryPath),
    request_body(content = SupersedeBody, description = "The record that replaces it and why",
                 example = json!(examples::supersede())),
    responses(
        (status = 200, description = "The record, superseded (reviewers)", body = MemoryRecord,
         example = json!(examples::superseded_record())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_supersede(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<SupersedeBody>,
) -> Result<Json<MemoryRecord>, ApiError> {
    user.require(Role::Reviewer, "superseding a memory")?;
    Ok(Json(
        msvc::supersede(
            &s.pool,
            &user.0.name,
            parse_mem_id(&id)?,
            b.by,
            b.reason.trim(),
        )
        .await?,
    ))
}

#[utoipa::path(
    post,
    path = "/api/v1/memories/{id}/retract",
    operation_id = "retractMemory",
    summary = "Retract a memory record (reviewers)",
    tag = "memory",
    params(MemoryPath),
    request_body(content = RetractBody, description = "Why (required)", example = json!(examples::retract())),
    responses(
        (status = 200, description = "The record, retracted (reviewers)", body = MemoryRecord,
         example = json!(examples::retracted_record())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_retract(
    State(s): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<RetractBody>,
) -> Result<Json<MemoryRecord>, ApiError> {
    user.require(Role::Reviewer, "retracting a memory")?;
    let reason = required_text("reason", &b.reason, 2000)?;
    Ok(Json(
        msvc::retract(&s.pool, &user.0.name, parse_mem_id(&id)?, &reason).await?,
    ))
}

/// Query of `GET /api/v1/recall`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecallParams {
    /// Free text.
    #[serde(default)]
    pub q: String,
    /// Service in scope.
    #[serde(default)]
    pub service: String,
    /// How many (default 10).
    #[serde(default)]
    pub k: Option<usize>,
}

async fn run_recall(s: &AppState, p: &RecallParams) -> Result<RecallResult, AppError> {
    let q = RecallQuery {
        text: optional_text("q", &p.q, 10_000)?,
        service: nonempty(&p.service).map(|s| s.to_lowercase()),
        k: p.k.unwrap_or(10),
        ..Default::default()
    };
    if q.text.is_empty() && q.service.is_none() {
        return Err(ValidationError::new("q", "give a question or a service to recall for").into());
    }
    // A read: recall never writes (no "last recalled" bookkeeping on GET).
    let started = std::time::Instant::now();
    let result = recall(&s.memory, &q).await?;
    s.metrics
        .recall("search", Some(started.elapsed()), result.results.len());
    Ok(result)
}

#[utoipa::path(
    get,
    path = "/api/v1/recall",
    operation_id = "recall",
    summary = "Recall organizational memory for a question or a service",
    tag = "memory",
    params(RecallParams),
    responses(
        (status = 200, description = "Recalled records with `score` and `why`, and past incidents ranked",
         body = RecallResult, example = json!(examples::recall())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_recall(
    State(s): State<AppState>,
    _u: CurrentUser,
    Query(p): Query<RecallParams>,
) -> Result<Json<RecallResult>, ApiError> {
    Ok(Json(run_recall(&s, &p).await?))
}

// ---- pages ----

struct Item {
    m: MemoryRecord,
    created: String,
    score: Option<String>,
    why: String,
    marks: String,
}

fn item(m: MemoryRecord, clock: &Clock) -> Item {
    Item {
        created: clock.fmt(&m.created_at),
        m,
        score: None,
        why: String::new(),
        marks: String::new(),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "memories/browser.html")]
struct BrowserPage {
    layout: Layout,
    q: MemoryQuery,
    recall_q: String,
    items: Vec<Item>,
    recalled: Option<Vec<Item>>,
    notice: Option<String>,
    kinds: Vec<&'static str>,
    validations: Vec<&'static str>,
    memory_empty: bool,
    can_load_sample: bool,
    /// "Embedding: 1,204 of 5,000 records have a vector (all-MiniLM-L6-v2)" while the backfill
    /// runs; `None` when every durable record has one or embeddings are off.
    embedding_progress: Option<String>,
    /// Query string of the next page.
    next: Option<String>,
    /// Whether this is a later page.
    later_page: bool,
    /// Query string of the first page.
    first: String,
    /// A search hit the page size: more matches may exist.
    more_matches: bool,
}

/// What the Memory page says about the embedding backfill: `None` when it is done (or there is
/// no embedder), else how far it got, with the model.
async fn embedding_progress(memory: &crate::memory::Memory) -> Option<String> {
    let model = memory.embedder()?.model().to_string();
    match crate::memory::embeddings::progress(memory).await {
        Ok((done, total)) if done < total => Some(format!(
            "Embedding in the background: {done} of {total} records have a vector ({model}); \
             recall by meaning covers those so far."
        )),
        _ => None,
    }
}

/// `POST /memories/sample` (admins): replays the embedded sample history through the normal
/// workflow, then shows the memory browser.
pub(super) async fn load_sample(
    State(s): State<AppState>,
    user: CurrentUser,
) -> Result<Response, PageError> {
    user.require(Role::Admin, "loading the sample history")?;
    crate::services::sample::load_history(&s.memory).await?;
    s.memory.wake();
    Ok(Redirect::to("/memories").into_response())
}

#[derive(Deserialize, Default)]
pub(super) struct BrowserQuery {
    #[serde(flatten)]
    filter: MemoryQuery,
    #[serde(default)]
    recall: String,
}

pub(super) async fn browser_page(
    State(s): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    Query(bq): Query<BrowserQuery>,
) -> Result<Response, PageError> {
    let clock = Clock::for_viewer(Some(&user), &headers);
    let mut filter = bq.filter.to_filter()?;
    filter.limit = Some(PAGE_SIZE + 1);
    let mut records = mstore::list(&s.pool, &filter).await?;
    // A search is ranked by relevance and pages by position, up to SEARCH_PAGES; a list pages
    // by key (the last id shown).
    let page = bq.filter.search_page()?;
    let full = records.len() as i64 > PAGE_SIZE;
    records.truncate(PAGE_SIZE as usize);
    let next = match (&filter.q, records.last()) {
        (Some(_), Some(_)) if full && page < SEARCH_PAGES => {
            Some(bq.filter.query_string_at(None, Some(page + 1)))
        }
        (None, Some(m)) if full => Some(bq.filter.query_string(Some(m.id))),
        _ => None,
    };
    let more_matches = filter.q.is_some() && full && next.is_none();
    let later_page = filter.after_id.is_some() || (filter.q.is_some() && page > 1);
    let first = bq.filter.query_string(None);
    let items: Vec<Item> = records.into_iter().map(|m| item(m, &clock)).collect();
    let memory_empty = mstore::list(
        &s.pool,
        &MemoryFilter {
            limit: Some(1),
            ..Default::default()
        },
    )
    .await?
    .is_empty();
    let (recalled, notice) = if bq.recall.trim().is_empty() {
        (None, None)
    } else {
        let res = run_recall(
            &s,
            &RecallParams {
                q: bq.recall.clone(),
                ..Default::default()
            },
        )
        .await?;
        let list = res
            .results
            .into_iter()
            .map(|r| Item {
                score: Some(format!("{:.4}", r.score)),
                why: why_text(&r.why),
                marks: r.marks.join(", "),
                ..item(r.memory, &clock)
            })
            .collect();
        (Some(list), res.notice)
    };
    Ok(BrowserPage {
        layout: Layout::new(Some(&user), "Memory").with_current("memories"),
        recall_q: bq.recall,
        q: bq.filter,
        items,
        recalled,
        notice,
        kinds: MemoryKind::ALL
            .iter()
            .filter(|k| k.is_durable())
            .map(|k| k.as_str())
            .collect(),
        validations: Validation::ALL.iter().map(|v| v.as_str()).collect(),
        memory_empty,
        can_load_sample: user.role.includes(Role::Admin),
        embedding_progress: embedding_progress(&s.memory).await,
        next,
        later_page,
        first,
        more_matches,
    }
    .into_response())
}

/// "why recalled" in one line.
pub fn why_text(w: &crate::memory::recall::Why) -> String {
    let mut parts = Vec::new();
    if !w.matched_terms.is_empty() {
        parts.push(format!("words: {}", w.matched_terms.join(", ")));
    }
    if !w.tags.is_empty() {
        parts.push(format!("failure modes: {}", w.tags.join(", ")));
    }
    if !w.services.is_empty() {
        parts.push(format!("service: {}", w.services.join(", ")));
    }
    if !w.action_kinds.is_empty() {
        parts.push(format!("action: {}", w.action_kinds.join(", ")));
    }
    if let Some(c) = w.cosine {
        parts.push(format!("meaning: cosine {c:.2}"));
    }
    if !w.lists.is_empty() {
        parts.push(format!("lists: {}", w.lists.join(", ")));
    }
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn why_recalled_names_each_list_and_the_cosine() {
        let w = crate::memory::recall::Why {
            matched_terms: vec!["queue".into()],
            lists: vec!["text", "semantic", "incident"],
            cosine: Some(0.7141),
            ..Default::default()
        };
        assert_eq!(
            why_text(&w),
            "words: queue · meaning: cosine 0.71 · lists: text, semantic, incident"
        );
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "memories/show.html")]
struct ShowPage {
    layout: Layout,
    d: MemoryDetail,
    created: String,
    can_curate: bool,
    error: Option<String>,
}

async fn render_show(
    s: &AppState,
    user: &crate::store::users::User,
    headers: &HeaderMap,
    id: i64,
    error: Option<(StatusCode, String)>,
) -> Result<Response, PageError> {
    let mut d = detail(s, id).await?;
    let clock = Clock::for_viewer(Some(user), headers);
    for h in &mut d.history {
        h.at = clock.fmt_stored(&h.at);
    }
    let (status, error) = error.map_or((StatusCode::OK, None), |(st, m)| (st, Some(m)));
    Ok((
        status,
        ShowPage {
            layout: Layout::new(Some(user), format!("MEM-{id}")).with_current("memories"),
            created: clock.fmt(&d.memory.created_at),
            d,
            can_curate: user.role.includes(Role::Reviewer),
            error,
        },
    )
        .into_response())
}

pub(super) async fn show_page(
    State(s): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    render_show(&s, &user, &headers, parse_mem_id(&id)?, None).await
}

#[derive(Deserialize)]
pub(super) struct CurateForm {
    #[serde(default)]
    by: String,
    #[serde(default)]
    reason: String,
}

/// The answer to a curation form (supersede, retract): back to the record, or its page again
/// with the message.
async fn curated<T>(
    s: &AppState,
    user: &CurrentUser,
    headers: &HeaderMap,
    id: i64,
    result: Result<T, AppError>,
) -> Result<Response, PageError> {
    form_outcome(
        result,
        |_| format!("/memories/{id}"),
        |error| render_show(s, &user.0, headers, id, Some(error)),
    )
    .await
}

pub(super) async fn supersede_submit(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    PageForm(f): PageForm<CurateForm>,
) -> Result<Response, PageError> {
    let id = parse_mem_id(&id)?;
    let result = async {
        user.require(Role::Reviewer, "superseding a memory")?;
        let by = parse_mem_id(f.by.trim()).map_err(|_| {
            ValidationError::new("by", "give the id of the newer record, e.g. MEM-42")
        })?;
        msvc::supersede(&s.pool, &user.0.name, id, by, f.reason.trim()).await
    }
    .await;
    curated(&s, &user, &headers, id, result).await
}

pub(super) async fn retract_submit(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    PageForm(f): PageForm<CurateForm>,
) -> Result<Response, PageError> {
    let id = parse_mem_id(&id)?;
    let result = async {
        user.require(Role::Reviewer, "retracting a memory")?;
        let reason = required_text("reason", &f.reason, 2000)?;
        msvc::retract(&s.pool, &user.0.name, id, &reason).await
    }
    .await;
    curated(&s, &user, &headers, id, result).await
}

#[derive(Template, WebTemplate)]
#[template(path = "memories/new.html")]
struct NewPage {
    layout: Layout,
    f: NewForm,
    error: Option<String>,
}

#[derive(Deserialize, Default)]
pub(super) struct NewForm {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    text: String,
    #[serde(default)]
    service: String,
    #[serde(default)]
    failure_modes: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    steps: String,
    #[serde(default)]
    common_causes: String,
    #[serde(default)]
    depends_on: String,
    #[serde(default)]
    replaces: String,
}

#[derive(Deserialize, Default)]
pub(super) struct NewQuery {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    replaces: String,
}

pub(super) async fn new_page(
    State(s): State<AppState>,
    CurrentUser(user): CurrentUser,
    Query(nq): Query<NewQuery>,
) -> Result<Response, PageError> {
    let mut f = NewForm {
        kind: if nq.kind.is_empty() {
            "service_fact".into()
        } else {
            nq.kind
        },
        ..Default::default()
    };
    if let Ok(old) = parse_mem_id(&nq.replaces) {
        let prev = mstore::get(&s.pool, old).await?;
        f.kind = prev.kind.as_str().into();
        f.service = prev.services.first().cloned().unwrap_or_default();
        f.failure_modes = prev.failure_modes.join(", ");
        f.replaces = old.to_string();
        let str_of = |k: &str| {
            prev.data
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let lines_of = |k: &str| {
            prev.data
                .get(k)
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default()
        };
        f.title = str_of("title");
        f.depends_on = str_of("depends_on");
        f.steps = lines_of("steps");
        f.common_causes = lines_of("common_causes");
        f.text = if prev.kind == MemoryKind::ServiceFact {
            prev.text.clone()
        } else {
            String::new()
        };
    }
    Ok(NewPage {
        layout: Layout::new(Some(&user), "New note or runbook"),
        f,
        error: None,
    }
    .into_response())
}

pub(super) async fn new_submit(
    State(s): State<AppState>,
    CurrentUser(user): CurrentUser,
    PageForm(f): PageForm<NewForm>,
) -> Result<Response, PageError> {
    let body = CreateMemory {
        kind: f.kind.clone(),
        text: f.text.clone(),
        service: f.service.clone(),
        failure_modes: vec![f.failure_modes.clone()],
        title: f.title.clone(),
        steps: f.steps.clone(),
        common_causes: f.common_causes.clone(),
        depends_on: f.depends_on.clone(),
        replaces: f.replaces.trim().parse().ok(),
    };
    let result = create_memory(&s, &user, &body).await;
    let again = |(status, message): (StatusCode, String)| async move {
        let page = NewPage {
            layout: Layout::new(Some(&user), "New note or runbook"),
            f,
            error: Some(message),
        };
        Ok((status, page).into_response())
    };
    form_outcome(result, |m| format!("/memories/{}", m.id), again).await
}
