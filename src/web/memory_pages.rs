//! The Memory pages: the browser (list, search, recall), a record with its sources and history,
//! curation (supersede, retract) and the form that writes a note or a runbook.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::AppState;
use super::auth::CurrentUser;
use super::errors::{PageError, PageForm, form_outcome};
use super::layout::Layout;
use super::memory::{
    CreateMemory, MemoryDetail, MemoryQuery, PAGE_SIZE, RecallParams, SEARCH_PAGES, create_memory,
    detail, parse_mem_id, run_recall,
};
use super::view::Clock;
use crate::domain::memory::MemoryRecord;
use crate::domain::{MemoryKind, Role, Validation, ValidationError, required_text};
use crate::error::AppError;
use crate::services::memory as msvc;

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
    /// After loading the sample history: what it loaded, in words.
    loaded: Option<String>,
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
    /// Query string of the page before.
    previous: Option<String>,
    /// "124 records match; showing 51–100 (relevance)".
    shown: String,
    /// The order shown: `relevance`, `newest` or `oldest`.
    order: &'static str,
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
    let loaded = crate::services::sample::load_history(&s.memory).await?;
    s.memory.wake();
    Ok(Redirect::to(&format!("/memories?loaded={}", loaded.len())).into_response())
}

#[derive(Deserialize, Default)]
pub(super) struct BrowserQuery {
    #[serde(flatten)]
    filter: MemoryQuery,
    #[serde(default)]
    recall: String,
    /// Set by the sample-history load's redirect: how many past incidents it replayed (a
    /// string: numbers do not survive `serde(flatten)` from a query string).
    #[serde(default)]
    loaded: Option<String>,
}

/// Matches counted for the Memory page's "N records match" (past it: "more than").
const COUNT_CAP: i64 = 10_001;

pub(super) async fn browser_page(
    State(s): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    Query(bq): Query<BrowserQuery>,
) -> Result<Response, PageError> {
    let clock = Clock::for_viewer(Some(&user), &headers);
    let mut filter = bq.filter.to_filter()?;
    filter.limit = Some(PAGE_SIZE + 1);
    let mut records = msvc::list(&s.pool, &filter).await?;
    // A search is ranked by relevance (or sorted by date) and pages by position, up to
    // SEARCH_PAGES; a list pages by key (the last id shown forwards, the first backwards).
    let page = bq.filter.search_page()?;
    let full = records.len() as i64 > PAGE_SIZE;
    let backwards = filter.q.is_none() && filter.before_id.is_some() && filter.after_id.is_none();
    if backwards && full {
        // The page before: the PAGE_SIZE records just before the cursor (one more was read).
        records.remove(0);
    }
    records.truncate(PAGE_SIZE as usize);
    let searching = filter.q.is_some();
    let (next, previous) = match (searching, records.first(), records.last()) {
        (true, Some(_), Some(_)) => (
            (full && page < SEARCH_PAGES).then(|| bq.filter.query_string(Some(("page", page + 1)))),
            (page > 1).then(|| bq.filter.query_string(Some(("page", page - 1)))),
        ),
        (false, Some(first), Some(last)) => (
            (full || backwards).then(|| bq.filter.query_string(Some(("after", last.id)))),
            ((backwards && full) || filter.after_id.is_some())
                .then(|| bq.filter.query_string(Some(("before", first.id)))),
        ),
        _ => (None, None),
    };
    let more_matches = searching && full && next.is_none();
    let later_page = previous.is_some();
    let first = bq.filter.query_string(None);
    let order = bq.filter.order()?;
    let matching = msvc::count(&s.pool, &filter, COUNT_CAP).await?;
    let count = if matching >= COUNT_CAP {
        format!("More than {} records match", COUNT_CAP - 1)
    } else {
        format!(
            "{matching} record{} match{}",
            if matching == 1 { "" } else { "s" },
            if matching == 1 { "es" } else { "" }
        )
    };
    let shown = match (searching, records.len()) {
        (_, 0) => String::new(),
        (true, n) => {
            let from = (page - 1) * PAGE_SIZE + 1;
            format!(
                "{count}; showing {from}–{} ({})",
                from + n as i64 - 1,
                bq.filter.order()?
            )
        }
        (false, _) => format!("{count}; showing {}", bq.filter.order()?),
    };
    let items: Vec<Item> = records.into_iter().map(|m| item(m, &clock)).collect();
    let memory_empty = msvc::is_empty(&s.pool).await?;
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
        loaded: bq
            .loaded
            .as_deref()
            .and_then(|n| n.parse::<usize>().ok())
            .map(|n| {
                format!(
                    "Loaded the sample history: {n} past incidents, each worked through to Learn,                      with their lessons, dead ends and root causes below. Their proposals were                      closed, so the review queue holds only your team's."
                )
            }),
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
        previous,
        later_page,
        first,
        more_matches,
        shown,
        order,
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

/// A curation form (supersede, retract) on memory `id`: the id parsed, the reviewer role
/// checked, then `write`; the answer is the record's page, or that page again with the message.
async fn curate<T, W>(
    s: &AppState,
    user: &CurrentUser,
    headers: &HeaderMap,
    id: &str,
    what: &str,
    write: impl FnOnce(i64) -> W,
) -> Result<Response, PageError>
where
    W: Future<Output = Result<T, AppError>>,
{
    let id = parse_mem_id(id)?;
    let result = match user.require(Role::Reviewer, what) {
        Ok(()) => write(id).await,
        Err(e) => Err(e),
    };
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
    let (pool, name) = (&s.pool, &user.0.name);
    let supersede = |id| async move {
        let by = parse_mem_id(f.by.trim()).map_err(|_| {
            ValidationError::new("by", "give the id of the newer record, e.g. MEM-42")
        })?;
        msvc::supersede(pool, name, id, by, f.reason.trim()).await
    };
    curate(&s, &user, &headers, &id, "superseding a memory", supersede).await
}

pub(super) async fn retract_submit(
    State(s): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    PageForm(f): PageForm<CurateForm>,
) -> Result<Response, PageError> {
    let (pool, name) = (&s.pool, &user.0.name);
    let retract = |id| async move {
        let reason = required_text("reason", &f.reason, 2000)?;
        msvc::retract(pool, name, id, &reason).await
    };
    curate(&s, &user, &headers, &id, "retracting a memory", retract).await
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
        let prev = msvc::get(&s.pool, old).await?;
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
