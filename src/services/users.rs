//! Users and their API tokens: creating a user (the CLI, the demo) and issuing a token (the CLI,
//! sign-in flows). Only a token's SHA-256 is stored ([`token_digest`]), so a token is shown once.

use sqlx::AnyPool;

use crate::domain::{Role, UserName};
use crate::error::AppResult;
use crate::store::users;

/// Creates a new API token for `user_id` and returns it (`im_` + 64 hex digits). Only its
/// SHA-256 is stored, so it is shown once.
///
/// # Errors
/// Database errors.
pub async fn issue_token(pool: &AnyPool, user_id: i64) -> AppResult<String> {
    let bytes: [u8; 32] = rand::random();
    let token = format!("im_{}", hex::encode(bytes));
    users::add_token(pool, user_id, &token_digest(&token)).await?;
    Ok(token)
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
    issue_token(pool, user.id).await
}
