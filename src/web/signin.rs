//! Signing in through the OpenID Connect provider (issue #54) and signing out: `GET
//! /signin/oidc` starts the code flow (the pending sign-in kept in the session), `GET
//! /signin/oidc/callback` finishes it, `POST /signout` ends our session and, when the provider
//! has an `end_session_endpoint`, sends the browser there to end theirs. Every failure renders
//! the sign-in page saying what failed, with a 4xx or 502/504, leaves no signed-in session and
//! writes only its audit entry. The checks themselves are `identity::Oidc`'s; who may sign in
//! is `services::identity`'s.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;

use super::AppState;
use super::auth;
use super::errors::PageError;
use super::pages::{SigninPage, safe_next};
use crate::error::AppError;
use crate::identity::{OidcError, PendingSignIn};
use crate::services::identity::{ExternalSignInError, record_refusal, sign_in_external};

/// Session key of the sign-in started and not finished.
const SESSION_PENDING: &str = "oidc_pending";
/// Session key of the ID token, the `id_token_hint` of sign-out.
const SESSION_ID_TOKEN: &str = "oidc_id_token";

type PageResult = Result<Response, PageError>;

#[derive(Deserialize, Default)]
pub(super) struct StartQuery {
    #[serde(default)]
    next: String,
}

fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// The HTTP status a failure is shown with.
fn status_of(e: &OidcError) -> StatusCode {
    match e {
        OidcError::Unreachable { .. } | OidcError::Discovery { .. } => StatusCode::BAD_GATEWAY,
        OidcError::Slow { .. } => StatusCode::GATEWAY_TIMEOUT,
        OidcError::BadIdToken(_) | OidcError::NoIdToken | OidcError::NoName(_) => {
            StatusCode::UNAUTHORIZED
        }
        OidcError::Provider(_) => StatusCode::FORBIDDEN,
        OidcError::NoPending
        | OidcError::WrongState
        | OidcError::NoCode
        | OidcError::CodeRefused(_) => StatusCode::BAD_REQUEST,
    }
}

/// Shows a failed sign-in: the session ended (no half-made session stays), the refusal
/// audited, the sign-in page saying what failed.
async fn failed(state: &AppState, session: &Session, next: &str, e: &OidcError) -> PageResult {
    let reason = e.to_string();
    tracing::warn!(reason = %reason, "OpenID Connect sign-in failed");
    auth::sign_out(session).await?;
    record_refusal(&state.pool, "-", "oidc", &reason).await?;
    Ok(SigninPage::failed(
        state,
        next,
        status_of(e),
        format!("Sign-in failed: {reason}."),
    ))
}

/// `GET /signin/oidc`: sends the browser to the provider's authorization endpoint.
pub(super) async fn start(
    State(state): State<AppState>,
    session: Session,
    Query(q): Query<StartQuery>,
) -> PageResult {
    let Some(oidc) = state.oidc.clone() else {
        return Err(AppError::NotFound("OpenID Connect sign-in (not configured)".into()).into());
    };
    let next = safe_next(&q.next);
    match oidc.begin(next.clone(), now_unix()).await {
        Ok((url, pending)) => {
            session
                .insert(SESSION_PENDING, pending)
                .await
                .map_err(|e| AppError::Internal(e.into()))?;
            Ok(Redirect::to(url.as_str()).into_response())
        }
        Err(e) => failed(&state, &session, &next, &e).await,
    }
}

#[derive(Deserialize, Default)]
pub(super) struct CallbackQuery {
    #[serde(default)]
    code: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    error_description: String,
}

/// `GET /signin/oidc/callback`: checks the answer, signs the person in (or refuses them) and
/// goes on to where they were going.
pub(super) async fn callback(
    State(state): State<AppState>,
    session: Session,
    Query(q): Query<CallbackQuery>,
) -> PageResult {
    let Some(oidc) = state.oidc.clone() else {
        return Err(AppError::NotFound("OpenID Connect sign-in (not configured)".into()).into());
    };
    let pending: Option<PendingSignIn> = session.remove(SESSION_PENDING).await.ok().flatten();
    let Some(pending) = pending else {
        return failed(&state, &session, "/incidents", &OidcError::NoPending).await;
    };
    if !q.error.is_empty() {
        let words = if q.error_description.is_empty() {
            q.error.clone()
        } else {
            format!("{} ({})", q.error_description, q.error)
        };
        return failed(&state, &session, &pending.next, &OidcError::Provider(words)).await;
    }
    let verified = match oidc.finish(&pending, &q.state, &q.code, now_unix()).await {
        Ok(v) => v,
        Err(e) => return failed(&state, &session, &pending.next, &e).await,
    };
    match sign_in_external(
        &state.pool,
        &state.settings.identity.roles,
        &verified.identity,
    )
    .await
    {
        Ok(user) => {
            state.users.forget(user.id);
            auth::establish(
                &session,
                &user,
                &[(SESSION_ID_TOKEN, verified.id_token.into())],
            )
            .await?;
            Ok(Redirect::to(&pending.next).into_response())
        }
        Err(ExternalSignInError::Refused(r)) => {
            // Audited by the service already.
            auth::sign_out(&session).await?;
            Ok(SigninPage::failed(
                &state,
                &pending.next,
                StatusCode::FORBIDDEN,
                format!("Sign-in refused: {r}."),
            ))
        }
        Err(ExternalSignInError::App(e)) => Err(e.into()),
    }
}

/// `POST /signout`: ends our session; when the person signed in through the provider and it has
/// an `end_session_endpoint`, goes there to end theirs (it sends the browser back to the sign-in
/// page).
pub(super) async fn signout(State(state): State<AppState>, session: Session) -> PageResult {
    let id_token: Option<String> = session.get(SESSION_ID_TOKEN).await.ok().flatten();
    auth::sign_out(&session).await?;
    let mut res = signed_out(&state, id_token).await;
    // What the browser kept of this site's pages is cleared (`Clear-Site-Data: "cache"`, W3C
    // Clear Site Data §3.1): incident pages may be kept to be revalidated
    // (`super::page_cache::REVALIDATE`), and after sign-out Back must not show one.
    res.headers_mut().insert(
        axum::http::HeaderName::from_static("clear-site-data"),
        axum::http::HeaderValue::from_static("\"cache\""),
    );
    Ok(res)
}

/// Where a signed-out browser goes: the provider's end-session endpoint when there is one (with
/// a CSP naming its origin), else the sign-in page saying so.
async fn signed_out(state: &AppState, id_token: Option<String>) -> axum::response::Response {
    if let (Some(oidc), Some(id_token)) = (state.oidc.as_ref(), id_token)
        && let Some(url) = oidc.end_session_url(&id_token).await
    {
        // The sign-out form's redirect leaves the site: the page's `form-action 'self'` would
        // stop it, so this answer names the provider's origin too.
        let csp = super::CSP.replace(
            "form-action 'self'",
            &format!("form-action 'self' {}", url.origin().ascii_serialization()),
        );
        let mut res = Redirect::to(url.as_str()).into_response();
        if let Ok(v) = axum::http::HeaderValue::from_str(&csp) {
            res.headers_mut()
                .insert(axum::http::header::CONTENT_SECURITY_POLICY, v);
        }
        return res;
    }
    Redirect::to("/signin?signed_out=1").into_response()
}
