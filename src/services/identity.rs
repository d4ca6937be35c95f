//! Signing in with the company's identity (issue #54): a person the identity provider or the
//! authenticating proxy vouched for becomes a user here — created on first sign-in, the role
//! re-read from their groups at every sign-in through [`RoleMapping::role_for`] — or is refused
//! with the reason. Every sign-in, refusal and role change from claims goes on the audit log,
//! in the same transaction as the change.

use sqlx::AnyPool;

use crate::domain::identity::{ExternalIdentity, Refusal, RoleMapping};
use crate::error::AppResult;
use crate::store::users::{self, Source, User};

/// How people sign in (`--oidc-…`, `--auth-proxy-…`, `--password-signin`).
#[derive(Debug, Clone)]
pub struct IdentitySettings {
    /// The OpenID Connect provider; `None`: no "Sign in with…" button.
    pub oidc: Option<crate::identity::OidcConfig>,
    /// The authenticating proxy's headers; `None`: no proxy sign-in.
    pub proxy: Option<ProxySettings>,
    /// Groups → role, for both.
    pub roles: RoleMapping,
    /// Whether the name-and-password form is offered and accepted.
    pub password_signin: bool,
}

impl Default for IdentitySettings {
    fn default() -> Self {
        Self {
            oidc: None,
            proxy: None,
            roles: RoleMapping::default(),
            password_signin: true,
        }
    }
}

/// The authenticating proxy's headers, honoured only from `--trusted-proxies` addresses.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// The header naming the user (`X-Forwarded-Email`, `X-Auth-Request-User`), lower-case.
    pub user_header: axum::http::HeaderName,
    /// The header listing the user's groups, comma-separated (`X-Forwarded-Groups`); `None`:
    /// everyone gets the default role.
    pub groups_header: Option<axum::http::HeaderName>,
}

/// Why an external sign-in did not give a user.
#[derive(Debug, thiserror::Error)]
pub enum ExternalSignInError {
    /// Refused by a rule; already audited.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The database failed.
    #[error(transparent)]
    App(#[from] crate::error::AppError),
}

/// Signs in the person `who` vouched for by `who.source`: refuses a disabled account or one
/// whose groups give no role; creates the user on first sign-in; sets the role their groups give
/// (a change moves the user's generation, so their other sessions end); audits the outcome.
///
/// # Errors
/// [`ExternalSignInError::Refused`] (audited as `user.sign_in_refused`); database errors.
pub async fn sign_in_external(
    pool: &AnyPool,
    roles: &RoleMapping,
    who: &ExternalIdentity,
) -> Result<User, ExternalSignInError> {
    let mut w = crate::store::Write::begin(pool).await?;
    let groups = if who.groups.is_empty() {
        "none".to_string()
    } else {
        who.groups.join(", ")
    };
    let decided = roles.role_for(who);
    let (name, role) = match decided {
        Ok(v) => v,
        Err(refusal) => {
            w.audit_by(
                &who.name,
                "user.sign_in_refused",
                who.source,
                &refusal.to_string(),
            )
            .await?;
            w.commit().await?;
            return Err(refusal.into());
        }
    };
    let source = if who.source == "proxy" {
        Source::Proxy
    } else {
        Source::Oidc
    };
    let user = match users::find_by_name_in(w.tx(), name.as_str()).await? {
        Some((_, true)) => {
            let refusal = Refusal::Disabled {
                name: name.as_str().to_string(),
            };
            w.audit_by(
                name.as_str(),
                "user.sign_in_refused",
                who.source,
                &refusal.to_string(),
            )
            .await?;
            w.commit().await?;
            return Err(refusal.into());
        }
        Some((user, false)) if user.role != role => {
            users::set_role_in(w.tx(), user.id, role).await?;
            w.audit_by(
                name.as_str(),
                "user.role_from_claims",
                name.as_str(),
                &format!("{} → {role} (groups: {groups})", user.role),
            )
            .await?;
            User {
                role,
                generation: user.generation + 1,
                ..user
            }
        }
        Some((user, false)) => user,
        None => {
            let user = users::create_in(w.tx(), &name, role, source).await?;
            w.audit_by(
                name.as_str(),
                "user.create",
                name.as_str(),
                &format!(
                    "first sign-in through {}: {role} (groups: {groups})",
                    who.source
                ),
            )
            .await?;
            user
        }
    };
    w.audit_by(
        &user.name,
        "user.sign_in",
        &user.name,
        &format!("{} as {} (groups: {groups})", who.source, user.role),
    )
    .await?;
    w.commit().await?;
    // A role changed from the claims: the user's other sessions and tokens are checked again.
    users::accounts_changed();
    Ok(user)
}

/// Records a sign-in with a password.
///
/// # Errors
/// Database errors.
pub async fn record_password_sign_in(pool: &AnyPool, user: &User) -> AppResult<()> {
    let mut w = crate::store::Write::begin(pool).await?;
    w.audit_by(
        &user.name,
        "user.sign_in",
        &user.name,
        &format!("password as {}", user.role),
    )
    .await?;
    w.commit().await?;
    Ok(())
}

/// Records a sign-in that failed before anyone was known (a wrong state, a refused code, a bad
/// ID token, a provider down): `claimed` is whatever name is known (often `-`), `source` the
/// way in (`oidc`), `reason` the words the sign-in page showed.
///
/// # Errors
/// Database errors.
pub async fn record_refusal(
    pool: &AnyPool,
    claimed: &str,
    source: &str,
    reason: &str,
) -> AppResult<()> {
    let mut w = crate::store::Write::begin(pool).await?;
    w.audit_by(claimed, "user.sign_in_refused", source, reason)
        .await?;
    w.commit().await?;
    Ok(())
}
