//! Who is asking: a bearer API token (`Authorization: Bearer im_…`, accepted on every route,
//! pages included) or a signed-in browser session. Tokens are 256-bit random values stored as
//! their SHA-256; passwords are Argon2id PHC strings checked by `password-auth`.

use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts};
use axum::response::{IntoResponse, Redirect, Response};
use sqlx::AnyPool;
use tower_sessions::Session;

use super::AppState;
use super::errors::ApiError;
use crate::domain::Role;
use crate::error::{AppError, AppResult};
use crate::store::users::User;

/// Session key holding the signed-in user's id.
const SESSION_USER: &str = "user_id";

/// The credentials of an `Authorization: Bearer <token>` header, trimmed (the scheme is
/// case-insensitive, RFC 9110 §11.1), read as axum-extra's typed
/// `Authorization<Bearer>` header; `None` without the header, with another scheme, or with an
/// empty token. The one bearer parser: API tokens, the metrics token and webhook secrets all
/// come through it.
pub fn bearer_token(headers: &axum::http::HeaderMap) -> Option<String> {
    use axum_extra::headers::{Authorization, HeaderMapExt, authorization::Bearer};
    let credentials = headers.typed_get::<Authorization<Bearer>>()?;
    let token = credentials.token().trim();
    (!token.is_empty()).then(|| token.to_string())
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

/// Users recently authenticated, by API-token digest and by id, each kept [`KNOWN_USER_TTL`]:
/// a request signed in with a token or a session costs no database read for the user while the
/// entry is fresh (on two cores that read costs 190 µs of CPU: `page-bench --also /api/v1/me`
/// answered 5,550 req/s against 11,830 for `/healthz`). A change this process makes (a profile's
/// time zone) forgets the user at once; a change made elsewhere (the CLI, another instance)
/// shows within the TTL. Two `moka` caches (time to live, at most 4,096 entries each). Held in
/// [`AppState`].
pub struct KnownUsers {
    by_token: moka::sync::Cache<String, User>,
    by_id: moka::sync::Cache<i64, User>,
}

/// How long [`KnownUsers`] trusts an entry.
pub const KNOWN_USER_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// Entries [`KnownUsers`] keeps per key kind.
const KNOWN_USERS: u64 = 4096;

impl Default for KnownUsers {
    fn default() -> Self {
        fn cache<K: std::hash::Hash + Eq + Send + Sync + 'static>() -> moka::sync::Cache<K, User> {
            moka::sync::Cache::builder()
                .max_capacity(KNOWN_USERS)
                .time_to_live(KNOWN_USER_TTL)
                .build()
        }
        Self {
            by_token: cache(),
            by_id: cache(),
        }
    }
}

impl std::fmt::Debug for KnownUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KnownUsers")
    }
}

impl KnownUsers {
    /// The user of an API-token digest, when known and fresh.
    pub fn by_token(&self, digest: &str) -> Option<User> {
        self.by_token.get(digest)
    }

    /// The user with `id`, when known and fresh.
    pub fn by_id(&self, id: i64) -> Option<User> {
        self.by_id.get(&id)
    }

    /// Remembers `user` as the owner of the token with `digest`.
    pub fn put_token(&self, digest: &str, user: &User) {
        self.by_token.insert(digest.to_string(), user.clone());
    }

    /// Remembers `user` by id.
    pub fn put_id(&self, user: &User) {
        self.by_id.insert(user.id, user.clone());
    }

    /// Forgets every entry of user `id` (after a change to the user).
    pub fn forget(&self, id: i64) {
        self.by_id.invalidate(&id);
        for (digest, user) in &self.by_token {
            if user.id == id {
                self.by_token.invalidate(digest.as_str());
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
            let digest = crate::services::users::token_digest(&token);
            let known = match state.users.by_token(&digest) {
                Some(u) => Ok(Some(u)),
                None => crate::services::users::by_token(&state.pool, &digest)
                    .await
                    .inspect(|u| {
                        if let Some(u) = u {
                            state.users.put_token(&digest, u);
                        }
                    }),
            };
            return match known {
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
        if let Some(u) = state.users.by_id(user_id) {
            return Ok(Self(u));
        }
        match crate::services::users::by_id(&state.pool, user_id).await {
            Ok(Some(u)) => {
                state.users.put_id(&u);
                Ok(Self(u))
            }
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
    pool: &AnyPool,
    session: &Session,
    name: &str,
    password: &str,
) -> AppResult<User> {
    let user = crate::services::users::check_password(pool, name, password).await?;
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

/// Middleware: an HTML error page (any `PageError`, the CSRF refusal, 404s) is rendered again
/// with the signed-in user's layout and navigation, so an error never strands the user. Only
/// error responses pay for the user lookup.
pub async fn error_page_layout(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut probe = axum::http::Request::new(());
    *probe.uri_mut() = req.uri().clone();
    for h in [
        axum::http::header::COOKIE,
        axum::http::header::AUTHORIZATION,
    ] {
        for v in req.headers().get_all(&h) {
            probe.headers_mut().append(h.clone(), v.clone());
        }
    }
    if let Some(session) = req.extensions().get::<tower_sessions::Session>() {
        probe.extensions_mut().insert(session.clone());
    }
    let res = next.run(req).await;
    let Some(info) = res
        .extensions()
        .get::<super::errors::ErrorPageInfo>()
        .cloned()
    else {
        return res;
    };
    let (mut parts, ()) = probe.into_parts();
    use axum::extract::FromRequestParts;
    match CurrentUser::from_request_parts(&mut parts, &state).await {
        Ok(user) => info.page(Some(&user.0)),
        Err(_) => res,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: i64, name: &str) -> User {
        User {
            id,
            name: name.into(),
            role: Role::Responder,
            time_zone: None,
        }
    }

    #[test]
    fn known_users_are_found_by_token_and_id_and_forgotten_together() {
        let known = KnownUsers::default();
        let (rita, ada) = (user(1, "rita"), user(2, "ada"));
        known.put_token("digest-r1", &rita);
        known.put_token("digest-r2", &rita);
        known.put_token("digest-a", &ada);
        known.put_id(&rita);
        assert_eq!(known.by_token("digest-r2"), Some(rita.clone()));
        assert_eq!(known.by_id(1), Some(rita));
        known.forget(1);
        assert_eq!(known.by_id(1), None);
        assert_eq!(known.by_token("digest-r1"), None);
        assert_eq!(known.by_token("digest-r2"), None);
        assert_eq!(known.by_token("digest-a"), Some(ada), "another user stays");
    }
}
