//! Organizational memory as JSON under `/api/v1`: list, show, write a note or a runbook,
//! supersede and retract (reviewers), recall. The pages are in [`super::memory_pages`].

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::CurrentUser;
use super::errors::{ApiError, ApiJson};
use super::examples;
use super::schema::MemoryPath;
use crate::domain::memory::{MemoryRecord, NewRecord};
use crate::domain::{MemoryKind, Role, Validation, ValidationError, optional_text, required_text};
use crate::error::AppError;
use crate::memory::recall::{RecallQuery, RecallResult, recall};
use crate::services::memory as msvc;
use crate::store::memory::MemoryFilter;

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
    /// `relevance` (a search's default: the best matches first), `newest` (a list's default)
    /// or `oldest`; a search sorted by date still holds only its matches.
    #[serde(default)]
    pub sort: String,
    /// Keyset pagination: the last record id of the previous page (`MEM-` prefix allowed).
    #[serde(default)]
    pub after: String,
    /// Keyset pagination backwards: the first record id of the next page (`MEM-` prefix
    /// allowed); the page just before it.
    #[serde(default)]
    pub before: String,
    /// A search's page, from 1 (default) to [`SEARCH_PAGES`]: matches are ranked by relevance,
    /// which has no key to page on, so a search pages by position.
    #[serde(default)]
    pub page: String,
}

/// Records per page in the memory browser.
pub(super) const PAGE_SIZE: i64 = 50;

/// Pages a search may go to (the best 1,000 matches at [`PAGE_SIZE`] a page).
pub(super) const SEARCH_PAGES: i64 = 20;

/// A record id from a page link (`MEM-` prefix allowed) in field `field`, `None` when empty.
fn record_id(field: &'static str, s: &str) -> Result<Option<i64>, ValidationError> {
    nonempty(s)
        .map(|a| {
            a.trim_start_matches("MEM-")
                .parse::<i64>()
                .map_err(|_| ValidationError::new(field, "is not a record id from this list"))
        })
        .transpose()
}

fn nonempty(s: &str) -> Option<String> {
    Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_string)
}

impl MemoryQuery {
    pub(super) fn to_filter(&self) -> Result<MemoryFilter, ValidationError> {
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
            oldest_first: self.order()? == "oldest",
            after_id: record_id("after", &self.after)?,
            before_id: record_id("before", &self.before)?,
            offset: Some((self.search_page()? - 1) * PAGE_SIZE),
            by_date: nonempty(&self.q).is_some() && self.order()? != "relevance",
        })
    }

    /// The order asked for: `relevance` (the default of a search), `newest` (the default of a
    /// list, and what `relevance` means without a search) or `oldest`.
    pub(super) fn order(&self) -> Result<&'static str, ValidationError> {
        let searching = nonempty(&self.q).is_some();
        match self.sort.trim() {
            "" | "relevance" if searching => Ok("relevance"),
            "" | "relevance" | "newest" => Ok("newest"),
            "oldest" => Ok("oldest"),
            other => Err(ValidationError::new(
                "sort",
                format!("'{other}' is not an order; use relevance, newest or oldest"),
            )),
        }
    }

    /// The search page asked for ([`MemoryQuery::page`]), 1 when absent.
    pub(super) fn search_page(&self) -> Result<i64, ValidationError> {
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

    /// Query string of the same filters (for page links) at `cursor`: `("after", id)`,
    /// `("before", id)`, `("page", n)`, or the first page with `None`.
    pub(super) fn query_string(&self, cursor: Option<(&str, i64)>) -> String {
        let at = cursor.map(|(k, v)| (k, v.to_string()));
        let mut pairs: Vec<(&str, &str)> = vec![
            ("q", self.q.as_str()),
            ("kind", self.kind.as_str()),
            ("service", self.service.as_str()),
            ("failure_mode", self.failure_mode.as_str()),
            ("incident", self.incident.as_str()),
            ("validation", self.validation.as_str()),
            ("sort", self.sort.as_str()),
        ];
        if let Some((k, v)) = &at {
            pairs.push((k, v));
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
        memories: msvc::list(&s.pool, &q.to_filter()?).await?,
    }))
}

/// `GET /api/v1/memories/{id}`: the record's fields, what it cites and what happened to it.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct MemoryDetail {
    #[serde(flatten)]
    pub(super) memory: MemoryRecord,
    /// The records of its `sources`.
    pub(super) source_records: Vec<MemoryRecord>,
    /// Writes, supersessions and retractions, oldest first.
    pub(super) history: Vec<HistoryEntry>,
}

/// One change of a memory record.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct HistoryEntry {
    /// When (RFC 3339 UTC).
    pub(super) at: String,
    /// Who.
    pub(super) actor: String,
    /// `written`, `superseded`, `retracted`, …
    pub(super) change: String,
    /// In words.
    pub(super) detail: String,
}

pub(super) async fn detail(s: &AppState, id: i64) -> Result<MemoryDetail, AppError> {
    let (memory, source_records, history) = msvc::detail(&s.pool, id).await?;
    let history = history
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

pub(super) fn parse_mem_id(id: &str) -> Result<i64, AppError> {
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
pub(super) async fn create_memory(
    s: &AppState,
    user: &crate::store::users::User,
    body: &CreateMemory,
) -> Result<MemoryRecord, AppError> {
    let rec = body.to_record(&user.name)?;
    msvc::write_version(&s.pool, &user.name, rec, body.replaces).await
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

pub(super) async fn run_recall(s: &AppState, p: &RecallParams) -> Result<RecallResult, AppError> {
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
