//! Accounts (issue #54): the profile page (time zone, password change, one's API tokens: make
//! one with a name and an optional lifetime, see when each was last used, revoke it) and the
//! admins' users page (every account with where it came from, disable and enable, every live
//! token with its revocation). Handlers parse, authorize, call `services::accounts`, render.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;

use super::AppState;
use super::auth::{self, CurrentUser};
use super::errors::{PageError, PageForm};
use super::layout::Layout;
use super::view::Clock;
use crate::domain::Role;
use crate::error::AppError;
use crate::services::accounts;
use crate::store::tokens::TokenInfo;
use crate::store::users::User;

type PageResult = Result<Response, PageError>;

/// A token as a table row: times in the viewer's zone.
pub(super) struct TokenRow {
    id: i64,
    owner: String,
    name: String,
    created: String,
    expires: String,
    last_used: String,
    /// `live`, `expired` or `revoked`.
    status: &'static str,
}

fn rows(tokens: Vec<TokenInfo>, clock: &Clock) -> Vec<TokenRow> {
    let now = crate::store::db_time(crate::store::now());
    let when = |t: &Option<String>, none: &str| {
        t.as_deref()
            .and_then(|t| crate::store::parse_db_time(t).ok())
            .map_or_else(|| none.to_string(), |ts| clock.fmt(&ts))
    };
    tokens
        .into_iter()
        .map(|t| TokenRow {
            id: t.id,
            status: if t.revoked_at.is_some() {
                "revoked"
            } else if t.is_live(&now) {
                "live"
            } else {
                "expired"
            },
            owner: t.user_name.clone(),
            name: if t.name.is_empty() {
                "(unnamed)".into()
            } else {
                t.name.clone()
            },
            created: when(&Some(t.created_at.clone()), ""),
            expires: when(&t.expires_at, "never"),
            last_used: when(&t.last_used_at, "never"),
        })
        .collect()
}

#[derive(Template, WebTemplate)]
#[template(path = "profile.html")]
struct ProfilePage {
    layout: Layout,
    time_zone: String,
    browser_zone: String,
    error: Option<String>,
    password_error: Option<String>,
    token_error: Option<String>,
    /// A token just made: shown once.
    new_token: Option<String>,
    notice: Option<String>,
    tokens: Vec<TokenRow>,
    token_name: String,
    token_days: String,
}

impl ProfilePage {
    async fn of(state: &AppState, user: &User, headers: &HeaderMap) -> Result<Self, AppError> {
        let clock = Clock::for_viewer(Some(user), headers);
        let tokens = accounts::tokens_of(&state.pool, user.id).await?;
        Ok(Self {
            layout: Layout::new(Some(user), "Profile").with_current("profile"),
            time_zone: user.time_zone.clone().unwrap_or_default(),
            browser_zone: Clock::for_viewer(None, headers).zone_name,
            error: None,
            password_error: None,
            token_error: None,
            new_token: None,
            notice: None,
            tokens: rows(tokens, &clock),
            token_name: String::new(),
            token_days: "90".into(),
        })
    }
}

/// `GET /profile`.
pub(super) async fn profile_page(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
) -> PageResult {
    Ok(ProfilePage::of(&state, &user, &headers)
        .await?
        .into_response())
}

#[derive(Deserialize)]
pub(super) struct ProfileForm {
    #[serde(default)]
    time_zone: String,
}

/// `POST /profile`: the time zone.
pub(super) async fn profile_submit(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    PageForm(form): PageForm<ProfileForm>,
) -> PageResult {
    let zone = form.time_zone.trim();
    if !zone.is_empty() && !super::view::is_known_zone(zone) {
        let mut page = ProfilePage::of(&state, &user, &headers).await?;
        page.time_zone = zone.to_string();
        page.error = Some(format!(
            "'{zone}' is not a known time zone; use an IANA name such as Europe/Paris or America/New_York, or leave empty to use your browser's"
        ));
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
    }
    crate::services::users::set_time_zone(
        &state.pool,
        user.id,
        Some(zone).filter(|z| !z.is_empty()),
    )
    .await?;
    state.users.forget(user.id);
    Ok(Redirect::to("/profile").into_response())
}

#[derive(Deserialize)]
pub(super) struct PasswordForm {
    #[serde(default)]
    current_password: String,
    #[serde(default)]
    new_password: String,
    #[serde(default)]
    repeat_password: String,
}

