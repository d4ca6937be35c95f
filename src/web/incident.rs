//! The incident page (the command center): its page struct, its builder, its cached copy, the
//! re-render after a refused form, and the resolve and reopen forms.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::auth::CurrentUser;
use super::errors::{PageError, PageForm};
use super::forms::{KeptInput, ResolveForm, VersionForm};
use super::layout::Layout;
use super::page_cache::{
    RenderedPage, not_modified, not_modified_response, page_etag, with_validator,
};
use super::view::{Clock, NextStep, Step, next_step, stepper};
use super::{AppState, incident_id};
use crate::domain::recalled::{RecalledGroups, group_recalled};
use crate::domain::{Incident, IncidentId, Resolution, TimelineEvent, Transition};
use crate::error::AppError;
use crate::services::workflow::{self, TransitionInput};
use crate::store::users::User;

type PageResult = Result<Response, PageError>;

/// What the incident page says while its recall is computed in the background (the first view
/// of a new incident, or the first after its evidence changed): a view never waits for recall.
pub const RECALL_PENDING: &str = "Organizational memory is being searched for this incident: reload in a moment for what it recalls";

#[derive(Clone)]
struct Event {
    at: String,
    event: TimelineEvent,
}

/// The incident page. Each panel a teammate's change can alter is a block of its template, so
/// the live page re-renders that panel alone (`as_head()`, `as_observations()`, …; see
/// [`super::live::panels`]).
#[derive(Template, WebTemplate)]
#[template(
    path = "incidents/show.html",
    blocks = ["head", "next", "summary", "observations", "copilot", "resolve", "memory", "timeline"]
)]
pub(super) struct ShowPage {
    layout: Layout,
    incident: Incident,
    opened: String,
    resolved: String,
    /// "Age" while the incident is worked, "Resolved after" once resolved (it stops counting).
    age_label: &'static str,
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
    /// Whether the recall is whole (its matches by meaning were not still being computed): only
    /// such a page is kept by [`cached_page`].
    recall_whole: bool,
    /// The evidence form's body limit, bytes (`data-max-bytes`: app.js refuses a bigger paste or
    /// file before sending it, keeping the input).
    evidence_limit: usize,
    /// The same limit for people (`50 MiB`).
    evidence_limit_text: String,
    /// Whether the Prometheus query form is offered (a source is configured and responder
    /// queries are on).
    prometheus_form: bool,
    /// After a 409: the state changes the stale page missed.
    changed_since: Vec<Event>,
    /// The closed action vocabulary `(kind, label)` for the propose form.
    action_kinds: Vec<(&'static str, &'static str)>,
    /// The id of the newest timeline event shown (0 for none): the live page's stream starts
    /// after it, so a change made while the page loaded is not missed.
    last_event_id: i64,
    /// The content version of `live.js`.
    live_js_v: String,
}

impl ShowPage {
    /// The incident version the page shows (what its forms carry).
    pub(super) fn version(&self) -> i64 {
        self.incident.version
    }

    /// The id of the newest timeline event the page shows (0 for none).
    pub(super) fn last_event_id(&self) -> i64 {
        self.last_event_id
    }
}

/// The incident's age as its page shows it: since it was opened while it is being worked; once
/// resolved, how long it took, which no longer grows (issue #49).
fn incident_age(incident: &Incident) -> (&'static str, String) {
    match incident.resolved_at {
        Some(resolved) if incident.state != crate::domain::IncidentState::Investigating => (
            "Resolved after",
            super::view::age(&incident.opened_at, &resolved),
        ),
        _ => (
            "Age",
            super::view::age(&incident.opened_at, &jiff::Timestamp::now()),
        ),
    }
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
    /// The incident's own observations it was matched through: for each failure mode it
    /// shares with the incident, the most salient observation carrying it (`OBS-12
    /// (connection_leak)`), joined; empty when it shares none.
    pub via: String,
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
    /// The query the app ran to get it and the link to its result at the source (Prometheus's
    /// graph page), when it came from such a query; the URL is `http(s)` or absent.
    pub query_link: Option<(String, Option<String>)>,
}

