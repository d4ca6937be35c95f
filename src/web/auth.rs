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
    /// Page request refused for another reason (an authenticating proxy's user refused, the
    /// database down): the HTML error page.
    PageFailure(AppError),
}

impl IntoResponse for AuthRejection {
    fn into_response(self) -> Response {
        match self {
            Self::Api(e) => ApiError(e).into_response(),
            Self::PageFailure(e) => super::errors::PageError(e).into_response(),
            Self::Page { next } => {
                let q = serde_urlencoded::to_string([("next", next)]).unwrap_or_default();
                Redirect::to(&format!("/signin?{q}")).into_response()
            }
        }
    }
}

/// Users recently authenticated, by API-token digest and by id, each kept [`KNOWN_USER_TTL`]:
/// a request signed in with a token or a session reads only the user's generation (sessions) or
/// the token's liveness and its user's generation (tokens) while the entry is fresh, never the
/// whole user (on two cores the whole read costs 190 µs of CPU: `page-bench --also /api/v1/me`
/// answered 5,550 req/s against 11,830 for `/healthz`), and that read answers for
/// [`CHECK_FRESH`] unless this process changed an account meanwhile. A revocation, a disable, a
/// password or role change made here counts at the next request; made elsewhere (the CLI,
/// another instance) within [`CHECK_FRESH`], since it moves what is read; a time zone changed
/// elsewhere shows within the TTL. `moka` caches (time
/// to live, at most 4,096 entries each), and the tokens whose last use was written this minute.
/// Held in [`AppState`].
pub struct KnownUsers {
    by_token: moka::sync::Cache<String, User>,
    by_id: moka::sync::Cache<i64, User>,
    /// Tokens whose liveness was read from the database within [`CHECK_FRESH`], with the
    /// accounts count ([`crate::services::users::accounts_epoch`]) read before that read.
    checked_tokens: moka::sync::Cache<String, u64>,
    /// The same for users' generations (sessions).
    checked_ids: moka::sync::Cache<i64, u64>,
    /// Tokens whose last use was written in the last minute.
    touched: moka::sync::Cache<String, ()>,
}

