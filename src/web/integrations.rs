//! Integrations, admin only: the page (`/integrations`) and the JSON API
//! (`/api/v1/integrations`). Creating one returns its webhook secret once; only its SHA-256 is
//! stored. Other roles get a 403.

use std::collections::BTreeMap;

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
use super::schema::IntegrationPath;
use super::view::Clock;
use crate::domain::{Role, Severity};
use crate::error::AppError;
use crate::services::ingest::{self, IntegrationInput, IntegrationUpdate, Source};
use crate::store::integrations::Integration;

const WHAT: &str = "managing integrations";

fn parse_id(id: &str) -> Result<i64, AppError> {
    id.parse::<i64>()
        .map_err(|_| AppError::NotFound(format!("integration {id}")))
}

/// An integration as the API shows it, with its webhook path.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct IntegrationView {
    #[serde(flatten)]
    integration: Integration,
    /// Where its sender posts (`/api/v1/webhooks/{source}`).
    webhook_path: String,
}

impl From<Integration> for IntegrationView {
    fn from(i: Integration) -> Self {
        Self {
            webhook_path: format!("/api/v1/webhooks/{}", i.source),
            integration: i,
        }
    }
}

/// `201 {…integration, "webhook_path", "secret"}`: the secret is shown only here.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = IntegrationCreated)]
struct Created {
    #[serde(flatten)]
    view: IntegrationView,
    /// The webhook secret (`whk_…`): the sender's bearer credential. Only its SHA-256 is kept.
    secret: String,
}

