//! Server-rendered pages (askama). Every page works without JavaScript; forms POST and redirect
//! with 303, or re-render with the input and a 422 on a validation error.
//!
//! Long because the incident page is most of it: its page struct, its builder and its cached copy
//! (`RenderedPages`), beside the sign-in and profile pages.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;

use super::api::ListQuery;
use super::auth::{self, CurrentUser};
use super::errors::{PageError, PageForm};
use super::layout::Layout;
use super::view::{Clock, NextStep, Step, next_step, stepper};
use super::{AppState, incident_id};
use crate::domain::recalled::{RecalledGroups, group_recalled};
use crate::domain::{
    Incident, IncidentId, IncidentState, NewIncident, Resolution, Severity, TimelineEvent,
    Transition,
};
use crate::error::AppError;
use crate::services::workflow::{self, TransitionInput};
use crate::store::incidents;
use crate::store::users::{self, User};

type PageResult = Result<Response, PageError>;

#[derive(Template, WebTemplate)]
#[template(path = "signin.html")]
struct SigninPage {
    layout: Layout,
    next: String,
    name: String,
    error: Option<String>,
    first_run: bool,
}

#[derive(Deserialize, Default)]
pub(super) struct NextQuery {
    #[serde(default)]
    next: String,
}

/// Only same-site relative paths are allowed as a post-sign-in destination.
fn safe_next(next: &str) -> String {
    if next.starts_with('/') && !next.starts_with("//") && !next.contains('\\') {
        next.to_string()
    } else {
        "/incidents".to_string()
    }
}

pub(super) async fn signin_page(
    State(state): State<AppState>,
    Query(q): Query<NextQuery>,
) -> PageResult {
    let first_run = users::count(&state.pool).await? == 0;
    Ok(SigninPage {
        layout: Layout::new(None, "Sign in"),
        next: safe_next(&q.next),
        name: String::new(),
        error: None,
        first_run,
    }
    .into_response())
}

#[derive(Deserialize)]
pub(super) struct SigninForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    next: String,
}