/// How long [`KnownUsers`] trusts an entry.
pub const KNOWN_USER_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a token's liveness or a user's generation, read from the database, answers for
/// the next requests, unless this process changed an account since (issue #56: the read on
/// every request was a SQLite round trip that held the incident page and its 304 at 28 % of
/// `/healthz`). A revocation, disable, password or role change made through this instance
/// counts at its next request; one made on another instance or with the CLI within this long.
pub const CHECK_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

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
        fn checked<K: std::hash::Hash + Eq + Send + Sync + 'static>() -> moka::sync::Cache<K, u64> {
            moka::sync::Cache::builder()
                .max_capacity(KNOWN_USERS)
                .time_to_live(CHECK_FRESH)
                .build()
        }
        Self {
            by_token: cache(),
            by_id: cache(),
            checked_tokens: checked(),
            checked_ids: checked(),
            touched: moka::sync::Cache::builder()
                .max_capacity(KNOWN_USERS)
                .time_to_live(std::time::Duration::from_secs(60))
                .build(),
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

    /// Forgets the token with `digest` (it no longer authenticates).
    pub fn forget_token(&self, digest: &str) {
        self.by_token.invalidate(digest);
        self.checked_tokens.invalidate(digest);
    }

    /// Whether the token with `digest` was found live within [`CHECK_FRESH`], under accounts
    /// count `epoch`.
    fn token_checked(&self, digest: &str, epoch: u64) -> bool {
        self.checked_tokens.get(digest) == Some(epoch)
    }

    /// Whether user `id`'s generation was read within [`CHECK_FRESH`], under `epoch`.
    fn id_checked(&self, id: i64, epoch: u64) -> bool {
        self.checked_ids.get(&id) == Some(epoch)
    }

    /// Whether the token with `digest` is used for the first time this minute (its last use is
    /// then written).
    pub fn first_use_this_minute(&self, digest: &str) -> bool {
        // A read first: on every request but the minute's first, no key is built or written.
        if self.touched.contains_key(digest) {
            return false;
        }
        let entry = self.touched.entry(digest.to_string()).or_insert(());
        entry.is_fresh()
    }

    /// Forgets every entry of user `id` (after a change to the user).
    pub fn forget(&self, id: i64) {
        self.by_id.invalidate(&id);
        self.checked_ids.invalidate(&id);
        for (digest, user) in &self.by_token {
            if user.id == id {
                self.by_token.invalidate(digest.as_str());
                self.checked_tokens.invalidate(digest.as_str());
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
            if is_api {
                AuthRejection::Api(e)
            } else if !matches!(e, AppError::Unauthenticated) {
                AuthRejection::PageFailure(e)
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
            return token_user(parts, state).await.map(Self);
        }
        let session = Session::from_request_parts(parts, state)
            .await
            .map_err(|_| reject(AppError::Unauthenticated, parts))?;
        if let Some(proxied) = super::proxy::proxy_user(parts, state, &session).await {
            return proxied.map(Self).map_err(|e| reject(e, parts));
        }
        match session_user(state, &session).await {
            Ok(Some(u)) => Ok(Self(u)),
            Ok(None) => Err(reject(AppError::Unauthenticated, parts)),
            Err(e) => Err(reject(e, parts)),
        }
    }
}

/// The user of an `Authorization: Bearer` request: a live token (not revoked, not expired) of
/// an enabled user, checked in the database at most every [`CHECK_FRESH`] and at the next
/// request after this process changed an account (a revocation or a disable here counts at
/// once, on another instance within [`CHECK_FRESH`]); the user itself comes from [`KnownUsers`]
/// while its generation is unchanged. Records the token's use at most once a minute.
async fn token_user(parts: &Parts, state: &AppState) -> Result<User, AuthRejection> {
    let Some(token) = bearer_token(&parts.headers) else {
        return Err(AuthRejection::Api(AppError::Unauthenticated));
    };
    let digest = crate::services::users::token_digest(&token);
    let pool = &state.pool;
    // Read before the database: a change committed after it moves the count.
    let epoch = crate::services::users::accounts_epoch();
    let known = match state.users.by_token(&digest) {
        Some(u) if state.users.token_checked(&digest, epoch) => Ok(Some(u)),
        Some(u) => match crate::services::users::token_generation(pool, &digest).await {
            Ok(Some(g)) if g == u.generation => Ok(Some(u)),
            Ok(Some(_)) => token_owner(state, &digest).await,
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        },
        None => token_owner(state, &digest).await,
    };
    match known {
        Ok(Some(u)) => {
            if !state.users.token_checked(&digest, epoch) {
                state.users.checked_tokens.insert(digest.clone(), epoch);
            }
            if state.users.first_use_this_minute(&digest) {
                let (pool, digest) = (pool.clone(), digest.clone());
                tokio::spawn(async move {
                    if let Err(e) = crate::services::users::touch_token(&pool, &digest).await {
                        tracing::warn!(error = %e, "could not record an API token's last use");
                    }
                });
            }
            state
                .limits
                .api_token(&digest)
                .map_err(AuthRejection::Api)?;
            Ok(u)
        }
        Ok(None) => {
            state.users.forget_token(&digest);
            Err(AuthRejection::Api(AppError::Unauthenticated))
        }
        Err(e) => Err(AuthRejection::Api(e)),
    }
}

/// The owner of the live token with `digest`, read from the database and remembered in
/// [`KnownUsers`] (only a read is written there: a cache hit written again on every request
/// was a cache insert per request, issue #56). `None` for a revoked, expired or unknown token.
///
/// # Errors
/// Database errors.
async fn token_owner(state: &AppState, digest: &str) -> AppResult<Option<User>> {
    let user = crate::services::users::by_token(&state.pool, digest).await?;
    if let Some(u) = &user {
        state.users.put_token(digest, u);
    }
    Ok(user)
}

/// User `id` read from the database and remembered in [`KnownUsers`], as [`token_owner`].
///
/// # Errors
/// Database errors.
async fn user_by_id(state: &AppState, id: i64) -> AppResult<Option<User>> {
    let user = crate::services::users::by_id(&state.pool, id).await?;
    if let Some(u) = &user {
        state.users.put_id(u);
    }
    Ok(user)
}

/// Session key holding the user's generation when the session was made.
const SESSION_GENERATION: &str = "generation";

/// The user signed in on `session`, if any: refused (and the session ended) once the user was
/// disabled or their generation moved (a password change, a role change from claims) since the
/// session was made — read from the database at most every [`CHECK_FRESH`] and at the next
/// request after this process changed an account, so it holds on every instance (within
/// [`CHECK_FRESH`]) whatever caches the session.
///
/// # Errors
/// Session store and database errors.
pub async fn session_user(state: &AppState, session: &Session) -> AppResult<Option<User>> {
    let user_id: Option<i64> = session
        .get(SESSION_USER)
        .await
        .map_err(|e| AppError::Internal(e.into()))?;
    let Some(user_id) = user_id else {
        return Ok(None);
    };
    let made_under: i64 = session
        .get(SESSION_GENERATION)
        .await
        .map_err(|e| AppError::Internal(e.into()))?
        .unwrap_or(0);
    let pool = &state.pool;
    let epoch = crate::services::users::accounts_epoch();
    let user = match state.users.by_id(user_id) {
        Some(u) if state.users.id_checked(user_id, epoch) => Some(u),
        Some(u) => match crate::services::users::generation(pool, user_id).await? {
            Some(g) if g == u.generation => Some(u),
            Some(_) => user_by_id(state, user_id).await?,
            None => None,
        },
        None => user_by_id(state, user_id).await?,
    };
    match user {
        Some(u) if u.generation == made_under => {
            if !state.users.id_checked(u.id, epoch) {
                state.users.checked_ids.insert(u.id, epoch);
            }
            Ok(Some(u))
        }
        _ => {
            state.users.forget(user_id);
            session
                .flush()
                .await
                .map_err(|e| AppError::Internal(e.into()))?;
            Ok(None)
        }
    }
}

/// Makes `session` the session of `user`: a new session id (against fixation), the user and
/// their generation. `extra` adds keys (the ID token for sign-out, the proxy's identity).
///
/// # Errors
/// Session store errors.
pub async fn establish(
    session: &Session,
    user: &User,
    extra: &[(&str, serde_json::Value)],
) -> AppResult<()> {
    let internal = |e: tower_sessions::session::Error| AppError::Internal(e.into());
    session.cycle_id().await.map_err(internal)?;
    session
        .insert(SESSION_USER, user.id)
        .await
        .map_err(internal)?;
    session
        .insert(SESSION_GENERATION, user.generation)
        .await
        .map_err(internal)?;
    for (k, v) in extra {
        session.insert(k, v).await.map_err(internal)?;
    }
    Ok(())
}

/// Checks a name and password; on success rotates the session id (against fixation) and stores
/// the user in the session; audited as a sign-in.
///
/// # Errors
/// [`AppError::Unauthenticated`] for an unknown or disabled name, a user without a password, or
/// a wrong password (the same error for all four).
pub async fn sign_in(
    pool: &AnyPool,
    session: &Session,
    name: &str,
    password: &str,
) -> AppResult<User> {
    let user = crate::services::users::check_password(pool, name, password).await?;
    crate::services::identity::record_password_sign_in(pool, &user).await?;
    establish(session, &user, &[]).await?;
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
            generation: 0,
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
