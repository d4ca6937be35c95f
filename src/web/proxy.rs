//! The authenticating proxy (issue #54): oauth2-proxy, an ingress' `auth-url` or any proxy that
//! signs people in and passes who they are in a header (`X-Forwarded-Email`,
//! `X-Auth-Request-User`) and optionally their groups (`X-Forwarded-Groups`, comma-separated).
//! The headers are believed only from a `--trusted-proxies` address; from anyone else they are
//! ignored and logged, and the request goes on as if they were absent. A trusted header makes a
//! session for the user (created on first use, the role from the groups as for OpenID
//! Connect), made again whenever the header's user or groups change.

use axum::http::request::Parts;
use tower_sessions::Session;

use super::AppState;
use crate::domain::identity::ExternalIdentity;
use crate::error::AppError;
use crate::services::identity::{ExternalSignInError, sign_in_external};
use crate::store::users::User;

/// Session key holding the proxy identity (user and groups) the session was made for.
const SESSION_PROXY: &str = "proxy_identity";

/// The user an authenticating proxy names on this request, when proxy sign-in is configured
/// and the header is present: `None` without the header, or from an untrusted address (logged);
/// `Some(Err)` when the person is refused (a 403 with the reason) or the database fails.
pub async fn proxy_user(
    parts: &Parts,
    state: &AppState,
    session: &Session,
) -> Option<Result<User, AppError>> {
    let proxy = state.settings.identity.proxy.as_ref()?;
    let name = parts
        .headers
        .get(&proxy.user_header)?
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|n| !n.is_empty())?
        .to_string();
    let (peer, trusted) = state.limits.peer(parts)?;
    if !trusted {
        tracing::warn!(
            peer = %peer,
            header = %proxy.user_header,
            "an authenticating-proxy header came from an address not in --trusted-proxies; ignored"
        );
        return None;
    }
    let mut groups: Vec<String> = proxy
        .groups_header
        .as_ref()
        .map(|h| {
            parts
                .headers
                .get_all(h)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(str::trim)
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    groups.sort();
    let key = format!("{name}\u{1f}{}", groups.join("\u{1f}"));
    let made_for: Option<String> = session.get(SESSION_PROXY).await.ok().flatten();
    if made_for.as_deref() == Some(key.as_str()) {
        match super::auth::session_user(state, session).await {
            Ok(Some(u)) => return Some(Ok(u)),
            Ok(None) => {}
            Err(e) => return Some(Err(e)),
        }
    }
    let who = ExternalIdentity {
        source: "proxy",
        name,
        groups,
    };
    let user = match sign_in_external(&state.pool, &state.settings.identity.roles, &who).await {
        Ok(u) => u,
        Err(ExternalSignInError::Refused(r)) => {
            return Some(Err(AppError::Forbidden(format!("Sign-in refused: {r}."))));
        }
        Err(ExternalSignInError::App(e)) => return Some(Err(e)),
    };
    state.users.forget(user.id);
    Some(
        super::auth::establish(session, &user, &[(SESSION_PROXY, key.into())])
            .await
            .map(|()| user),
    )
}