#[utoipa::path(
    post,
    path = "/api/v1/integrations",
    operation_id = "createIntegration",
    summary = "Create an integration and its webhook secret (admins)",
    tag = "integrations",
    request_body(content = IntegrationInput, description = "The sender, its default service and severity mapping (admins)",
                 example = json!(examples::create_integration())),
    responses(
        (status = 201, description = "The integration with its webhook secret (shown only here)", body = Created,
         example = json!(examples::integration_created())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_create(
    State(state): State<AppState>,
    user: CurrentUser,
    ApiJson(body): ApiJson<IntegrationInput>,
) -> Result<impl IntoResponse, ApiError> {
    user.require(Role::Admin, WHAT)?;
    let (integration, secret) =
        ingest::create_integration(&state.pool, &user.0.name, &body).await?;
    Ok((
        StatusCode::CREATED,
        Json(Created {
            view: integration.into(),
            secret,
        }),
    ))
}

/// `GET /api/v1/integrations`.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = IntegrationList)]
pub(super) struct List {
    /// Every integration.
    integrations: Vec<IntegrationView>,
}

#[utoipa::path(
    get,
    path = "/api/v1/integrations",
    operation_id = "listIntegrations",
    summary = "List integrations (admins)",
    tag = "integrations",
    responses(
        (status = 200, description = "Every integration (admins)", body = List,
         example = json!(examples::integration_list())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_list(
    State(state): State<AppState>,
    user: CurrentUser,
) -> Result<Json<List>, ApiError> {
    user.require(Role::Admin, WHAT)?;
    let integrations = ingest::list_integrations(&state.pool)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    Ok(Json(List { integrations }))
}

#[utoipa::path(
    get,
    path = "/api/v1/integrations/{id}",
    operation_id = "getIntegration",
    summary = "Show an integration (admins)",
    tag = "integrations",
    params(IntegrationPath),
    responses(
        (status = 200, description = "The integration (admins)", body = IntegrationView,
         example = json!(examples::integration())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_show(
    State(state): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
) -> Result<Json<IntegrationView>, ApiError> {
    user.require(Role::Admin, WHAT)?;
    Ok(Json(
        ingest::integration(&state.pool, parse_id(&id)?)
            .await?
            .into(),
    ))
}

#[utoipa::path(
    patch,
    path = "/api/v1/integrations/{id}",
    operation_id = "updateIntegration",
    summary = "Update an integration (admins)",
    tag = "integrations",
    params(IntegrationPath),
    request_body(content = IntegrationUpdate, description = "Absent fields stay as they are",
                 example = json!(examples::update_integration())),
    responses(
        (status = 200, description = "The integration as updated (admins)", body = IntegrationView,
         example = json!(examples::integration_updated())),
        super::schema::ApiErrors
    )
)]
pub(super) async fn api_update(
    State(state): State<AppState>,
    user: CurrentUser,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<IntegrationUpdate>,
) -> Result<Json<IntegrationView>, ApiError> {
    user.require(Role::Admin, WHAT)?;
    let id = parse_id(&id)?;
    Ok(Json(
        ingest::update_integration(&state.pool, &user.0.name, id, &body)
            .await?
            .into(),
    ))
}

// ----- pages -----------------------------------------------------------------------------------

/// The create form as typed (kept on a validation error).
#[derive(Debug, Default, Deserialize)]
pub(super) struct CreateForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    default_service: String,
    #[serde(default)]
    default_severity: String,
    /// One `value=SEVn` per line.
    #[serde(default)]
    severity_map: String,
    #[serde(default)]
    signing_secret: String,
}

struct Row {
    id: i64,
    name: String,
    source: String,
    default_service: String,
    default_severity: String,
    mapping: String,
    has_signing_secret: bool,
    webhook_path: String,
    created: String,
}

/// This server's origin as the browser reached it (`http://host:port`; `https` behind a proxy
/// that says so with `X-Forwarded-Proto`), so the page shows a webhook URL whole, ready to paste
/// into a sender (issue #49); empty when the request names no usable host.
fn origin(headers: &HeaderMap) -> String {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .unwrap_or_default()
    };
    let host = header("x-forwarded-host");
    let host = if host.is_empty() {
        header("host")
    } else {
        host
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if !host_ok {
        return String::new();
    }
    let scheme = if header("x-forwarded-proto").eq_ignore_ascii_case("https") {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{host}")
}

impl Row {
    /// The row of `i`, its instant in the viewer's zone, its webhook URL on `origin`.
    fn of(i: &Integration, clock: &Clock, origin: &str) -> Self {
        Self {
            id: i.id,
            name: i.name.clone(),
            source: i.source.clone(),
            default_service: i.default_service.clone(),
            default_severity: i.default_severity.to_string(),
            mapping: i
                .severity_map
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
            has_signing_secret: i.has_signing_secret,
            webhook_path: format!("{origin}/api/v1/webhooks/{}", i.source),
            created: format!("{} by {}", clock.fmt_stored(&i.created_at), i.created_by),
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "integrations/list.html")]
struct ListPage {
    layout: Layout,
    rows: Vec<Row>,
    sources: Vec<&'static str>,
    severities: Vec<&'static str>,
    form: CreateForm,
    error: Option<String>,
    /// Set right after creation: (name, source, webhook URL, secret).
    created: Option<(String, String, String, String)>,
}

async fn render_list(
    state: &AppState,
    user: &CurrentUser,
    headers: &HeaderMap,
    form: CreateForm,
    error: Option<String>,
    created: Option<(String, String, String, String)>,
) -> Result<ListPage, PageError> {
    let clock = Clock::for_viewer(Some(&user.0), headers);
    let rows = ingest::list_integrations(&state.pool)
        .await?
        .iter()
        .map(|i| Row::of(i, &clock, &origin(headers)))
        .collect();
    Ok(ListPage {
        layout: Layout::new(Some(&user.0), "Integrations").with_current("integrations"),
        rows,
        sources: Source::ALL.iter().map(|s| s.as_str()).collect(),
        severities: Severity::ALL.iter().map(|s| s.as_str()).collect(),
        form,
        error,
        created,
    })
}

pub(super) async fn page_list(
    State(state): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    let form = CreateForm {
        default_severity: "SEV3".into(),
        ..CreateForm::default()
    };
    Ok(render_list(&state, &user, &headers, form, None, None)
        .await?
        .into_response())
}

/// Parses `value=SEVn` lines (also `value: SEVn`, comma-separated) into a map.
fn parse_map_text(text: &str) -> Result<BTreeMap<String, String>, AppError> {
    let mut out = BTreeMap::new();
    for item in text.split(['\n', ',']) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let Some((k, v)) = item.split_once('=').or_else(|| item.split_once(':')) else {
            return Err(crate::domain::ValidationError::new(
                "severity_map",
                format!("'{item}' is not value=SEVn"),
            )
            .into());
        };
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

pub(super) async fn page_create(
    State(state): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    PageForm(form): PageForm<CreateForm>,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    let result = match parse_map_text(&form.severity_map) {
        Ok(map) => {
            let input = IntegrationInput {
                name: form.name.clone(),
                source: form.source.clone(),
                default_service: Some(form.default_service.clone()),
                default_severity: Some(form.default_severity.clone()),
                severity_map: Some(map),
                signing_secret: Some(form.signing_secret.clone()),
            };
            ingest::create_integration(&state.pool, &user.0.name, &input).await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok((i, secret)) => {
            let created = Some((
                i.name.clone(),
                i.source.clone(),
                format!("{}/api/v1/webhooks/{}", origin(&headers), i.source),
                secret,
            ));
            let fresh = CreateForm {
                default_severity: "SEV3".into(),
                ..CreateForm::default()
            };
            let page = render_list(&state, &user, &headers, fresh, None, created).await?;
            Ok((StatusCode::CREATED, page).into_response())
        }
        Err(e @ (AppError::Validation(_) | AppError::Conflict(_))) => {
            let status = e.status();
            let page =
                render_list(&state, &user, &headers, form, Some(e.to_string()), None).await?;
            Ok((status, page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct UpdateForm {
    #[serde(default)]
    default_service: Option<String>,
    #[serde(default)]
    default_severity: Option<String>,
    #[serde(default)]
    signing_secret: Option<String>,
}

pub(super) async fn page_update(
    State(state): State<AppState>,
    user: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
    PageForm(form): PageForm<UpdateForm>,
) -> Result<Response, PageError> {
    user.require(Role::Admin, WHAT)?;
    let id = parse_id(&id)?;
    let nonempty = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
    let update = IntegrationUpdate {
        default_service: nonempty(form.default_service),
        default_severity: nonempty(form.default_severity),
        severity_map: None,
        signing_secret: form.signing_secret,
    };
    match ingest::update_integration(&state.pool, &user.0.name, id, &update).await {
        Ok(_) => Ok(Redirect::to("/integrations").into_response()),
        Err(e @ AppError::Validation(_)) => {
            let status = e.status();
            let form = CreateForm {
                default_severity: "SEV3".into(),
                ..CreateForm::default()
            };
            let page =
                render_list(&state, &user, &headers, form, Some(e.to_string()), None).await?;
            Ok((status, page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}
