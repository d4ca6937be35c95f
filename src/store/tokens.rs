//! API tokens (issue #54): a name, an optional expiry, the last use and the revocation instant.
//! Only the token's SHA-256 (hex) is stored. A token authenticates while it is not revoked, not
//! expired, and its user is enabled: [`find_user`] and [`user_generation`] check all three in
//! SQL, so a revocation or a disable made on any instance counts at the next request.

use sqlx::AnyPool;

use super::users::{USER_COLUMNS, User, UserRow};
use super::{Tx, db_time, now};
use crate::error::AppResult;

/// The conditions of a live token of an enabled user (`$2`: now, [`db_time`]).
const LIVE: &str = "t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > $2) \
                    AND u.disabled_at IS NULL";

/// An API token as its owner and the admins see it (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct TokenInfo {
    /// Row id.
    pub id: i64,
    /// The owner's user id.
    pub user_id: i64,
    /// The owner's name.
    pub user_name: String,
    /// The name given at creation (empty for tokens made before names existed).
    pub name: String,
    /// When it was made (RFC 3339 UTC).
    pub created_at: String,
    /// When it stops working; `None`: never.
    pub expires_at: Option<String>,
    /// Its last use, to the minute; `None`: never used.
    pub last_used_at: Option<String>,
    /// When it was revoked; `None`: live (unless expired).
    pub revoked_at: Option<String>,
}

impl TokenInfo {
    /// Whether the token still authenticates at `now_text` ([`db_time`]): not revoked, not expired.
    pub fn is_live(&self, now_text: &str) -> bool {
        self.revoked_at.is_none() && self.expires_at.as_deref().is_none_or(|e| e > now_text)
    }
}

/// Stores a new token (its SHA-256) for `user_id` inside a write transaction; returns its id.
///
/// # Errors
/// Database errors.
pub async fn add_in(
    tx: &mut Tx,
    user_id: i64,
    token_sha256: &str,
    name: &str,
    expires_at: Option<jiff::Timestamp>,
) -> AppResult<i64> {
    Ok(sqlx::query_scalar(
        "INSERT INTO api_tokens (user_id, token_sha256, created_at, name, expires_at) \
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(user_id)
    .bind(token_sha256)
    .bind(db_time(now()))
    .bind(name)
    .bind(expires_at.map(db_time))
    .fetch_one(&mut **tx)
    .await?)
}

/// The enabled user holding the live token with this SHA-256, if any.
///
/// # Errors
/// Database errors.
pub async fn find_user(pool: &AnyPool, token_sha256: &str) -> AppResult<Option<User>> {
    let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {USER_COLUMNS} FROM users u JOIN api_tokens t ON t.user_id = u.id \
         WHERE t.token_sha256 = $1 AND {LIVE}"
    )))
    .bind(token_sha256)
    .bind(db_time(now()))
    .fetch_optional(pool)
    .await?;
    row.map(UserRow::into_user).transpose()
}

/// The generation of the user holding the live token with this SHA-256 (`None`: the token is
/// revoked, expired or unknown, or its user disabled): the one read a request makes when the
/// token's user is already known.
///
/// # Errors
/// Database errors.
pub async fn user_generation(pool: &AnyPool, token_sha256: &str) -> AppResult<Option<i64>> {
    Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT u.generation FROM users u JOIN api_tokens t ON t.user_id = u.id \
         WHERE t.token_sha256 = $1 AND {LIVE}"
    )))
    .bind(token_sha256)
    .bind(db_time(now()))
    .fetch_optional(pool)
    .await?)
}

/// Records a use of the token now (callers do it at most once a minute per token).
///
/// # Errors
/// Database errors.
pub async fn touch(pool: &AnyPool, token_sha256: &str) -> AppResult<()> {
    sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE token_sha256 = $2")
        .bind(db_time(now()))
        .bind(token_sha256)
        .execute(pool)
        .await?;
    Ok(())
}

const INFO: &str = "SELECT t.id, t.user_id, u.name AS user_name, t.name, t.created_at, \
                    t.expires_at, t.last_used_at, t.revoked_at \
                    FROM api_tokens t JOIN users u ON u.id = t.user_id";

/// The tokens of `user_id`, newest first.
///
/// # Errors
/// Database errors.
pub async fn list_for(pool: &AnyPool, user_id: i64) -> AppResult<Vec<TokenInfo>> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{INFO} WHERE t.user_id = $1 ORDER BY t.id DESC"
    )))
    .bind(user_id)
    .fetch_all(pool)
    .await?)
}

/// Every token not revoked, of every user, by user name then newest first (the admin page).
///
/// # Errors
/// Database errors.
pub async fn list_unrevoked(pool: &AnyPool) -> AppResult<Vec<TokenInfo>> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{INFO} WHERE t.revoked_at IS NULL ORDER BY u.name, t.id DESC"
    )))
    .fetch_all(pool)
    .await?)
}

/// Token `id` (whoever owns it), if it exists.
///
/// # Errors
/// Database errors.
pub async fn find_in(tx: &mut Tx, id: i64) -> AppResult<Option<TokenInfo>> {
    Ok(
        sqlx::query_as(sqlx::AssertSqlSafe(format!("{INFO} WHERE t.id = $1")))
            .bind(id)
            .fetch_optional(&mut **tx)
            .await?,
    )
}

/// Revokes token `id` now; returns whether it was live until then.
///
/// # Errors
/// Database errors.
pub async fn revoke_in(tx: &mut Tx, id: i64) -> AppResult<bool> {
    let done =
        sqlx::query("UPDATE api_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(db_time(now()))
            .bind(id)
            .execute(&mut **tx)
            .await?;
    Ok(done.rows_affected() > 0)
}