pub(super) async fn signin_submit(
    State(state): State<AppState>,
    session: Session,
    super::limits::ClientAddress(address): super::limits::ClientAddress,
    PageForm(form): PageForm<SigninForm>,
) -> PageResult {
    if let Err(e) = state.limits.signin(&form.name, address) {
        let secs = e.retry_after_secs().unwrap_or(1);
        let mut res = (
            StatusCode::TOO_MANY_REQUESTS,
            SigninPage {
                layout: Layout::new(None, "Sign in"),
                next: safe_next(&form.next),
                name: form.name,
                error: Some(format!("Too many sign-in attempts; try again in {secs} s.")),
                first_run: false,
            },
        )
            .into_response();
        res.headers_mut()
            .insert(axum::http::header::RETRY_AFTER, secs.into());
        return Ok(res);
    }
    match auth::sign_in(&state.pool, &session, &form.name, &form.password).await {
        Ok(_) => Ok(Redirect::to(&safe_next(&form.next)).into_response()),
        Err(AppError::Unauthenticated) => Ok((
            StatusCode::UNAUTHORIZED,
            SigninPage {
                layout: Layout::new(None, "Sign in"),
                next: safe_next(&form.next),
                name: form.name,
                error: Some("Unknown name or wrong password.".into()),
                first_run: false,
            },
        )
            .into_response()),
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn signout(session: Session) -> PageResult {
    auth::sign_out(&session).await?;
    Ok(Redirect::to("/signin").into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "profile.html")]
struct ProfilePage {
    layout: Layout,
    time_zone: String,
    browser_zone: String,
    error: Option<String>,
}

pub(super) async fn profile_page(CurrentUser(user): CurrentUser, headers: HeaderMap) -> PageResult {
    let browser = Clock::for_viewer(None, &headers).zone_name;
    Ok(ProfilePage {
        layout: Layout::new(Some(&user), "Profile").with_current("profile"),
        time_zone: user.time_zone.clone().unwrap_or_default(),
        browser_zone: browser,
        error: None,
    }
    .into_response())
}

#[derive(Deserialize)]
pub(super) struct ProfileForm {
    #[serde(default)]
    time_zone: String,
}

pub(super) async fn profile_submit(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    PageForm(form): PageForm<ProfileForm>,
) -> PageResult {
    let zone = form.time_zone.trim();
    if !zone.is_empty() && !super::view::is_known_zone(zone) {
        let page = ProfilePage {
            layout: Layout::new(Some(&user), "Profile").with_current("profile"),
            time_zone: zone.to_string(),
            browser_zone: Clock::for_viewer(None, &headers).zone_name,
            error: Some(format!(
                "'{zone}' is not a known time zone; use an IANA name such as Europe/Paris or America/New_York, or leave empty to use your browser's"
            )),
        };
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
    }
    users::set_time_zone(&state.pool, user.id, Some(zone).filter(|z| !z.is_empty())).await?;
    state.users.forget(user.id);
    Ok(Redirect::to("/profile").into_response())
}

struct Row {
    incident: Incident,
    opened: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "incidents/list.html")]
struct ListPage {
    layout: Layout,
    rows: Vec<Row>,
    services: Vec<String>,
    states: Vec<(&'static str, &'static str)>,
    severities: Vec<&'static str>,
    sorts: Vec<(&'static str, &'static str)>,
    q: ListQuery,
    zone: String,
    /// Query string of the next page, if there is one.
    next: Option<String>,
    /// Whether this is a later page (shows "first page").
    later_page: bool,
    /// Query string of the first page with the same filters.
    first: String,
}

/// Incidents per page on the list page.
const PAGE_SIZE: i64 = 25;

pub(super) async fn list_page(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    Query(mut q): Query<ListQuery>,
) -> PageResult {
    if q.state.trim().is_empty() {
        // The list opens on the incidents still being worked on; the filter says so.
        q.state = "active".into();
    }
    let filter = q.to_filter()?;
    let clock = Clock::for_viewer(Some(&user), &headers);
    let (incidents, next) = super::api::page_of(&state.pool, filter, PAGE_SIZE).await?;
    let rows = incidents
        .into_iter()
        .map(|i| Row {
            opened: clock.fmt(&i.opened_at),
            incident: i,
        })
        .collect();
    let keep = |after: Option<&str>| {
        let mut pairs: Vec<(&str, &str)> = vec![
            ("state", q.state.as_str()),
            ("service", q.service.as_str()),
            ("severity", q.severity.as_str()),
            ("q", q.q.as_str()),
            ("sort", q.sort.as_str()),
        ];
        pairs.retain(|(_, v)| !v.is_empty());
        if let Some(a) = after {
            pairs.push(("after", a));
        }
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    };
    let mut states = vec![("active", "active (not learned)"), ("all", "any state")];
    states.extend(IncidentState::ALL.iter().map(|s| (s.as_str(), s.label())));
    Ok(ListPage {
        layout: Layout::new(Some(&user), "Incidents").with_current("incidents"),
        rows,
        services: incidents::services(&state.pool).await?,
        states,
        severities: Severity::ALL.iter().map(|s| s.as_str()).collect(),
        sorts: incidents::IncidentSort::ALL
            .iter()
            .map(|s| (s.as_str(), s.label()))
            .collect(),
        next: next.as_deref().map(|n| keep(Some(n))),
        later_page: !q.after.is_empty(),
        first: keep(None),
        q,
        zone: clock.zone_name,
    }
    .into_response())
}

#[derive(Template, WebTemplate)]
#[template(path = "incidents/new.html")]
struct NewPage {
    layout: Layout,
    form: NewForm,
    severities: Vec<&'static str>,
    error: Option<String>,
}

#[derive(Deserialize, Default)]
pub(super) struct NewForm {
    #[serde(default)]
    title: String,
    #[serde(default)]
    service: String,
    #[serde(default)]
    severity: String,
    #[serde(default)]
    description: String,
}

pub(super) async fn new_page(CurrentUser(user): CurrentUser) -> PageResult {
    Ok(NewPage {
        layout: Layout::new(Some(&user), "Open an incident").with_current("new"),
        form: NewForm {
            severity: "SEV3".into(),
            ..Default::default()
        },
        severities: Severity::ALL.iter().map(|s| s.as_str()).collect(),
        error: None,
    }
    .into_response())
}

pub(super) async fn create_submit(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    PageForm(form): PageForm<NewForm>,
) -> PageResult {
    match NewIncident::parse(
        &form.title,
        &form.service,
        &form.severity,
        &form.description,
    ) {
        Ok(new) => {
            let incident = workflow::open_incident(&state.pool, &user.name, &new).await?;
            Ok(Redirect::to(&format!("/incidents/{}", incident.id)).into_response())
        }
        Err(e) => Ok((
            StatusCode::UNPROCESSABLE_ENTITY,
            NewPage {
                layout: Layout::new(Some(&user), "Open an incident").with_current("new"),
                form,
                severities: Severity::ALL.iter().map(|s| s.as_str()).collect(),
                error: Some(e.to_string()),
            },
        )
            .into_response()),
    }
}

struct Event {
    at: String,
    event: TimelineEvent,
}

#[derive(Template, WebTemplate)]
#[template(path = "incidents/show.html")]
struct ShowPage {
    layout: Layout,
    incident: Incident,
    opened: String,
    resolved: String,
    age: String,
    participants: Vec<String>,
    steps: Vec<Step>,
    next: NextStep,
    timeline: Vec<Event>,
    zone: String,
    kept: KeptInput,
    error: Option<String>,
    notice: Option<String>,
    observation_groups: Vec<ObservationGroup>,
    evidence: Vec<crate::store::evidence::EvidenceMeta>,
    investigation: Option<crate::services::investigation::InvestigationView>,
    similar: Vec<RecalledItem>,
    dead_ends: Vec<RecalledItem>,
    rules: Vec<RecalledItem>,
    memory_notice: Option<String>,
    /// The evidence form's body limit, bytes (`data-max-bytes`: app.js refuses a bigger paste or
    /// file before sending it, keeping the input).
    evidence_limit: usize,
    /// The same limit for people (`50 MiB`).
    evidence_limit_text: String,
    /// Whether the Prometheus query form is offered (a source is configured and responder
    /// queries are on).
    prometheus_form: bool,
}

/// A recalled memory as shown in the side lists of the incident page.
pub struct RecalledItem {
    /// Memory id.
    pub id: i64,
    /// Source incident.
    pub incident_id: String,
    /// Kind.
    pub kind: String,
    /// Text.
    pub text: String,
    /// Why recalled.
    pub why: String,
    /// stale / superseded / contradicted.
    pub marks: String,
}

/// Observations sharing a failure mode, for the incident page.
pub struct ObservationGroup {
    /// Failure-mode tag, or `other`.
    pub tag: String,
    /// The tag's description from the catalogue.
    pub description: String,
    /// The observations.
    pub items: Vec<ObservationView>,
}

/// One observation with links to its lines.
pub struct ObservationView {
    /// Reference (`OBS-12`).
    pub reference: String,
    /// Statement.
    pub text: String,
    /// `(label, url)` per line range.
    pub links: Vec<(String, String)>,
}

/// Groups an incident's observations by failure mode (an observation with several tags appears
/// under each), most populated group first; untagged ones last under `other`. Times in the
/// statements are shown in `clock`'s zone ([`Clock::localize`]).
pub fn group_observations(
    incident: &IncidentId,
    obs: &[crate::domain::memory::MemoryRecord],
    clock: &Clock,
) -> Vec<ObservationGroup> {
    let mut groups: Vec<ObservationGroup> = Vec::new();
    for o in obs {
        let eid = o.data.get("evidence_id").and_then(|v| v.as_i64());
        let links: Vec<(String, String)> = o
            .data
            .get("line_ranges")
            .and_then(|v| v.as_array())
            .map(|rs| {
                rs.iter()
                    .filter_map(|r| Some((r.get("start")?.as_u64()?, r.get("end")?.as_u64()?)))
                    .take(8)
                    .filter_map(|(a, b)| {
                        let e = eid?;
                        let label = if a == b {
                            format!("line {a}")
                        } else {
                            format!("lines {a}–{b}")
                        };
                        Some((
                            label,
                            format!("/incidents/{incident}/evidence/{e}?from={a}&to={b}"),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let view = || ObservationView {
            reference: o.reference(),
            text: clock.localize(&o.text),
            links: links.clone(),
        };
        let tags: Vec<String> = if o.failure_modes.is_empty() {
            vec!["other".into()]
        } else {
            o.failure_modes.clone()
        };
        for t in tags {
            match groups.iter_mut().find(|g| g.tag == t) {
                Some(g) => g.items.push(view()),
                None => groups.push(ObservationGroup {
                    description: crate::evidence::failure_mode_description(&t)
                        .unwrap_or("Observations without a known failure signature.")
                        .to_string(),
                    tag: t,
                    items: vec![view()],
                }),
            }
        }
    }
    groups.sort_by_key(|g| (g.tag == "other", std::cmp::Reverse(g.items.len())));
    groups
}

/// The resolve form; `version` is the incident version the page showed.
#[derive(Deserialize, Default, Debug, Clone)]
pub struct ResolveForm {
    /// Summary.
    #[serde(default)]
    pub summary: String,
    /// Root cause.
    #[serde(default)]
    pub root_cause: String,
    /// Incident version the page was based on.
    #[serde(default)]
    pub version: Option<i64>,
}

/// A form that carries nothing but the incident version its page showed (reopen, investigate,
/// approve, draft, confirm, learn). As an extractor it reads an urlencoded body when there is one;
/// a post without a body (a script, an older page) carries no version and is not checked.
#[derive(Deserialize, Default, Debug, Clone, Copy)]
pub struct VersionForm {
    /// Incident version the page was based on.
    #[serde(default)]
    pub version: Option<i64>,
}

impl axum::extract::FromRequest<AppState> for VersionForm {
    type Rejection = PageError;

    async fn from_request(
        req: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        optional_form(req, state).await
    }
}

/// Reads an urlencoded form when the request carries one; a post without one (a script, an
/// older page) is `T::default()`.
///
/// # Errors
/// A form that does not parse (400), or one over the body limit (413).
pub(super) async fn optional_form<T: serde::de::DeserializeOwned + Default>(
    req: axum::extract::Request,
    state: &AppState,
) -> Result<T, PageError> {
    use axum::extract::FromRequest;
    let is_form = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Ok(T::default());
    }
    let PageForm(f) = PageForm::<T>::from_request(req, state).await?;
    Ok(f)
}

/// What the user typed into the incident page's forms, given back when a submit fails (409 on a
/// stale page, 422 on bad input), so nothing typed is lost.
#[derive(Debug, Default, Clone)]
pub struct KeptInput {
    /// The resolve form.
    pub resolve: ResolveForm,
    /// Evidence kind, source and pasted content.
    pub evidence: (String, String, String),
    /// Reject reason typed for one recommendation.
    pub reject: Option<(i64, String)>,
    /// Verdict and note chosen for one recommendation.
    pub verdict: Option<(i64, String, String)>,
    /// The Prometheus query form: query, start, end and step as typed.
    pub prometheus: [String; 4],
}

impl KeptInput {
    /// The reject reason kept for recommendation `rid` (empty if none).
    pub fn reject_reason(&self, rid: impl std::borrow::Borrow<i64>) -> &str {
        match &self.reject {
            Some((r, reason)) if r == rid.borrow() => reason,
            _ => "",
        }
    }

    /// The verdict note kept for recommendation `rid` (empty if none).
    pub fn verdict_note(&self, rid: impl std::borrow::Borrow<i64>) -> &str {
        match &self.verdict {
            Some((r, _, note)) if r == rid.borrow() => note,
            _ => "",
        }
    }

    /// Whether a verdict was chosen for recommendation `rid` in the failed submit.
    pub fn verdict_chosen(&self, rid: impl std::borrow::Borrow<i64>) -> bool {
        matches!(&self.verdict, Some((r, v, _)) if r == rid.borrow() && !v.is_empty())
    }

    /// Whether `value` was the verdict chosen for recommendation `rid`.
    pub fn verdict_is(&self, rid: impl std::borrow::Borrow<i64>, value: &str) -> bool {
        matches!(&self.verdict, Some((r, v, _)) if r == rid.borrow() && v == value)
    }

    /// Whether `kind` was the evidence kind chosen.
    pub fn evidence_kind_is(&self, kind: &str) -> bool {
        self.evidence.0 == kind
    }

    /// The evidence source typed.
    pub fn evidence_source(&self) -> &str {
        &self.evidence.1
    }

    /// The evidence pasted.
    pub fn evidence_content(&self) -> &str {
        &self.evidence.2
    }

    /// Field `i` of the Prometheus query form as typed (0 query, 1 start, 2 end, 3 step).
    pub fn prometheus_field(&self, i: usize) -> &str {
        self.prometheus
            .get(i)
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// Whether anything was typed into the resolve form.
    pub fn has_resolve(&self) -> bool {
        !self.resolve.summary.is_empty() || !self.resolve.root_cause.is_empty()
    }
}

/// A form post about one incident, from its page or a page of its steps: who sent it, with
/// which headers (the viewer's zone, should the page be rendered again) and the incident.
pub(super) struct IncidentPost<'a> {
    state: &'a AppState,
    user: &'a User,
    headers: &'a HeaderMap,
    /// The incident the URL names.
    pub(super) id: IncidentId,
}

impl<'a> IncidentPost<'a> {
    /// The post about the incident `id` names (a 404 for a malformed id).
    pub(super) fn new(
        state: &'a AppState,
        user: &'a User,
        headers: &'a HeaderMap,
        id: &str,
    ) -> Result<Self, AppError> {
        Ok(Self {
            state,
            user,
            headers,
            id: incident_id(id)?,
        })
    }

    /// Runs `write` once the incident version the page showed (`version`) is checked; done, a
    /// redirect to `/incidents/{id}{then}` (`#copilot`, `/postmortem`); a 4xx (409 on a stale
    /// page) renders the incident page again with the message and `kept`, what the user typed.
    pub(super) async fn write<T>(
        &self,
        version: Option<i64>,
        kept: KeptInput,
        then: &str,
        write: impl std::future::Future<Output = Result<T, AppError>>,
    ) -> PageResult {
        let result = async {
            workflow::ensure_version(&self.state.pool, &self.id, version).await?;
            write.await
        }
        .await;
        match result {
            Ok(_) => Ok(Redirect::to(&format!("/incidents/{}{then}", self.id)).into_response()),
            Err(e) => incident_error(self.state, self.user, self.headers, &self.id, e, kept).await,
        }
    }
}

/// Renders the incident page after a failed submit: a 4xx comes back as the page with the
/// message and the user's input (`kept`), with the error's status; a 5xx is the error page.
///
/// # Errors
/// Internal errors, and errors loading the page itself.
pub async fn incident_error(
    state: &AppState,
    user: &User,
    headers: &HeaderMap,
    id: &IncidentId,
    error: AppError,
    kept: KeptInput,
) -> PageResult {
    match error {
        AppError::Internal(e) => Err(AppError::Internal(e).into()),
        e => {
            let status = e.status();
            render_incident(
                state,
                user,
                headers,
                id,
                kept,
                Some((status, e.to_string())),
            )
            .await
        }
    }
}

/// Renders the incident page (the command center) for `user`, with `kept` input in its forms
/// and an optional error status and message.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown incident; database errors.
pub async fn render_incident(
    state: &AppState,
    user: &User,
    headers: &HeaderMap,
    id: &IncidentId,
    kept: KeptInput,
    error: Option<(StatusCode, String)>,
) -> PageResult {
    render_page(state, user, headers, id, kept, error, None).await
}

async fn render_page(
    state: &AppState,
    user: &User,
    headers: &HeaderMap,
    id: &IncidentId,
    kept: KeptInput,
    error: Option<(StatusCode, String)>,
    notice: Option<String>,
) -> PageResult {
    Ok(build_page(state, user, headers, id, kept, error, notice)
        .await?
        .into_response())
}

/// The timeline's participants in order of first appearance, and its events in the viewer's zone.
fn timeline_of(events: Vec<TimelineEvent>, clock: &Clock) -> (Vec<String>, Vec<Event>) {
    let mut participants: Vec<String> = Vec::new();
    for e in &events {
        if !participants.contains(&e.actor) {
            participants.push(e.actor.clone());
        }
    }
    let timeline: Vec<Event> = events
        .into_iter()
        .map(|mut e| {
            e.detail = clock.localize(&e.detail);
            Event {
                at: clock.fmt(&e.at),
                event: e,
            }
        })
        .collect();
    (participants, timeline)
}

/// The page's recall in the groups [`crate::domain::recalled::group_recalled`] makes, as the
/// page shows them (times in the viewer's zone); the dead ends are those of the incidents
/// recall ranks first ([`crate::memory::incident::IncidentRecall::dead_ends`]).
fn bucket_recalled(
    recalled: &crate::memory::incident::IncidentRecall,
    clock: &Clock,
) -> RecalledGroups<RecalledItem> {
    let groups = group_recalled(&recalled.recall.results, |r| {
        (r.memory.kind, r.memory.incident_id.as_deref())
    });
    let item = |r: &crate::memory::recall::Recalled| RecalledItem {
        id: r.memory.id,
        incident_id: r.memory.incident_id.clone().unwrap_or_default(),
        kind: r.memory.kind.to_string(),
        text: clock.localize(&r.memory.text),
        why: super::memory::why_text(&r.why),
        marks: r.marks.join(", "),
    };
    let dead_end = |m: &crate::domain::memory::MemoryRecord| RecalledItem {
        id: m.id,
        incident_id: m.incident_id.clone().unwrap_or_default(),
        kind: m.kind.to_string(),
        text: clock.localize(&m.text),
        why: String::new(),
        marks: [
            (m.validation == crate::domain::Validation::Superseded).then_some("superseded"),
            m.data.get("contradicted_by").map(|_| "contradicted"),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", "),
    };
    RecalledGroups {
        similar: groups.similar.into_iter().map(item).collect(),
        dead_ends: recalled.dead_ends.iter().map(dead_end).collect(),
        rules: groups.rules.into_iter().map(item).collect(),
    }
}

/// The stepper for this viewer, with Confirm disabled when they edited the draft last, and
/// whether they may confirm.
async fn confirm_steps(state: &AppState, user: &User, incident: &Incident) -> (Vec<Step>, bool) {
    let mut steps = stepper(incident.state, user.role);
    let last_editor = if incident.state == IncidentState::PostmortemDraft {
        crate::store::postmortems::get(&state.pool, incident.id.as_str())
            .await
            .ok()
            .map(|pm| pm.edited_by)
    } else {
        None
    };
    let refusal = (state.settings.confirm_policy())
        .check(user.role, &user.name, last_editor.as_deref())
        .err();
    let may_confirm = refusal.is_none();
    if refusal == Some(crate::domain::ConfirmRefusal::OwnEdit)
        && let Some(step) = steps
            .iter_mut()
            .find(|s| s.action == Some(Transition::Confirm) && s.disabled_reason.is_none())
    {
        step.disabled_reason =
            Some("You edited the draft last: another reviewer must confirm it".into());
    }
    (steps, may_confirm)
}

/// Everything the incident page shows, with the status it is served with.
async fn build_page(
    state: &AppState,
    user: &User,
    headers: &HeaderMap,
    id: &IncidentId,
    kept: KeptInput,
    error: Option<(StatusCode, String)>,
    notice: Option<String>,
) -> Result<(StatusCode, ShowPage), PageError> {
    let incident = incidents::get(&state.pool, id).await?;
    let clock = Clock::for_viewer(Some(user), headers);
    let events = incidents::timeline(&state.pool, id).await?;
    let (participants, timeline) = timeline_of(events, &clock);
    let (status, error) = match error {
        Some((s, m)) => (s, Some(m)),
        None => (StatusCode::OK, None),
    };
    let obs_filter = crate::store::memory::MemoryFilter {
        incident: Some(id.to_string()),
        kind: Some(crate::domain::MemoryKind::Observation),
        limit: Some(1000),
        ..Default::default()
    };
    let observations = crate::store::memory::list(&state.pool, &obs_filter).await?;
    let observation_groups = group_observations(id, &observations, &clock);
    let evidence = crate::store::evidence::list(&state.pool, id.as_str()).await?;
    let investigation = match crate::store::recommendations::latest_investigation(
        &state.pool,
        id.as_str(),
    )
    .await?
    {
        Some(i) => {
            let mut view =
                crate::services::investigation::view_investigation(&state.pool, i.id).await?;
            for h in &mut view.hypotheses {
                h.statement = clock.localize(&h.statement);
            }
            Some(view)
        }
        None => None,
    };
    let (obs_sorted, tags) =
        crate::services::investigation::incident_tags(&state.pool, &incident).await?;
    let recalled = crate::services::investigation::page_recall(
        &state.memory,
        &incident,
        &obs_sorted,
        &tags,
        30,
    )
    .await?;
    let RecalledGroups {
        similar,
        dead_ends,
        rules,
    } = bucket_recalled(&recalled, &clock);
    let memory_notice = recalled.recall.notice.clone();
    let (steps, may_confirm) = confirm_steps(state, user, &incident).await;
    let open_recommendations = investigation.as_ref().map_or(0, |i| {
        i.recommendations
            .iter()
            .filter(|r| r.status == "proposed" || (r.status == "approved" && r.verdict.is_none()))
            .count()
    });
    let next = next_step(
        incident.state,
        !evidence.is_empty(),
        investigation.is_some(),
        open_recommendations,
        may_confirm,
    );
    let mut incident = incident;
    incident.summary = incident.summary.map(|text| clock.localize(&text));
    let page = ShowPage {
        layout: Layout::new(Some(user), format!("{} · {}", incident.id, incident.title))
            .with_current("incidents"),
        opened: clock.fmt(&incident.opened_at),
        resolved: clock.fmt_opt(&incident.resolved_at),
        age: super::view::age(&incident.opened_at, &jiff::Timestamp::now()),
        participants,
        steps,
        next,
        incident,
        timeline,
        zone: clock.zone_name,
        kept,
        error,
        notice,
        observation_groups,
        evidence,
        investigation,
        similar,
        dead_ends,
        rules,
        memory_notice,
        evidence_limit: state.settings.max_evidence_bytes,
        evidence_limit_text: super::view::mebibytes(state.settings.max_evidence_bytes),
        prometheus_form: state
            .prometheus
            .as_ref()
            .is_some_and(|p| p.config().responder_queries),
    };
    Ok((status, page))
}

#[derive(Deserialize, Default)]
pub(super) struct ShowQuery {
    /// Set after a paste that was already there: the evidence that holds it.
    #[serde(default)]
    duplicate: Option<i64>,
}

pub(super) async fn show_page(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<ShowQuery>,
) -> PageResult {
    let id = incident_id(&id)?;
    if q.duplicate.is_none() {
        return cached_page(&state, &user, &headers, &id).await;
    }
    let notice = q.duplicate.map(|e| {
        format!("That content is already evidence #{e} on this incident (same SHA-256): nothing was added.")
    });
    render_page(
        &state,
        &user,
        &headers,
        &id,
        KeptInput::default(),
        None,
        notice,
    )
    .await
}

/// Incident pages as last rendered, most recently viewed kept, by a key that names everything
/// the page shows: the incident's version and revision and the memory's recall generation
/// ([`incidents::page_state`]), the viewer's name, role and time zone, and the minute (the page
/// shows ages). A view of an unchanged incident costs one indexed read, not a dozen queries
/// and a render. Each entry is filled once: views that miss together (every viewer at the turn
/// of a minute) wait for one render instead of each rendering (at 200 connections that herd
/// stalled the page for half a second each minute). Held in [`AppState`].
pub struct RenderedPages(std::sync::Mutex<lru::LruCache<String, std::sync::Arc<RenderedPage>>>);

/// One incident page as rendered, with the status it is served with; filled once.
type RenderedPage = tokio::sync::OnceCell<(StatusCode, axum::body::Bytes)>;

/// Incident pages kept by [`RenderedPages`] (each a few tens of kB). A page is keyed by the
/// minute it was rendered in, so only the pages viewed this minute are worth holding: 64 of
/// them. A larger cache fills with the last minutes' copies, which nobody asks for again, and
/// the heap grows while it does (`soak-bench` shows it)…
const RENDERED_PAGES: usize = 64;
/// …and the largest page kept, in bytes (a page with thousands of observations is rendered
/// each time rather than held), so the cache stays under 16 MB.
const RENDERED_PAGE_MAX: usize = 256 * 1024;

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
    fn pages(
        &self,
    ) -> std::sync::MutexGuard<'_, lru::LruCache<String, std::sync::Arc<RenderedPage>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The incident page for a plain view (no input kept, no error, no notice), from
/// [`RenderedPages`] when nothing it shows has changed.
async fn cached_page(
    state: &AppState,
    user: &User,
    headers: &HeaderMap,
    id: &IncidentId,
) -> PageResult {
    let (version, revision, epoch, generation) = incidents::page_state(&state.pool, id).await?;
    let zone = Clock::for_viewer(Some(user), headers).zone_name;
    let minute = jiff::Timestamp::now().as_second() / 60;
    let key = format!(
        "{id}|{version}|{revision}|{epoch}|{generation}|{}|{}|{zone}|{minute}",
        user.name, user.role
    );
    let cell = {
        let mut pages = state.pages.pages();
        match pages.get(&key) {
            Some(c) => std::sync::Arc::clone(c),
            None => {
                let c = std::sync::Arc::new(RenderedPage::new());
                pages.put(key.clone(), std::sync::Arc::clone(&c));
                c
            }
        }
    };
    let (status, html) = cell
        .get_or_try_init(|| async {
            let (status, page) =
                build_page(state, user, headers, id, KeptInput::default(), None, None).await?;
            let html = axum::body::Bytes::from(page.render().map_err(|e| {
                PageError(AppError::Internal(anyhow::anyhow!("incident page: {e}")))
            })?);
            Ok::<_, PageError>((status, html))
        })
        .await?
        .clone();
    if status != StatusCode::OK || html.len() > RENDERED_PAGE_MAX {
        state.pages.pages().pop(&key);
    }
    Ok((status, axum::response::Html(html)).into_response())
}

/// Runs a transition from a form based on the incident version the page showed; a 4xx outcome
/// (409 on a stale page) re-renders the incident page with the message and the input.
async fn transition_from_form(
    state: &AppState,
    user: &User,
    headers: &HeaderMap,
    id: &str,
    t: Transition,
    input: TransitionInput,
    form: ResolveForm,
) -> PageResult {
    let id = incident_id(id)?;
    let version = form.version;
    match workflow::transition_from(&state.pool, user, &id, t, input, version).await {
        Ok(_) => Ok(Redirect::to(&format!("/incidents/{id}")).into_response()),
        Err(e) => {
            let kept = KeptInput {
                resolve: form,
                ..Default::default()
            };
            incident_error(state, user, headers, &id, e, kept).await
        }
    }
}

pub(super) async fn resolve_submit(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    PageForm(form): PageForm<ResolveForm>,
) -> PageResult {
    match Resolution::parse(&form.summary, &form.root_cause) {
        Ok(r) => {
            let input = TransitionInput {
                resolution: Some(r),
            };
            transition_from_form(
                &state,
                &user,
                &headers,
                &id,
                Transition::Resolve,
                input,
                form,
            )
            .await
        }
        Err(e) => {
            let id = incident_id(&id)?;
            let kept = KeptInput {
                resolve: form,
                ..Default::default()
            };
            incident_error(&state, &user, &headers, &id, e.into(), kept).await
        }
    }
}

pub(super) async fn reopen_submit(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    form: VersionForm,
) -> PageResult {
    transition_from_form(
        &state,
        &user,
        &headers,
        &id,
        Transition::Reopen,
        TransitionInput::default(),
        ResolveForm {
            version: form.version,
            ..Default::default()
        },
    )
    .await
}
