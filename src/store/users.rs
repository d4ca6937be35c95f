//! Users and their API tokens. Passwords arrive already hashed (PHC string); tokens are stored as
//! the hex SHA-256 of the token (tokens are 256-bit random, so a fast hash is enough).

use sqlx::AnyPool;

use super::{db_time, is_unique_violation, now};
use crate::domain::{Role, UserName};
use crate::error::{AppError, AppResult};

/// A user account as the rest of the app sees it (no secrets).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct User {
    /// Row id.
    pub id: i64,
    /// Sign-in name.
    pub name: String,
    /// Permissions.
    pub role: Role,
    /// IANA zone name chosen in the profile (e.g. `Europe/Paris`); `None` = use the browser's.
    pub time_zone: Option<String>,
}

#[derive(sqlx::FromRow)]
struct UserRow {
    id: i64,
    name: String,
    role: String,
    time_zone: Option<String>,
}

impl UserRow {
    fn into_user(self) -> AppResult<User> {
        Ok(User {
            id: self.id,
            name: self.name,
            role: Role::parse(&self.role)
                .map_err(|e| AppError::Internal(anyhow::anyhow!("stored role: {e}")))?,
            time_zone: self.time_zone,
        })
    }
}

/// Creates a user.
///
/// # Errors
/// [`AppError::Conflict`] when the name is taken.
pub async fn create(
    pool: &AnyPool,
    name: &UserName,
    role: Role,
    password_hash: Option<&str>,
) -> AppResult<User> {
    let res = sqlx::query_scalar::<_, i64>(
        "INSERT INTO users (name, role, password_hash, created_at) VALUES ($1, $2, $3, $4) \
         RETURNING id",
    )
    .bind(name.as_str())
    .bind(role.as_str())
    .bind(password_hash)
    .bind(db_time(now()))
    .fetch_one(pool)
    .await;
    match res {
        Ok(id) => Ok(User {
            id,
            name: name.as_str().to_string(),
            role,
            time_zone: None,
        }),
        Err(e) if is_unique_violation(&e) => Err(AppError::Conflict(format!(
            "a user named {} already exists",
            name.as_str()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Stores the SHA-256 (hex) of a new API token for `user_id`.
///
/// # Errors
/// Database errors.
pub async fn add_token(pool: &AnyPool, user_id: i64, token_sha256: &str) -> AppResult<()> {
    sqlx::query("INSERT INTO api_tokens (user_id, token_sha256, created_at) VALUES ($1, $2, $3)")
        .bind(user_id)
        .bind(token_sha256)
        .bind(db_time(now()))
        .execute(pool)
        .await?;
    Ok(())
}

/// Finds the user owning the token with this SHA-256 (hex).
///
/// # Errors
/// Database errors.
pub async fn find_by_token(pool: &AnyPool, token_sha256: &str) -> AppResult<Option<User>> {
    let row: Option<UserRow> = sqlx::query_as(
        "SELECT u.id, u.name, u.role, u.time_zone FROM users u
         JOIN api_tokens t ON t.user_id = u.id WHERE t.token_sha256 = $1",
    )
    .bind(token_sha256)
    .fetch_optional(pool)
    .await?;
    row.map(UserRow::into_user).transpose()
}

/// Finds a user by id.
///
/// # Errors
/// Database errors.
pub async fn find(pool: &AnyPool, id: i64) -> AppResult<Option<User>> {
    let row: Option<UserRow> =
        sqlx::query_as("SELECT id, name, role, time_zone FROM users WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?;
    row.map(UserRow::into_user).transpose()
}

/// Finds a user and their password hash (PHC string) by name, for sign-in.
///
/// # Errors
/// Database errors.
pub async fn find_with_password(
    pool: &AnyPool,
    name: &str,
) -> AppResult<Option<(User, Option<String>)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        user: UserRow,
        password_hash: Option<String>,
    }
    let row: Option<Row> = sqlx::query_as(
        "SELECT id, name, role, time_zone, password_hash FROM users WHERE name = $1",
    )
    .bind(name)
    .fetch_optional(pool)
    .await?;
    row.map(|r| Ok((r.user.into_user()?, r.password_hash)))
        .transpose()
}

/// Sets (or clears, with `None`) the user's preferred time zone.
///
/// # Errors
/// Database errors.
pub async fn set_time_zone(pool: &AnyPool, id: i64, zone: Option<&str>) -> AppResult<()> {
    sqlx::query("UPDATE users SET time_zone = $1 WHERE id = $2")
        .bind(zone)
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Number of users (0 on a fresh install: the sign-in page then explains how to create one).
///
/// # Errors
/// Database errors.
pub async fn count(pool: &AnyPool) -> AppResult<i64> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM users")
        .fetch_one(pool)
        .await?)
}