/// An observation's query link (`data.query_link`, written only for a query the app ran): the
/// query, and its URL when that is an `http(s)` link.
fn query_link_of(o: &crate::domain::memory::MemoryRecord) -> Option<(String, Option<String>)> {
    let l = o.data.get("query_link")?;
    let query = l.get("query")?.as_str()?.to_string();
    let url = l
        .get("url")
        .and_then(|u| u.as_str())
        .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
        .map(str::to_string);
    Some((query, url))
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
        let query_link = query_link_of(o);
        let view = || ObservationView {
            reference: o.reference(),
            text: clock.localize(&o.text),
            links: links.clone(),
            query_link: query_link.clone(),
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

    /// Runs `write`, a service call given the incident version the page showed (`version`, which
    /// the service checks inside its write transaction); done, a redirect to
    /// `/incidents/{id}{then}` (`#copilot`, `/postmortem`); a 4xx (409 on a stale page) renders
    /// the incident page again with the message and `kept`, what the user typed.
    pub(super) async fn write<T>(
        &self,
        version: Option<i64>,
        mut kept: KeptInput,
        then: &str,
        write: impl std::future::Future<Output = Result<T, AppError>>,
    ) -> PageResult {
        kept.based_on = version;
        match write.await {
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
    let page = build_page(state, user, headers, id, kept, error, None).await?;
    Ok(page.into_response())
}

/// What a stale page missed, for the 409 re-render: the state changes after version `based_on`
/// (version `v` is the incident after `v - 1` transitions), or the last three events when the
/// form carried no version.
fn changes_since(timeline: &[Event], based_on: Option<i64>) -> Vec<Event> {
    const TRANSITIONS: [Transition; 5] = [
        Transition::Resolve,
        Transition::Reopen,
        Transition::DraftPostmortem,
        Transition::Confirm,
        Transition::Learn,
    ];
    let is_transition = |e: &&Event| TRANSITIONS.iter().any(|t| t.as_str() == e.event.kind);
    match based_on {
        Some(v) => timeline
            .iter()
            .filter(is_transition)
            .skip(usize::try_from(v.saturating_sub(1)).unwrap_or(0))
            .cloned()
            .collect(),
        None => timeline.iter().rev().take(3).rev().cloned().collect(),
    }
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
    // Weak matches (a couple of common words, or meaning under chance) are marked and come
    // after the strong ones in each list, so they take no place a strong one could have.
    let weak = |r: &crate::memory::recall::Recalled| {
        crate::domain::recalled::is_weak_match(&crate::domain::recalled::Shared {
            failure_modes: r.why.tags.len(),
            services: r.why.services.len(),
            action_kinds: r.why.action_kinds.len(),
            words: r.why.matched_terms.len(),
            meaning: r
                .why
                .cosine
                .is_some_and(|c| recalled.recall.chance.is_none_or(|f| c >= f)),
            marked_weak: r.marks.contains(&"weak match"),
        })
    };
    let mut ordered: Vec<&crate::memory::recall::Recalled> =
        recalled.recall.results.iter().collect();
    ordered.sort_by_key(|r| weak(r));
    let groups = group_recalled(ordered, |r| {
        (r.memory.kind, r.memory.incident_id.as_deref())
    });
    // The incident's observations come most salient first: the first with a tag speaks for it.
    let via = |r: &crate::memory::recall::Recalled| -> String {
        r.why
            .tags
            .iter()
            .filter_map(|t| {
                let o = recalled
                    .observations
                    .iter()
                    .find(|o| o.failure_modes.contains(t))?;
                Some(format!("{} ({t})", o.reference()))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    // The incident id is shown as a link before the text: the text does not repeat it.
    let text_of = |m: &crate::domain::memory::MemoryRecord| {
        let id = m.incident_id.as_deref().unwrap_or_default();
        clock.localize(crate::domain::recalled::after_incident_id(&m.text, id))
    };
    let item = |r: &crate::memory::recall::Recalled| RecalledItem {
        id: r.memory.id,
        incident_id: r.memory.incident_id.clone().unwrap_or_default(),
        kind: r.memory.kind.to_string(),
        text: text_of(&r.memory),
        why: super::memory_pages::why_text(&r.why),
        via: via(r),
        marks: {
            let mut marks = r.marks.clone();
            if weak(r) && !marks.contains(&"weak match") {
                marks.push("weak match");
            }
            marks.join(", ")
        },
    };
    let dead_end = |m: &crate::domain::memory::MemoryRecord| RecalledItem {
        id: m.id,
        incident_id: m.incident_id.clone().unwrap_or_default(),
        kind: m.kind.to_string(),
        text: text_of(m),
        why: String::new(),
        via: String::new(),
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

/// The stepper for this viewer, with Confirm disabled when they edited the draft last or the
/// draft names no trigger, and whether they may confirm.
fn confirm_steps(
    state: &AppState,
    user: &User,
    incident: &Incident,
    draft: Option<&crate::store::postmortems::StoredPostmortem>,
) -> (Vec<Step>, bool) {
    use crate::domain::ConfirmRefusal;
    let mut steps = stepper(incident.state, user.role);
    let policy = state.settings.confirm_policy();
    let refusal = match draft {
        Some(d) => policy.check_draft(user.role, &user.name, &d.postmortem, &d.edited_by),
        None => policy.check(user.role, &user.name, None),
    }
    .err();
    let may_confirm = refusal.is_none();
    let why = match refusal {
        Some(ConfirmRefusal::OwnEdit) => {
            Some("You edited the draft last: another reviewer must confirm it")
        }
        Some(ConfirmRefusal::NoTrigger) => {
            Some("The draft does not say what set the incident off: write its trigger first")
        }
        Some(ConfirmRefusal::NeedsReviewer) | None => None,
    };
    if let Some(why) = why
        && let Some(step) = steps
            .iter_mut()
            .find(|s| s.action == Some(Transition::Confirm) && s.disabled_reason.is_none())
    {
        step.disabled_reason = Some(why.into());
    }
    (steps, may_confirm)
}

/// Everything the incident page shows, with the status it is served with: the recall kept at
/// the memory generation of the incident's page state
/// ([`super::page_cache::RenderedPages::stamp`]), or none yet while it is computed in the
/// background.
pub(super) async fn build_page(
    state: &AppState,
    user: &User,
    headers: &HeaderMap,
    id: &IncidentId,
    kept: KeptInput,
    error: Option<(StatusCode, String)>,
    notice: Option<String>,
) -> Result<(StatusCode, ShowPage), PageError> {
    let stamp = state.pages.stamp(&state.pool, id).await?;
    let crate::services::incidents::IncidentPage {
        incident,
        timeline: events,
        observations,
        evidence,
        mut investigation,
        recalled,
        draft,
    } = crate::services::incidents::page(
        &state.pool,
        &state.memory,
        id,
        (&stamp.epoch, stamp.generation),
    )
    .await?;
    let clock = Clock::for_viewer(Some(user), headers);
    let (status, error) = match error {
        Some((s, m)) => (s, Some(m)),
        None => (StatusCode::OK, None),
    };
    let (participants, timeline) = timeline_of(events, &clock);
    let last_event_id = timeline.last().map_or(0, |e| e.event.id);
    let changed_since = if status == StatusCode::CONFLICT {
        changes_since(&timeline, kept.based_on)
    } else {
        Vec::new()
    };
    let observation_groups = group_observations(id, &observations, &clock);
    if let Some(view) = investigation.as_mut() {
        for h in &mut view.hypotheses {
            h.statement = clock.localize(&h.statement);
        }
    }
    let (
        RecalledGroups {
            similar,
            dead_ends,
            rules,
        },
        memory_notice,
        recall_whole,
    ) = match &recalled {
        Some(recalled) => (
            bucket_recalled(recalled, &clock),
            recalled.recall.notice.clone(),
            !recalled.recall.vectors_pending,
        ),
        None => (
            RecalledGroups {
                similar: Vec::new(),
                dead_ends: Vec::new(),
                rules: Vec::new(),
            },
            Some(RECALL_PENDING.to_string()),
            false,
        ),
    };
    let (steps, may_confirm) = confirm_steps(state, user, &incident, draft.as_ref());
    let open_recommendations = investigation.as_ref().map_or(0, |i| {
        i.recommendations
            .iter()
            .filter(|r| {
                r.status == crate::domain::action::RecommendationStatus::Proposed
                    || (r.status == crate::domain::action::RecommendationStatus::Approved
                        && r.verdict.is_none())
            })
            .count()
    });
    let resolved_by_action = investigation.as_ref().is_some_and(|i| {
        i.recommendations
            .iter()
            .any(|r| r.verdict.as_deref() == Some("resolved"))
    });
    let next = next_step(
        incident.state,
        !evidence.is_empty(),
        investigation.is_some(),
        open_recommendations,
        resolved_by_action,
        may_confirm,
    );
    let mut incident = incident;
    incident.summary = incident.summary.map(|text| clock.localize(&text));
    let page = ShowPage {
        layout: Layout::new(Some(user), format!("{} · {}", incident.id, incident.title))
            .with_current("incidents"),
        opened: clock.fmt(&incident.opened_at),
        resolved: clock.fmt_opt(&incident.resolved_at),
        age_label: incident_age(&incident).0,
        age: incident_age(&incident).1,
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
        recall_whole,
        evidence_limit: state.settings.max_evidence_bytes,
        evidence_limit_text: super::view::mebibytes(state.settings.max_evidence_bytes),
        changed_since,
        action_kinds: crate::domain::ActionKind::ALL
            .iter()
            .map(|k| (k.as_str(), k.label()))
            .collect(),
        prometheus_form: state
            .prometheus
            .as_ref()
            .is_some_and(|p| p.config().responder_queries),
        last_event_id,
        live_js_v: super::assets::version("live.js"),
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
    // Boxed, as in `cached_page`: a render's future is large, and a view that needs none
    // (a 304, a cached copy) should not carry or move it.
    let page = Box::pin(build_page(
        &state,
        &user,
        &headers,
        &id,
        KeptInput::default(),
        None,
        notice,
    ))
    .await?;
    Ok(page.into_response())
}

/// The incident page for a plain view (no input kept, no error, no notice), from
/// [`super::page_cache::RenderedPages`] when nothing it shows has changed, and 304 Not
/// Modified when the browser's copy (`If-None-Match`) is current. With the incident's stamp in
/// memory and the user known, neither answer reads the database.
async fn cached_page(
    state: &AppState,
    user: &User,
    headers: &HeaderMap,
    id: &IncidentId,
) -> PageResult {
    let stamp = state.pages.stamp(&state.pool, id).await?;
    let zone = Clock::zone_name_for(Some(user), headers);
    let minute = jiff::Timestamp::now().as_second() / 60;
    let key = format!(
        "{id}|{}|{}|{}|{}|{}|{}|{zone}|{minute}",
        stamp.version, stamp.revision, stamp.epoch, stamp.generation, user.name, user.role
    );
    let etag = page_etag(&key);
    if not_modified(headers, &etag) {
        return Ok(not_modified_response(etag));
    }
    let page = state
        .pages
        .get_or_render(key, async {
            // Boxed: the render's future (database reads, recall) is many kilobytes, and
            // inline it would make every view's future that size, moved on every request,
            // the 304s' too (issue #56: the page's 304 cost more than the JSON's).
            let (status, page) = Box::pin(build_page(
                state,
                user,
                headers,
                id,
                KeptInput::default(),
                None,
                None,
            ))
            .await?;
            let html = axum::body::Bytes::from(page.render().map_err(|e| {
                PageError(AppError::Internal(anyhow::anyhow!("incident page: {e}")))
            })?);
            Ok(RenderedPage {
                status,
                html,
                whole: page.recall_whole,
            })
        })
        .await?;
    let response = (page.status, axum::response::Html(page.html.clone())).into_response();
    if page.status == StatusCode::OK && page.whole {
        Ok(with_validator(response, etag))
    } else {
        Ok(response)
    }
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
                based_on: version,
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
