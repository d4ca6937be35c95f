//! Who is asking: a bearer API token (`Authorization: Bearer im_…`, accepted on every route,
//! pages included) or a signed-in browser session. Tokens are 256-bit random values stored as
//! their SHA-256; passwords are Argon2id PHC strings checked by `password-auth`.

use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts};
use axum::response::{IntoResponse, Redirect, Response};
use sqlx::SqlitePool;
use tower_sessions::Session;

use super::AppState;
use super::errors::ApiError;
use crate::domain::Role;
use crate::error::{AppError, AppResult};
use crate::store::users::{self, User};

/// Session key holding the signed-in user's id.
const SESSION_USER: &str = "user_id";

/// Creates a new API token for `user_id` and returns it (`im_` + 64 hex digits). Only its
/// SHA-256 is stored, so it is shown once.
///
/// # Errors
/// Database errors.
pub async fn issue_token(pool: &SqlitePool, user_id: i64) -> AppResult<String> {
    let bytes: [u8; 32] = rand::random();
    let token = format!("im_{}", hex::encode(bytes));
    users::add_token(pool, user_id, &token_digest(&token)).await?;
    Ok(token)
}

fn token_digest(token: &str) -> String {
    crate::digest::sha256_hex(token.as_bytes())
}

/// The credentials of an `Authorization: Bearer <token>` header, trimmed (the scheme is
/// case-insensitive, RFC 9110 §11.1); `None` without the header, with another scheme, or with
/// an empty token. The one bearer parser: API tokens and webhook secrets both come through it.
pub fn bearer_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.trim().split_once(' ')?;
    let token = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The authenticated user of a request.
#[derive(Debug, Clone)]
pub struct CurrentUser(pub User);

impl CurrentUser {
    /// Checks the user's role includes `needed`.
    ///
    /// # Errors
    /// [`AppError::Forbidden`] naming the role and `what` was attempted.
    pub fn require(&self, needed: Role, what: &str) -> AppResult<()> {
        if self.0.role.includes(needed) {
            Ok(())
        } else {
            Err(AppError::needs_role(needed, what))
        }
    }
}

/// Why a request is not authenticated: JSON 401 on the API, a redirect to sign-in on pages.
#[derive(Debug)]
pub enum AuthRejection {
    /// API request without valid credentials.
    Api(AppError),
    /// Page request without a session: go to sign-in and come back.
    Page {
        /// Where to return after signing in.
        next: String,
    },
}

impl IntoResponse for AuthRejection {
    fn into_response(self) -> Response {
        match self {
            Self::Api(e) => ApiError(e).into_response(),
            Self::Page { next } => {
                let q = serde_urlencoded::to_string([("next", next)]).unwrap_or_default();
                Redirect::to(&format!("/signin?{q}")).into_response()
            }
        }
    }
}

impl FromRequestParts<AppState> for CurrentUser {
    type Rejection = AuthRejection;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let is_api = parts.uri.path().starts_with("/api/");
        let reject = |e: AppError, parts: &Parts| {
            if is_api || !matches!(e, AppError::Unauthenticated) {
                AuthRejection::Api(e)
            } else {
                AuthRejection::Page {
                    next: parts
                        .uri
                        .path_and_query()
                        .map(|p| p.as_str().to_string())
                        .unwrap_or_else(|| "/".into()),
                }
            }
        };
        if parts.headers.contains_key(header::AUTHORIZATION) {
            let Some(token) = bearer_token(&parts.headers) else {
                return Err(AuthRejection::Api(AppError::Unauthenticated));
            };
            let digest = token_digest(token);
            return match users::find_by_token(&state.pool, &digest).await {
                Ok(Some(u)) => match state.limits.api_token(&digest) {
                    Ok(()) => Ok(Self(u)),
                    Err(e) => Err(AuthRejection::Api(e)),
                },
                Ok(None) => Err(AuthRejection::Api(AppError::Unauthenticated)),
                Err(e) => Err(AuthRejection::Api(e)),
            };
        }
        let session = Session::from_request_parts(parts, state)
            .await
            .map_err(|_| reject(AppError::Unauthenticated, parts))?;
        let user_id: Option<i64> = session
            .get(SESSION_USER)
            .await
            .map_err(|e| reject(AppError::Internal(e.into()), parts))?;
        let Some(user_id) = user_id else {
            return Err(reject(AppError::Unauthenticated, parts));
        };
        match users::find(&state.pool, user_id).await {
            Ok(Some(u)) => Ok(Self(u)),
            Ok(None) => Err(reject(AppError::Unauthenticated, parts)),
            Err(e) => Err(reject(e, parts)),
        }
    }
}

/// Checks a name and password; on success rotates the session id (against fixation) and stores
/// the user in the session.
///
/// # Errors
/// [`AppError::Unauthenticated`] for an unknown name, a user without a password, or a wrong
/// password (the same error for all three).
pub async fn sign_in(
    pool: &SqlitePool,
    session: &Session,
    name: &str,
    password: &str,
) -> AppResult<User> {
    let found = users::find_with_password(pool, name.trim()).await?;
    let Some((user, Some(hash))) = found else {
        return Err(AppError::Unauthenticated);
    };
    let password = password.to_string();
    let ok = tokio::task::spawn_blocking(move || {
        password_auth::verify_password(password, &hash).is_ok()
    })
    .await
    .map_err(|e| AppError::Internal(e.into()))?;
    if !ok {
        return Err(AppError::Unauthenticated);
    }
    session
        .cycle_id()
        .await
        .map_err(|e| AppError::Internal(e.into()))?;
    session
        .insert(SESSION_USER, user.id)
        .await
        .map_err(|e| AppError::Internal(e.into()))?;
    Ok(user)
}

/// Ends the browser session.
///
/// # Errors
/// Session store errors.
pub async fn sign_out(session: &Session) -> AppResult<()> {
    session
        .flush()
        .await
        .map_err(|e| AppError::Internal(e.into()))
}
