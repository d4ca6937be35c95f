//! Users and their API tokens. Passwords arrive already hashed (PHC string); tokens are stored as
//! the hex SHA-256 of the token (tokens are 256-bit random, so a fast hash is enough).

use sqlx::AnyPool;

use super::{Tx, db_time, is_unique_violation, now};
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
    /// Moved by every change that must end the user's sessions (password change, disable, a
    /// role change from claims); a session made under another generation is refused.
    #[serde(skip)]
    pub generation: i64,
}

/// The columns of a [`UserRow`], for `SELECT`s.
pub(crate) const USER_COLUMNS: &str = "u.id, u.name, u.role, u.time_zone, u.generation";

#[derive(sqlx::FromRow)]
pub(crate) struct UserRow {
    id: i64,
    name: String,
    role: String,
    time_zone: Option<String>,
    generation: i64,
}

impl UserRow {
    pub(crate) fn into_user(self) -> AppResult<User> {
        Ok(User {
            id: self.id,
            name: self.name,
            role: Role::parse(&self.role)
                .map_err(|e| AppError::Internal(anyhow::anyhow!("stored role: {e}")))?,
            time_zone: self.time_zone,
            generation: self.generation,
        })
    }
}

/// Where an account came from (`users.source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `incidentmind user add`.
    Local,
    /// An OpenID Connect sign-in.
    Oidc,
    /// An authenticating proxy's user header.
    Proxy,
}

impl Source {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Oidc => "oidc",
            Self::Proxy => "proxy",
        }
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
            generation: 0,
        }),
        Err(e) if is_unique_violation(&e) => Err(AppError::Conflict(format!(
            "a user named {} already exists",
            name.as_str()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Finds an enabled user by id (`None` for a disabled or unknown one).
///
/// # Errors
/// Database errors.
pub async fn find(pool: &AnyPool, id: i64) -> AppResult<Option<User>> {
    let row: Option<UserRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {USER_COLUMNS} FROM users u WHERE u.id = $1 AND u.disabled_at IS NULL"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await?;
    row.map(UserRow::into_user).transpose()
}

/// This process's count of committed changes to who may sign in: a token revoked, a user
/// disabled or enabled, a password or a role changed ([`accounts_changed`]). A request's check
/// of a token or a session remembered under one count is not reused once the count moved.
static ACCOUNTS_EPOCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The count of [`ACCOUNTS_EPOCH`] now.
pub fn accounts_epoch() -> u64 {
    ACCOUNTS_EPOCH.load(std::sync::atomic::Ordering::Acquire)
}

/// Says that a change to who may sign in was committed: call it after the commit, so a check
/// that read the database before the commit is not reused after it.
pub fn accounts_changed() {
    ACCOUNTS_EPOCH.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
}

/// The generation of enabled user `id` (`None` for a disabled or unknown one): the one read a
/// signed-in request makes when the user is already known, so a password change, a disable or
/// a role change made on any instance ends the session at its next request.
///
/// # Errors
/// Database errors.
pub async fn generation(pool: &AnyPool, id: i64) -> AppResult<Option<i64>> {
    Ok(
        sqlx::query_scalar("SELECT generation FROM users WHERE id = $1 AND disabled_at IS NULL")
            .bind(id)
            .fetch_optional(pool)
            .await?,
    )
}

/// The user named `name` (enabled or not) inside a write transaction, with whether it is
/// disabled.
///
/// # Errors
/// Database errors.
pub async fn find_by_name_in(tx: &mut Tx, name: &str) -> AppResult<Option<(User, bool)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        user: UserRow,
        disabled: i64,
    }
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {USER_COLUMNS}, CASE WHEN u.disabled_at IS NULL THEN 0 ELSE 1 END AS disabled \
         FROM users u WHERE u.name = $1"
    )))
    .bind(name)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|r| Ok((r.user.into_user()?, r.disabled != 0)))
        .transpose()
}

/// Creates a user inside a write transaction (first sign-in through the identity provider or
/// the proxy: no password).
///
/// # Errors
/// [`AppError::Conflict`] when the name is taken; database errors.
pub async fn create_in(
    tx: &mut Tx,
    name: &UserName,
    role: Role,
    source: Source,
) -> AppResult<User> {
    let res = sqlx::query_scalar::<_, i64>(
        "INSERT INTO users (name, role, password_hash, created_at, source) \
         VALUES ($1, $2, NULL, $3, $4) RETURNING id",
    )
    .bind(name.as_str())
    .bind(role.as_str())
    .bind(db_time(now()))
    .bind(source.as_str())
    .fetch_one(&mut **tx)
    .await;
    match res {
        Ok(id) => Ok(User {
            id,
            name: name.as_str().to_string(),
            role,
            time_zone: None,
            generation: 0,
        }),
        Err(e) if is_unique_violation(&e) => Err(AppError::Conflict(format!(
            "a user named {} already exists",
            name.as_str()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Sets user `id`'s role and moves its generation (its sessions end).
///
/// # Errors
/// Database errors.
pub async fn set_role_in(tx: &mut Tx, id: i64, role: Role) -> AppResult<()> {
    sqlx::query("UPDATE users SET role = $1, generation = generation + 1 WHERE id = $2")
        .bind(role.as_str())
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Sets user `id`'s password hash (PHC string) and moves its generation (its sessions end).
///
/// # Errors
/// Database errors.
pub async fn set_password_in(tx: &mut Tx, id: i64, hash: &str) -> AppResult<()> {
    sqlx::query("UPDATE users SET password_hash = $1, generation = generation + 1 WHERE id = $2")
        .bind(hash)
        .bind(id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Disables (`disabled`) or enables user `id` and moves its generation; returns whether the
/// state changed.
///
/// # Errors
/// Database errors.
pub async fn set_disabled_in(tx: &mut Tx, id: i64, disabled: bool) -> AppResult<bool> {
    let done = if disabled {
        sqlx::query(
            "UPDATE users SET disabled_at = $1, generation = generation + 1 \
             WHERE id = $2 AND disabled_at IS NULL",
        )
        .bind(db_time(now()))
        .bind(id)
        .execute(&mut **tx)
        .await?
    } else {
        sqlx::query(
            "UPDATE users SET disabled_at = NULL, generation = generation + 1 \
             WHERE id = $1 AND disabled_at IS NOT NULL",
        )
        .bind(id)
        .execute(&mut **tx)
        .await?
    };
    Ok(done.rows_affected() > 0)
}

/// An account as the admin page lists it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct Account {
    /// Row id.
    pub id: i64,
    /// Sign-in name.
    pub name: String,
    /// Role name.
    pub role: String,
    /// `local`, `oidc` or `proxy` ([`Source`]).
    pub source: String,
    /// When it was created (RFC 3339 UTC).
    pub created_at: String,
    /// When it was disabled; `None`: enabled.
    pub disabled_at: Option<String>,
    /// Whether it has a password (local sign-in).
    pub has_password: i64,
}

/// Every account, by name.
///
/// # Errors
/// Database errors.
pub async fn list_accounts(pool: &AnyPool) -> AppResult<Vec<Account>> {
    Ok(sqlx::query_as(
        "SELECT id, name, role, source, created_at, disabled_at, \
         CASE WHEN password_hash IS NULL THEN 0 ELSE 1 END AS has_password \
         FROM users ORDER BY name",
    )
    .fetch_all(pool)
    .await?)
}

/// Finds an enabled user and their password hash (PHC string) by name, for sign-in.
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
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {USER_COLUMNS}, u.password_hash FROM users u \
         WHERE u.name = $1 AND u.disabled_at IS NULL"
    )))
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
