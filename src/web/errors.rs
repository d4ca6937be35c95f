//! The one mapping from [`AppError`] to HTTP: JSON for the API (`ApiError`), an HTML page for
//! pages (`PageError`), plus the extractors that turn axum's body rejections into the same errors.

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
        (status, Json(body)).into_response()
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
    layout: super::pages::Layout,
    status: u16,
    reason: String,
    message: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        if matches!(self.0, AppError::Unauthenticated) {
            return axum::response::Redirect::to("/signin").into_response();
        }
        let page = ErrorPage {
            layout: super::pages::Layout::new(None, "Error"),
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or("Error").to_string(),
            message: self.0.public_message(),
        };
        (status, page).into_response()
    }
}

/// Maps a body rejection by its status: 413 stays 413 with our message, the rest is a 400 that
/// quotes the parser's explanation (which names the field, line and column).
fn rejection(status: StatusCode, text: String, limit: usize) -> AppError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        AppError::PayloadTooLarge { limit_bytes: limit }
    } else {
        AppError::BadRequest(text)
    }
}

/// `Json<T>` whose rejections are [`ApiError`]s (400 naming the field, 413 over the limit).
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

/// Fallback for unknown routes: JSON under `/api`, a page elsewhere.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    let e = AppError::NotFound(uri.path().to_string());
    if uri.path().starts_with("/api/") {
        ApiError(e).into_response()
    } else {
        PageError(e).into_response()
    }
}

/// Gives the CSRF layer's bare 403 a message a person can act on.
pub async fn csrf_rejection_message(res: Response) -> Response {
    if res.status() == StatusCode::FORBIDDEN
        && res
            .extensions()
            .get::<tower_http::csrf::ProtectionError>()
            .is_some()
    {
        return ApiError(AppError::Forbidden(
            "cross-origin request refused (CSRF protection): submit the form from IncidentMind's own pages"
                .into(),
        ))
        .into_response();
    }
    res
}
