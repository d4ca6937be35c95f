//! Chat channels, admin only: the pages (`/chat`, `/chat/{id}`) and the JSON API
//! (`/api/v1/chat/channels`). A channel's secrets (a webhook URL, a Matrix access token) are
//! taken once and never shown again; "send a test message" answers with what the chat service
//! said; a channel's page lists its failed messages with a retry button. Other roles get a 403.

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::auth::CurrentUser;
use super::errors::{ApiError, ApiJson, PageError, PageForm};
use super::examples;
use super::layout::Layout;
use super::schema::ChannelPath;
use super::view::Clock;
use crate::domain::Role;
use crate::domain::chat::{ChannelKind, ChatEvent};
use crate::error::AppError;
use crate::services::chat::{self as svc, ChannelInput, RoutingUpdate, TestOutcome};
use crate::store::chat::{Channel, OutboxRow};

const WHAT: &str = "managing chat channels";

fn parse_id(id: &str) -> Result<i64, AppError> {
    id.parse::<i64>()
        .map_err(|_| AppError::NotFound(format!("chat channel {id}")))
}

#[utoipa::path(
    post,
    path = "/api/v1/chat/channels",
    operation_id = "createChatChannel",
    summary = "Create a chat channel (admins)",
    tag = "chat",
    request_body(content = ChannelInput, description = "Kind, destination and secret, routing. The secret is never shown again.",
                 example = json!(examples::create_chat_channel())),
    responses(
        (status = 201, description = "The channel, without its secrets", body = Channel,
         example = json!(examples::chat_channel())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_create(
    State(state): State<AppState>,
    user: CurrentUser,
    ApiJson(body): ApiJson<ChannelInput>,
) -> Result<impl IntoResponse, ApiError> {
    user.require(Role::Admin, WHAT)?;
    let c = svc::create_channel(&state.pool, &user.0.name, &body).await?;
    Ok((StatusCode::CREATED, Json(c)))
}

/// `GET /api/v1/chat/channels`.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = ChatChannelList)]
pub(super) struct List {
    /// Every channel, without secrets.
    channels: Vec<Channel>,
}

#[utoipa::path(
    get,
    path = "/api/v1/chat/channels",
    operation_id = "listChatChannels",
    summary = "List chat channels (admins)",
    tag = "chat",
    responses(
        (status = 200, description = "Every channel (admins)", body = List,
         example = json!(examples::chat_channel_list())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_list(
    State(state): State<AppState>,
    user: CurrentUser,
) -> Result<Json<List>, ApiError> {
    user.require(Role::Admin, WHAT)?;
    Ok(Json(List {
        channels: svc::channels(&state.pool).await?,
    }))
}

/// `GET /api/v1/chat/channels/{id}`: the channel and its messages.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = ChatChannelDetail)]
pub(super) struct Detail {
    /// The channel, without secrets.
    channel: Channel,
    /// Its most recent messages, newest first (at most 100).
    recent: Vec<OutboxRow>,
    /// Its failed messages, newest first: each can be retried on the channel's page.
    failed: Vec<OutboxRow>,
}

#[utoipa::path(
    get,
    path = "/api/v1/chat/channels/{id}",
    operation_id = "getChatChannel",
    summary = "Show a chat channel with its recent and failed messages (admins)",
    tag = "chat",
    params(ChannelPath),
    responses(
        (status = 200, description = "The channel and its messages", body = Detail,
         example = json!(examples::chat_channel_detail())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_show(
    State(state): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
) -> Result<Json<Detail>, ApiError> {
    user.require(Role::Admin, WHAT)?;
    let (channel, recent, failed) = svc::channel(&state.pool, parse_id(&id)?).await?;
    Ok(Json(Detail {
        channel,
        recent,
        failed,
    }))
}

#[utoipa::path(
    patch,
    path = "/api/v1/chat/channels/{id}",
    operation_id = "updateChatChannel",
    summary = "Change a chat channel's routing (admins)",
    tag = "chat",
    params(ChannelPath),
    request_body(content = RoutingUpdate, description = "Absent fields stay as they are",
                 example = json!(examples::update_chat_channel())),
    responses(
        (status = 200, description = "The channel as updated", body = Channel,
         example = json!(examples::chat_channel())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_update(
    State(state): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<RoutingUpdate>,
) -> Result<Json<Channel>, ApiError> {
    user.require(Role::Admin, WHAT)?;
    Ok(Json(
        svc::update_routing(&state.pool, &user.0.name, parse_id(&id)?, &body).await?,
    ))
}

#[utoipa::path(
    post,
    path = "/api/v1/chat/channels/{id}/test",
    operation_id = "testChatChannel",
    summary = "Send a test message and say what the chat service answered (admins)",
    tag = "chat",
    params(ChannelPath),
    responses(
        (status = 200, description = "What the chat service said (a refusal or an unreachable host is an outcome, not an error)",
         body = TestOutcome, example = json!(examples::chat_test_outcome())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_test(
    State(state): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
) -> Result<Json<TestOutcome>, ApiError> {
    user.require(Role::Admin, WHAT)?;
    Ok(Json(
        svc::test_channel(&state.pool, &state.settings.chat, parse_id(&id)?).await?,
    ))
}

// ----- pages -----------------------------------------------------------------------------------

/// The create form as typed (kept on a validation error; the secrets are not).
#[derive(Debug, Default, Deserialize)]
pub(super) struct CreateForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    room_id: String,
    #[serde(default)]
    access_token: String,
    /// Comma-separated.
    #[serde(default)]
    services: String,
    #[serde(default)]
    min_severity: String,
}

struct Row {
    id: i64,
    name: String,
    kind: &'static str,
    destination: String,
    routing: String,
    pending: i64,
    delivered: i64,
    failed: i64,
}

fn routing_text(c: &Channel) -> String {
    let services = if c.routing.services.is_empty() {
        "every service".to_string()
    } else {
        c.routing.services.join(", ")
    };
    let events: Vec<&str> = c.routing.events.iter().map(|e| e.as_str()).collect();
    format!(
        "{services}; {} or more severe; {}",
        c.routing.min_severity,
        events.join(", ")
    )
}

#[derive(Template, WebTemplate)]
#[template(path = "chat/list.html")]
struct ListPage {
    layout: Layout,
    rows: Vec<Row>,
    kinds: Vec<(&'static str, &'static str)>,
    severities: Vec<&'static str>,
    form: CreateForm,
    error: Option<String>,
}

async fn render_list(
    state: &AppState,
    user: &CurrentUser,
    form: CreateForm,
    error: Option<String>,
) -> Result<ListPage, PageError> {
    let counts = svc::counts(&state.pool).await?;
    let rows = svc::channels(&state.pool)
        .await?
        .iter()
        .map(|c| {
            let n = counts
                .iter()
                .find(|n| n.0 == c.id)
                .copied()
                .unwrap_or((c.id, 0, 0, 0));
            Row {
                id: c.id,
                name: c.name.clone(),
                kind: c.kind.as_str(),
                destination: c.destination.clone(),
                routing: routing_text(c),
                pending: n.1,
                delivered: n.2,
                failed: n.3,
            }
        })
        .collect();
    Ok(ListPage {
        layout: Layout::new(Some(&user.0), "Chat channels").with_current("chat"),
        rows,
        kinds: ChannelKind::ALL
            .iter()
            .map(|k| (k.as_str(), k.label()))
            .collect(),
        severities: crate::domain::Severity::ALL
            .iter()
            .map(|s| s.as_str())
            .collect(),
        form,
        error,
    })
}

pub(super) async fn page_list(
    State(state): State<AppState>,
    user: CurrentUser,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    let form = CreateForm {
        min_severity: "SEV4".into(),
        ..CreateForm::default()
    };
    Ok(render_list(&state, &user, form, None)
        .await?
        .into_response())
}

pub(super) async fn page_create(
    State(state): State<AppState>,
    user: CurrentUser,
    PageForm(form): PageForm<CreateForm>,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    let input = ChannelInput {
        name: form.name.clone(),
        kind: form.kind.clone(),
        url: form.url.clone(),
        room_id: Some(form.room_id.clone()),
        access_token: Some(form.access_token.clone()),
        services: form.services.split(',').map(str::to_string).collect(),
        min_severity: Some(form.min_severity.clone()),
        events: Vec::new(),
    };
    match svc::create_channel(&state.pool, &user.0.name, &input).await {
        Ok(c) => Ok(Redirect::to(&format!("/chat/{}?created=1", c.id)).into_response()),
        Err(e @ (AppError::Validation(_) | AppError::Conflict(_))) => {
            let status = e.status();
            let form = CreateForm {
                access_token: String::new(),
                ..form
            };
            let page = render_list(&state, &user, form, Some(e.to_string())).await?;
            Ok((status, page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

struct MessageRow {
    id: i64,
    incident_id: String,
    event: String,
    status: String,
    attempts: i64,
    created: String,
    error: String,
}

impl MessageRow {
    fn of(r: &OutboxRow, clock: &Clock) -> Self {
        Self {
            id: r.id,
            incident_id: r.incident_id.clone(),
            event: r.event.clone(),
            status: r.status.clone(),
            attempts: r.attempts,
            created: clock.fmt_stored(&r.created_at),
            error: r.last_error.clone().unwrap_or_default(),
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "chat/show.html")]
struct ShowPage {
    layout: Layout,
    id: i64,
    name: String,
    kind: &'static str,
    destination: String,
    services: String,
    min_severity: String,
    events: Vec<(&'static str, &'static str, bool)>,
    severities: Vec<&'static str>,
    recent: Vec<MessageRow>,
    failed: Vec<MessageRow>,
    created: bool,
    test: Option<TestOutcome>,
    error: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct ShowQuery {
    #[serde(default)]
    created: Option<String>,
}

async fn render_show(
    state: &AppState,
    user: &CurrentUser,
    headers: &HeaderMap,
    id: i64,
    test: Option<TestOutcome>,
    error: Option<String>,
    created: bool,
) -> Result<ShowPage, PageError> {
    let clock = Clock::for_viewer(Some(&user.0), headers);
    let (c, recent, failed) = svc::channel(&state.pool, id).await?;
    Ok(ShowPage {
        layout: Layout::new(Some(&user.0), format!("Chat channel {}", c.name)).with_current("chat"),
        id: c.id,
        kind: c.kind.as_str(),
        destination: c.destination.clone(),
        services: c.routing.services.join(", "),
        min_severity: c.routing.min_severity.to_string(),
        events: ChatEvent::ALL
            .iter()
            .map(|e| (e.as_str(), e.label(), c.routing.events.contains(e)))
            .collect(),
        severities: crate::domain::Severity::ALL
            .iter()
            .map(|s| s.as_str())
            .collect(),
        recent: recent.iter().map(|r| MessageRow::of(r, &clock)).collect(),
        failed: failed.iter().map(|r| MessageRow::of(r, &clock)).collect(),
        name: c.name,
        created,
        test,
        error,
    })
}

pub(super) async fn page_show(
    State(state): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<ShowQuery>,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    let page = render_show(
        &state,
        &user,
        &headers,
        parse_id(&id)?,
        None,
        None,
        q.created.is_some(),
    )
    .await?;
    Ok(page.into_response())
}

/// The routing form: services comma-separated, the minimum severity, one checkbox per event
/// (repeated `events` fields).
pub(super) async fn page_update(
    State(state): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    axum::extract::RawForm(raw): axum::extract::RawForm,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    let id = parse_id(&id)?;
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(&raw).into_owned().collect();
    let field = |name: &'static str| {
        pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let update = RoutingUpdate {
        services: Some(
            field("services")
                .flat_map(|s| s.split(',').map(str::to_string).collect::<Vec<_>>())
                .collect(),
        ),
        min_severity: field("min_severity").next(),
        events: Some(field("events").collect()),
    };
    match svc::update_routing(&state.pool, &user.0.name, id, &update).await {
        Ok(_) => Ok(Redirect::to(&format!("/chat/{id}")).into_response()),
        Err(e @ AppError::Validation(_)) => {
            let status = e.status();
            let page = render_show(
                &state,
                &user,
                &headers,
                id,
                None,
                Some(e.to_string()),
                false,
            )
            .await?;
            Ok((status, page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn page_test(
    State(state): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    let id = parse_id(&id)?;
    let outcome = svc::test_channel(&state.pool, &state.settings.chat, id).await?;
    let page = render_show(&state, &user, &headers, id, Some(outcome), None, false).await?;
    Ok(page.into_response())
}

pub(super) async fn page_retry(
    State(state): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path((id, message)): Path<(String, String)>,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    let id = parse_id(&id)?;
    let message = message
        .parse::<i64>()
        .map_err(|_| AppError::NotFound(format!("message {message}")))?;
    match svc::retry_message(&state.pool, &user.0.name, id, message).await {
        Ok(()) => Ok(Redirect::to(&format!("/chat/{id}")).into_response()),
        Err(e @ AppError::Conflict(_)) => {
            let page = render_show(
                &state,
                &user,
                &headers,
                id,
                None,
                Some(e.to_string()),
                false,
            )
            .await?;
            Ok((StatusCode::CONFLICT, page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn page_delete(
    State(state): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    svc::delete_channel(&state.pool, &user.0.name, parse_id(&id)?).await?;
    Ok(Redirect::to("/chat").into_response())
}
