//! Server-rendered pages besides the incident page (askama): sign-in, profile, the incident list
//! and the Open incident form. Every page works without JavaScript; forms POST and redirect with
//! 303, or re-render with the input and a 422 on a validation error.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;

use super::AppState;
use super::api::ListQuery;
use super::auth::{self, CurrentUser};
use super::errors::{PageError, PageForm};
use super::layout::Layout;
use super::view::Clock;
use crate::domain::{Incident, IncidentState, NewIncident, Severity};
use crate::error::AppError;
use crate::services::workflow;
use crate::store::incidents;

type PageResult = Result<Response, PageError>;

#[derive(Template, WebTemplate)]
#[template(path = "signin.html")]
struct SigninPage {
    layout: Layout,
    next: String,
    name: String,
    error: Option<String>,
    first_run: bool,
    /// Arrived here by signing out: the page says so.
    signed_out: bool,
}

#[derive(Deserialize, Default)]
pub(super) struct NextQuery {
    #[serde(default)]
    next: String,
    /// Set by the sign-out redirect (`?signed_out=1`).
    #[serde(default)]
    signed_out: Option<String>,
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
    let first_run = crate::services::users::count(&state.pool).await? == 0;
    Ok(SigninPage {
        layout: Layout::new(None, "Sign in"),
        next: safe_next(&q.next),
        name: String::new(),
        error: None,
        first_run,
        signed_out: q.signed_out.is_some(),
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
                signed_out: false,
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
                signed_out: false,
            },
        )
            .into_response()),
        Err(e) => Err(e.into()),
    }
}

/// Ends the session and clears what the browser kept of this site's pages (`Clear-Site-Data:
/// "cache"`, W3C Clear Site Data §3.1): the incident pages may be kept to be revalidated
/// (`super::page_cache::REVALIDATE`), and after sign-out Back must not show one.
pub(super) async fn signout(session: Session) -> PageResult {
    auth::sign_out(&session).await?;
    let mut res = Redirect::to("/signin?signed_out=1").into_response();
    res.headers_mut().insert(
        axum::http::HeaderName::from_static("clear-site-data"),
        axum::http::HeaderValue::from_static("\"cache\""),
    );
    Ok(res)
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
    crate::services::users::set_time_zone(
        &state.pool,
        user.id,
        Some(zone).filter(|z| !z.is_empty()),
    )
    .await?;
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
    let (incidents, next) =
        crate::services::incidents::page_of(&state.pool, filter, PAGE_SIZE).await?;
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
        services: crate::services::incidents::services(&state.pool).await?,
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
