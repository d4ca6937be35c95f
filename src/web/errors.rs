//! Rendering an [`AppError`] as a response, with the status, code and public message
//! `crate::error` gives it: JSON for the API (`ApiError`), an HTML page for pages
//! (`PageError`), plus the extractors that turn axum's body rejections into the same errors.

use askama::Template;
use askama_web::WebTemplate;
use axum::Json;
use axum::extract::rejection::{FormRejection, JsonRejection};
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::error::AppError;

/// An [`AppError`] rendered as `{"error": {"code": "...", "message": "..."}}`.
#[derive(Debug)]
pub struct ApiError(pub AppError);

impl<E: Into<AppError>> From<E> for ApiError {
    fn from(e: E) -> Self {
        Self(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let body = serde_json::json!({
            "error": {"code": self.0.code(), "message": self.0.public_message()}
        });
        let mut res = (status, Json(body)).into_response();
        if let Some(secs) = self.0.retry_after_secs() {
            res.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        res
    }
}

/// An [`AppError`] rendered as the HTML error page.
#[derive(Debug)]
pub struct PageError(pub AppError);

impl<E: Into<AppError>> From<E> for PageError {
    fn from(e: E) -> Self {
        Self(e.into())
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "error.html")]
struct ErrorPage {
    layout: super::layout::Layout,
    status: u16,
    reason: String,
    message: String,
    hint: &'static str,
}

/// What an error page said, kept on the response so `auth::error_page_layout` can render it again
/// with the signed-in user's navigation.
#[derive(Debug, Clone)]
pub struct ErrorPageInfo {
    status: StatusCode,
    message: String,
}

impl ErrorPageInfo {
    /// The error page for `user` (none: signed out), with this info kept on the response.
    pub fn page(&self, user: Option<&crate::store::users::User>) -> Response {
        let reason = self
            .status
            .canonical_reason()
            .unwrap_or("Error")
            .to_string();
        let mut res = (
            self.status,
            ErrorPage {
                layout: super::layout::Layout::new(
                    user,
                    format!("{} {reason}", self.status.as_u16()),
                ),
                status: self.status.as_u16(),
                reason,
                message: self.message.clone(),
                hint: hint(self.status),
            },
        )
            .into_response();
        res.extensions_mut().insert(self.clone());
        res
    }
}

/// What to do next on an error page.
fn hint(status: StatusCode) -> &'static str {
    match status.as_u16() {
        413 => {
            "Nothing was saved. Go back with your browser: it keeps what you typed. Shorten the text, \
             or add large logs as evidence (file upload) instead."
        }
        409 => "Nothing was changed. Reload the page to see the current state.",
        422 | 400 => {
            "Nothing was saved. Go back with your browser and correct the field named above."
        }
        403 => "Ask an admin for the role, or go back.",
        404 => "Check the address, or find it in the incident list.",
        _ => "",
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        if matches!(self.0, AppError::Unauthenticated) {
            return axum::response::Redirect::to("/signin").into_response();
        }
        let mut res = ErrorPageInfo {
            status,
            message: self.0.public_message(),
        }
        .page(None);
        if let Some(secs) = self.0.retry_after_secs() {
            res.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        res
    }
}

/// Maps a body rejection by its status: 413 stays 413 with our message (naming `limit`), the
/// rest is a 400 that quotes the parser's explanation (which names the field, line and column).
pub(super) fn rejection(status: StatusCode, text: String, limit: usize) -> AppError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        AppError::PayloadTooLarge { limit_bytes: limit }
    } else {
        AppError::BadRequest(text)
    }
}

/// `Json<T>` whose rejections are [`ApiError`]s (400 naming the field, 413 over the limit).
///
/// Hand-written rather than `#[derive(FromRequest)]` with
/// `#[from_request(via(axum::Json), rejection(ApiError))]`: that derive converts the rejection
/// with `From<JsonRejection>`, which sees neither the state nor the limit (axum's length-limit
/// rejection carries no number), so the 413 could no longer say "larger than the limit of N
/// bytes" with the configured N.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<super::AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &super::AppState) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Self(v)),
            Err(e) => {
                let e: JsonRejection = e;
                Err(ApiError(rejection(
                    e.status(),
                    e.body_text(),
                    state.settings.max_body_bytes,
                )))
            }
        }
    }
}

/// `Form<T>` whose rejections are [`PageError`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageForm<T>(pub T);

impl<T: DeserializeOwned> FromRequest<super::AppState> for PageForm<T> {
    type Rejection = PageError;

    async fn from_request(req: Request, state: &super::AppState) -> Result<Self, Self::Rejection> {
        match axum::Form::<T>::from_request(req, state).await {
            Ok(axum::Form(v)) => Ok(Self(v)),
            Err(e) => {
                let e: FormRejection = e;
                Err(PageError(rejection(
                    e.status(),
                    e.body_text(),
                    state.settings.max_body_bytes,
                )))
            }
        }
    }
}

/// The answer to a form post, the one rule every page form follows (STYLE.md, forms): done, a
/// 303 to `to(value)`; a 5xx, the error page; any other error, the form's page again through
/// `again(status, message)`, which keeps what the user typed.
///
/// # Errors
/// Internal errors of `result`, and the re-render's own errors.
pub async fn form_outcome<T, Fut>(
    result: Result<T, AppError>,
    to: impl FnOnce(T) -> String,
    again: impl FnOnce((StatusCode, String)) -> Fut,
) -> Result<Response, PageError>
where
    Fut: std::future::Future<Output = Result<Response, PageError>>,
{
    match result {
        Ok(value) => Ok(axum::response::Redirect::to(&to(value)).into_response()),
        Err(AppError::Internal(e)) => Err(AppError::Internal(e).into()),
        Err(e) => again((e.status(), e.to_string())).await,
    }
}

/// Fallback for unknown routes: JSON under `/api`, a page elsewhere.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    let e = AppError::NotFound(uri.path().to_string());
    if uri.path().starts_with("/api/") {
        ApiError(e).into_response()
    } else {
        PageError(e).into_response()
    }
}

/// Gives the CSRF layer's bare 403 a message a person can act on: JSON under `/api/`, the error
/// page elsewhere.
pub async fn csrf_rejection_message(req: Request, next: axum::middleware::Next) -> Response {
    let api = req.uri().path().starts_with("/api/");
    let res = next.run(req).await;
    if res.status() == StatusCode::FORBIDDEN
        && res
            .extensions()
            .get::<tower_http::csrf::ProtectionError>()
            .is_some()
    {
        let e = AppError::Forbidden(
            "cross-origin request refused (CSRF protection): submit the form from IncidentMind's own pages"
                .into(),
        );
        return if api {
            ApiError(e).into_response()
        } else {
            PageError(e).into_response()
        };
    }
    res
}
