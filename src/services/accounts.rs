//! Accounts that can be closed (issue #54): named API tokens with an optional expiry, their
//! revocation, password changes, and disabling or enabling a user. Each is one write
//! transaction with its audit entry. A password change and a disable move the user's
//! generation, so their sessions end at the next request on every instance; a disable and a
//! revocation stop tokens at once (both are checked in SQL on every token request:
//! `store::tokens`).

use sqlx::AnyPool;

use crate::domain::ValidationError;
use crate::error::{AppError, AppResult};
use crate::store::tokens::{self, TokenInfo};
use crate::store::users::{self, Account, User};

/// Shortest password accepted (the CLI's rule too).
pub const MIN_PASSWORD_CHARS: usize = 8;

/// Longest token lifetime offered, days.
pub const MAX_TOKEN_DAYS: u32 = 3650;

/// A token's name and lifetime as typed: a name of 1–64 characters and `expires_in_days` empty
/// (never) or 1–[`MAX_TOKEN_DAYS`].
///
/// # Errors
/// [`ValidationError`] on `name` or `expires_in_days`.
pub fn parse_token_request(
    name: &str,
    expires_in_days: &str,
) -> Result<(String, Option<u32>), ValidationError> {
    let name = crate::domain::required_text("name", name, 64)?;
    let days = match expires_in_days.trim() {
        "" => None,
        d => match d.parse::<u32>() {
            Ok(n) if (1..=MAX_TOKEN_DAYS).contains(&n) => Some(n),
            _ => {
                return Err(ValidationError::new(
                    "expires_in_days",
                    format!(
                        "'{d}' is not a number of days from 1 to {MAX_TOKEN_DAYS}; leave empty for a token that does not expire"
                    ),
                ));
            }
        },
    };
    Ok((name, days))
}

/// Makes a token named `name` for `owner` (expiring after `days`, never with `None`) on behalf
/// of `actor`; returns the token (`im_` + 64 hex digits), shown once: only its SHA-256 is kept.
///
/// # Errors
/// Database errors.
pub async fn create_token(
    pool: &AnyPool,
    actor: &str,
    owner: &User,
    name: &str,
    days: Option<u32>,
) -> AppResult<(i64, String)> {
    let bytes: [u8; 32] = rand::random();
    let token = format!("im_{}", hex::encode(bytes));
    let expires =
        days.map(|d| crate::store::now() + jiff::SignedDuration::from_hours(24 * i64::from(d)));
    let mut w = crate::store::Write::begin(pool).await?;
    let id = tokens::add_in(
        w.tx(),
        owner.id,
        &super::users::token_digest(&token),
        name,
        expires,
    )
    .await?;
    let lifetime = days.map_or_else(
        || "no expiry".to_string(),
        |d| format!("expires in {d} days"),
    );
    w.audit_by(
        actor,
        "token.create",
        &owner.name,
        &format!("token {id} \"{name}\", {lifetime}"),
    )
    .await?;
    w.commit().await?;
    Ok((id, token))
}

/// Revokes token `id` on behalf of `actor`; with `only_of` set, only a token of that user (the
/// profile page: another user's token is "not found"). Revoking a revoked token is a no-op.
///
/// # Errors
/// [`AppError::NotFound`]; database errors.
pub async fn revoke_token(
    pool: &AnyPool,
    actor: &str,
    id: i64,
    only_of: Option<i64>,
) -> AppResult<TokenInfo> {
    let mut w = crate::store::Write::begin(pool).await?;
    let token = tokens::find_in(w.tx(), id)
        .await?
        .filter(|t| only_of.is_none_or(|u| u == t.user_id))
        .ok_or_else(|| AppError::NotFound(format!("token {id}")))?;
    if tokens::revoke_in(w.tx(), id).await? {
        w.audit_by(
            actor,
            "token.revoke",
            &token.user_name,
            &format!("token {id} \"{}\"", token.name),
        )
        .await?;
    }
    w.commit().await?;
    users::accounts_changed();
    Ok(token)
}

/// The tokens of user `id`, newest first.
///
/// # Errors
/// Database errors.
pub async fn tokens_of(pool: &AnyPool, id: i64) -> AppResult<Vec<TokenInfo>> {
    tokens::list_for(pool, id).await
}