/// `POST /profile/password`: changes one's password; every other session of the user ends,
/// this browser stays signed in (a new session).
pub(super) async fn password_submit(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    session: Session,
    headers: HeaderMap,
    PageForm(form): PageForm<PasswordForm>,
) -> PageResult {
    let outcome = if form.new_password == form.repeat_password {
        accounts::change_password(
            &state.pool,
            &user,
            &form.current_password,
            &form.new_password,
        )
        .await
    } else {
        Err(crate::domain::ValidationError::new(
            "repeat_password",
            "does not match the new password",
        )
        .into())
    };
    match outcome {
        Ok(changed) => {
            state.users.forget(user.id);
            auth::establish(&session, &changed, &[]).await?;
            let mut page = ProfilePage::of(&state, &changed, &headers).await?;
            page.notice = Some(
                "Password changed. Your other sessions are signed out; API tokens keep working."
                    .into(),
            );
            Ok(page.into_response())
        }
        Err(AppError::Validation(e)) => {
            let mut page = ProfilePage::of(&state, &user, &headers).await?;
            page.password_error = Some(e.to_string());
            Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Deserialize)]
pub(super) struct TokenForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    expires_in_days: String,
}

/// `POST /profile/tokens`: makes a token and shows it once.
pub(super) async fn token_create(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
    PageForm(form): PageForm<TokenForm>,
) -> PageResult {
    match accounts::parse_token_request(&form.name, &form.expires_in_days) {
        Ok((name, days)) => {
            let (_, token) =
                accounts::create_token(&state.pool, &user.name, &user, &name, days).await?;
            let mut page = ProfilePage::of(&state, &user, &headers).await?;
            page.new_token = Some(token);
            Ok(page.into_response())
        }
        Err(e) => {
            let mut page = ProfilePage::of(&state, &user, &headers).await?;
            page.token_error = Some(e.to_string());
            page.token_name = form.name;
            page.token_days = form.expires_in_days;
            Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
    }
}

/// `POST /profile/tokens/{id}/revoke`: revokes one of one's own tokens.
pub(super) async fn token_revoke_own(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    Path(id): Path<i64>,
) -> PageResult {
    accounts::revoke_token(&state.pool, &user.name, id, Some(user.id)).await?;
    state.users.forget(user.id);
    Ok(Redirect::to("/profile").into_response())
}

/// An account as a row of the users page.
pub(super) struct AccountRow {
    name: String,
    role: String,
    source: String,
    created: String,
    disabled: bool,
    password: bool,
    is_me: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin_users.html")]
struct AdminPage {
    layout: Layout,
    accounts: Vec<AccountRow>,
    tokens: Vec<TokenRow>,
}

/// `GET /admin/users` (admins).
pub(super) async fn admin_page(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: HeaderMap,
) -> PageResult {
    CurrentUser(user.clone()).require(Role::Admin, "manage users")?;
    let clock = Clock::for_viewer(Some(&user), &headers);
    let accounts = accounts::accounts(&state.pool)
        .await?
        .into_iter()
        .map(|a| AccountRow {
            created: crate::store::parse_db_time(&a.created_at)
                .map(|t| clock.fmt(&t))
                .unwrap_or(a.created_at),
            disabled: a.disabled_at.is_some(),
            password: a.has_password != 0,
            is_me: a.name == user.name,
            name: a.name,
            role: a.role,
            source: a.source,
        })
        .collect();
    let tokens = rows(accounts::all_tokens(&state.pool).await?, &clock);
    Ok(AdminPage {
        layout: Layout::new(Some(&user), "Users").with_current("users"),
        accounts,
        tokens,
    }
    .into_response())
}

async fn admin_set_disabled(
    state: &AppState,
    user: &User,
    name: &str,
    disabled: bool,
) -> PageResult {
    CurrentUser(user.clone()).require(Role::Admin, "manage users")?;
    accounts::set_disabled(&state.pool, &user.name, name, disabled).await?;
    Ok(Redirect::to("/admin/users").into_response())
}

/// `POST /admin/users/{name}/disable` (admins): ends the user's sessions and tokens at once.
pub(super) async fn admin_disable(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    Path(name): Path<String>,
) -> PageResult {
    admin_set_disabled(&state, &user, &name, true).await
}

/// `POST /admin/users/{name}/enable` (admins).
pub(super) async fn admin_enable(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    Path(name): Path<String>,
) -> PageResult {
    admin_set_disabled(&state, &user, &name, false).await
}

/// `POST /admin/tokens/{id}/revoke` (admins): revokes anyone's token.
pub(super) async fn admin_revoke(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    Path(id): Path<i64>,
) -> PageResult {
    CurrentUser(user.clone()).require(Role::Admin, "revoke other people's API tokens")?;
    let token = accounts::revoke_token(&state.pool, &user.name, id, None).await?;
    state.users.forget(token.user_id);
    Ok(Redirect::to("/admin/users").into_response())
}
