//! Users and their API tokens: creating a user (the CLI, the demo), issuing a token, and what
//! authenticating a request reads (a token's user, a user's generation). Only a token's SHA-256 is stored ([`token_digest`]), so a token is shown once.

use sqlx::AnyPool;

use crate::domain::{Role, UserName};
use crate::error::AppResult;
use crate::store::users;

/// Creates a new API token named `name` for `user` on behalf of `actor`, without expiry, and
/// returns it (`im_` + 64 hex digits). Only its SHA-256 is stored, so it is shown once.
/// ([`super::accounts::create_token`] with a lifetime.)
///
/// # Errors
/// Database errors.
pub async fn issue_token(
    pool: &AnyPool,
    actor: &str,
    user: &users::User,
    name: &str,
) -> AppResult<String> {
    Ok(super::accounts::create_token(pool, actor, user, name, None)
        .await?
        .1)
}

/// The stored form of an API token: its SHA-256, lower-case hex.
pub fn token_digest(token: &str) -> String {
    crate::digest::sha256_hex(token.as_bytes())
}

/// Creates a user (password hashed with Argon2id via `password-auth`) and returns a new API token.
///
/// # Errors
/// [`crate::error::AppError::Validation`] for the name or role, a conflict when the name is
/// taken, database errors.
pub async fn add_user(
    pool: &AnyPool,
    name: &str,
    role: &str,
    password: Option<&str>,
) -> AppResult<String> {
    let name = UserName::parse(name)?;
    let role = Role::parse(role)?;
    let hash = password.map(password_auth::generate_hash);
    let user = users::create(pool, &name, role, hash.as_deref()).await?;
    issue_token(pool, "cli", &user, "first token").await
}

/// The enabled user holding the live (not revoked, not expired) API token whose SHA-256 is
/// `digest` ([`token_digest`]), if any.
///
/// # Errors
/// Database errors.
pub async fn by_token(pool: &AnyPool, digest: &str) -> AppResult<Option<users::User>> {
    crate::store::tokens::find_user(pool, digest).await
}

/// The current generation of the user of a live token (see [`by_token`]); `None` when the token
/// no longer authenticates.
///
/// # Errors
/// Database errors.
pub async fn token_generation(pool: &AnyPool, digest: &str) -> AppResult<Option<i64>> {
    crate::store::tokens::user_generation(pool, digest).await
}

/// This process's count of committed changes to who may sign in
/// ([`crate::store::users::accounts_epoch`]): a check of a token or a session made under one
/// count is not reused once it moved.
pub fn accounts_epoch() -> u64 {
    crate::store::users::accounts_epoch()
}

/// Records a use of the token with `digest` (at most once a minute per token: the caller
/// decides).
///
/// # Errors
/// Database errors.
pub async fn touch_token(pool: &AnyPool, digest: &str) -> AppResult<()> {
    crate::store::tokens::touch(pool, digest).await
}

/// The current generation of enabled user `id`; `None` when disabled or gone.
///
/// # Errors
/// Database errors.
pub async fn generation(pool: &AnyPool, id: i64) -> AppResult<Option<i64>> {
    users::generation(pool, id).await
}

/// Enabled user `id`, if it exists.
///
/// # Errors
/// Database errors.
pub async fn by_id(pool: &AnyPool, id: i64) -> AppResult<Option<users::User>> {
    users::find(pool, id).await
}

/// How many users exist (0 on a first run: the sign-in page says how to create one).
///
/// # Errors
/// Database errors.
pub async fn count(pool: &AnyPool) -> AppResult<i64> {
    users::count(pool).await
}

/// Sets user `id`'s time zone (an IANA name; `None`: the browser's).
///
/// # Errors
/// Database errors.
pub async fn set_time_zone(pool: &AnyPool, id: i64, zone: Option<&str>) -> AppResult<()> {
    users::set_time_zone(pool, id, zone).await
}

/// The user named `name` (trimmed) when `password` matches the stored Argon2 hash, checked on
/// the blocking pool.
///
/// # Errors
/// [`crate::AppError::Unauthenticated`] for an unknown name, a user without a password, or a
/// wrong password (the same error for all three); database errors.
pub async fn check_password(pool: &AnyPool, name: &str, password: &str) -> AppResult<users::User> {
    let found = users::find_with_password(pool, name.trim()).await?;
    let Some((user, Some(hash))) = found else {
        return Err(crate::AppError::Unauthenticated);
    };
    let password = password.to_string();
    let ok = tokio::task::spawn_blocking(move || {
        password_auth::verify_password(password, &hash).is_ok()
    })
    .await
    .map_err(|e| crate::AppError::Internal(e.into()))?;
    if !ok {
        return Err(crate::AppError::Unauthenticated);
    }
    Ok(user)
}