/// Every token not revoked, of every user (the admin page).
///
/// # Errors
/// Database errors.
pub async fn all_tokens(pool: &AnyPool) -> AppResult<Vec<TokenInfo>> {
    tokens::list_unrevoked(pool).await
}

/// Every account (the admin page).
///
/// # Errors
/// Database errors.
pub async fn accounts(pool: &AnyPool) -> AppResult<Vec<Account>> {
    users::list_accounts(pool).await
}

fn check_new_password(new: &str) -> Result<(), ValidationError> {
    if new.chars().count() < MIN_PASSWORD_CHARS {
        return Err(ValidationError::new(
            "new_password",
            format!("must be at least {MIN_PASSWORD_CHARS} characters"),
        ));
    }
    Ok(())
}

/// Changes `user`'s password after checking `current` (the profile page). The user's sessions
/// end (their generation moves): the caller signs the current browser in again.
///
/// # Errors
/// [`ValidationError`] on `current_password` when it is wrong or the account has no password
/// (it signs in through the identity provider), on `new_password` when too short; database
/// errors.
pub async fn change_password(
    pool: &AnyPool,
    user: &User,
    current: &str,
    new: &str,
) -> AppResult<User> {
    check_new_password(new)?;
    match super::users::check_password(pool, &user.name, current).await {
        Ok(_) => {}
        Err(AppError::Unauthenticated) => {
            let has_password = users::find_with_password(pool, &user.name)
                .await?
                .is_some_and(|(_, h)| h.is_some());
            return Err(ValidationError::new(
                "current_password",
                if has_password {
                    "is not your current password"
                } else {
                    "your account signs in through the identity provider and has no password here"
                },
            )
            .into());
        }
        Err(e) => return Err(e),
    }
    set_password(pool, &user.name, &user.name, new).await
}

/// Sets the password of the user named `name` on behalf of `actor` (the CLI), ending their
/// sessions.
///
/// # Errors
/// [`ValidationError`] when too short; [`AppError::NotFound`]; database errors.
pub async fn set_password(pool: &AnyPool, actor: &str, name: &str, new: &str) -> AppResult<User> {
    check_new_password(new)?;
    let new = new.to_string();
    let hash = tokio::task::spawn_blocking(move || password_auth::generate_hash(new))
        .await
        .map_err(|e| AppError::Internal(e.into()))?;
    let mut w = crate::store::Write::begin(pool).await?;
    let (user, _) = users::find_by_name_in(w.tx(), name)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("user {name}")))?;
    users::set_password_in(w.tx(), user.id, &hash).await?;
    w.audit_by(actor, "user.password_change", &user.name, "sessions ended")
        .await?;
    w.commit().await?;
    users::accounts_changed();
    Ok(User {
        generation: user.generation + 1,
        ..user
    })
}

/// Disables (`disabled`) or enables the user named `name` on behalf of `actor`; a disabled
/// user's sessions and tokens stop at once. An admin cannot disable their own account.
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Conflict`] for one's own account; database errors.
pub async fn set_disabled(
    pool: &AnyPool,
    actor: &str,
    name: &str,
    disabled: bool,
) -> AppResult<bool> {
    if disabled && actor == name {
        return Err(AppError::Conflict(
            "you cannot disable your own account; ask another administrator".into(),
        ));
    }
    let mut w = crate::store::Write::begin(pool).await?;
    let (user, _) = users::find_by_name_in(w.tx(), name)
        .await?
        .ok_or_else(|| AppError::NotFound(format!("user {name}")))?;
    let changed = users::set_disabled_in(w.tx(), user.id, disabled).await?;
    if changed {
        let (action, detail) = if disabled {
            ("user.disable", "sessions and API tokens ended")
        } else {
            ("user.enable", "may sign in again")
        };
        w.audit_by(actor, action, &user.name, detail).await?;
    }
    w.commit().await?;
    users::accounts_changed();
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_request_needs_a_name_and_a_sane_lifetime() {
        assert_eq!(
            parse_token_request(" ci ", "30").unwrap(),
            ("ci".to_string(), Some(30))
        );
        assert_eq!(parse_token_request("ci", "").unwrap().1, None);
        assert!(parse_token_request("", "").is_err());
        assert!(parse_token_request("ci", "0").is_err());
        assert!(parse_token_request("ci", "soon").is_err());
        assert!(parse_token_request("ci", "99999").is_err());
    }
}
