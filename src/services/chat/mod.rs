//! Chat channels (issue #50, DESIGN.md §8): the admin's channels with their routing and secrets
//! (this file), what a message about an incident says (`compose.rs`: the memory's first read with
//! the same dead-end words as the incident page) and the outbox worker that posts it with retries
//! and backoff (`deliver.rs`). The rows themselves are written by the incident write
//! (`store::chat::enqueue_in`, called by `store::incidents::add_event`).

pub mod compose;
pub mod deliver;

use std::time::Duration;

use sqlx::AnyPool;

use crate::chat::{self, Target};
use crate::domain::chat::{ChannelKind, ChatEvent, Routing};
use crate::domain::{Severity, ValidationError, required_text};
use crate::error::{AppError, AppResult};
use crate::store;
use crate::store::chat::{self as cstore, Channel, NewChannel, OutboxRow};

pub use deliver::run_worker;

/// How chat messages are delivered: `serve`'s flags, tests' shorter waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatSettings {
    /// The app's address as people reach it (`https://incidents.example.com`): messages link to
    /// `{public_url}/incidents/{id}`.
    pub public_url: String,
    /// How often the worker looks for due messages when idle.
    pub poll: Duration,
    /// The longest wait between two attempts of one message (backoff doubles up to it; a
    /// `Retry-After` may ask for longer, up to [`RETRY_AFTER_MAX`]).
    pub backoff_max: Duration,
    /// A message still failing this long after its first failed attempt is given up (failed,
    /// listed on its channel's page with a retry button).
    pub give_up_after: Duration,
    /// How long an "opened" message waits for its incident's first whole recall (the matches by
    /// meaning) before it is posted with what recall has.
    pub first_read_wait: Duration,
}

impl Default for ChatSettings {
    fn default() -> Self {
        Self {
            public_url: "http://127.0.0.1:8080".into(),
            poll: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            give_up_after: Duration::from_secs(3600),
            first_read_wait: Duration::from_secs(20),
        }
    }
}

/// The longest `Retry-After` honoured as asked; a longer one waits this long.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(600);

/// Longest channel name.
const NAME_MAX: usize = 100;

/// Longest URL, room id or token accepted.
const FIELD_MAX: usize = 2000;

/// Body of `POST /api/v1/chat/channels` (and the admin form).
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::ToSchema)]
pub struct ChannelInput {
    /// Unique name, 1–100 characters.
    #[serde(default)]
    pub name: String,
    /// `slack_webhook`, `matrix` or `teams_workflow`.
    #[serde(default)]
    #[schema(example = "matrix")]
    pub kind: String,
    /// The webhook URL (Slack, Teams), or the Matrix homeserver's base URL; http or https.
    #[serde(default)]
    pub url: String,
    /// Matrix only: the room id (`!abc:example.org`).
    #[serde(default)]
    pub room_id: Option<String>,
    /// Matrix only: the access token of the account that posts.
    #[serde(default)]
    pub access_token: Option<String>,
    /// Only these services; empty or absent: every service.
    #[serde(default)]
    pub services: Vec<String>,
    /// Only incidents this severe or more (default `SEV4`: all).
    #[serde(default)]
    #[schema(value_type = Option<Severity>)]
    pub min_severity: Option<String>,
    /// Only these events; empty or absent: all of them.
    #[serde(default)]
    #[schema(value_type = Vec<ChatEvent>)]
    pub events: Vec<String>,
}

/// Body of `PATCH /api/v1/chat/channels/{id}`: the new routing (absent fields stay).
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::ToSchema)]
pub struct RoutingUpdate {
    /// Only these services; empty: every service.
    #[serde(default)]
    pub services: Option<Vec<String>>,
    /// Only incidents this severe or more.
    #[serde(default)]
    #[schema(value_type = Option<Severity>)]
    pub min_severity: Option<String>,
    /// Only these events; empty: all of them.
    #[serde(default)]
    #[schema(value_type = Option<Vec<ChatEvent>>)]
    pub events: Option<Vec<String>>,
}

/// `url` as an absolute http(s) URL with a host, without its trailing slash.
///
/// # Errors
/// A validation error on `url` saying what is wrong.
pub fn parse_url(field: &'static str, url: &str) -> Result<String, ValidationError> {
    let url = required_text(field, url, FIELD_MAX)?;
    let parsed = reqwest::Url::parse(&url).map_err(|e| {
        ValidationError::new(
            field,
            format!("is not a URL ({e}); paste the whole https://… address"),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ValidationError::new(
            field,
            format!(
                "must start with https:// (or http://), not {}:",
                parsed.scheme()
            ),
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(ValidationError::new(field, "names no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ValidationError::new(
            field,
            "must not carry a user or password; Matrix takes its access token in its own field",
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

fn parse_services(services: &[String]) -> Result<Vec<String>, ValidationError> {
    let mut out = Vec::new();
    for s in services.iter().filter(|s| !s.trim().is_empty()) {
        let s = crate::domain::incident::parse_service(s)
            .map_err(|e| ValidationError::new("services", e.message))?;
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

fn parse_events(events: &[String]) -> Result<Vec<ChatEvent>, ValidationError> {
    let mut out = Vec::new();
    for e in events.iter().filter(|e| !e.trim().is_empty()) {
        let e = ChatEvent::parse(e)?;
        if !out.contains(&e) {
            out.push(e);
        }
    }
    if out.is_empty() {
        out = ChatEvent::ALL.to_vec();
    }
    Ok(out)
}

fn parse_min_severity(s: Option<&str>) -> Result<Severity, ValidationError> {
    match s.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(Severity::Sev4),
        Some(s) => Severity::parse(s).map_err(|e| ValidationError::new("min_severity", e.message)),
    }
}

/// The matrix room id, checked: `!opaque:server`, or `!opaque` (room version 12 ids name no
/// server). An alias (`#room:server`) is not an id.
fn parse_room(room: Option<&str>) -> Result<String, ValidationError> {
    let room = required_text("room_id", room.unwrap_or(""), FIELD_MAX)?;
    if !room.starts_with('!') || room.len() < 2 || room.chars().any(char::is_whitespace) {
        return Err(ValidationError::new(
            "room_id",
            "is not a room id: it looks like !abc123:example.org (Element: Room settings → \
             Advanced → Internal room ID)",
        ));
    }
    Ok(room)
}

/// The [`Target`] a channel posts to.
pub fn target_of(c: &Channel) -> Target {
    match c.kind {
        ChannelKind::SlackWebhook => Target::Slack { url: c.url.clone() },
        ChannelKind::TeamsWorkflow => Target::Teams { url: c.url.clone() },
        ChannelKind::Matrix => Target::Matrix {
            homeserver: c.url.clone(),
            room_id: c.room_id.clone().unwrap_or_default(),
            access_token: c.access_token.clone().unwrap_or_default(),
        },
    }
}

/// Creates a channel on behalf of `actor` (the caller checks the admin role). Its secrets are
/// stored for delivery and never shown again. Nothing is sent: the "send a test message" action
/// ([`test_channel`]) says whether the chat service takes it.
///
/// # Errors
/// [`AppError::Validation`] naming the bad field (a URL that is not http(s), a room id that is
/// not one, an empty token); [`AppError::Conflict`] when the name is taken.
pub async fn create_channel(
    pool: &AnyPool,
    actor: &str,
    input: &ChannelInput,
) -> AppResult<Channel> {
    let name = required_text("name", &input.name, NAME_MAX)?;
    let kind = ChannelKind::parse(&input.kind)?;
    let url = parse_url("url", &input.url)?;
    let (room_id, token) = match kind {
        ChannelKind::Matrix => (
            Some(parse_room(input.room_id.as_deref())?),
            Some(required_text(
                "access_token",
                input.access_token.as_deref().unwrap_or(""),
                FIELD_MAX,
            )?),
        ),
        _ => {
            if input
                .room_id
                .as_deref()
                .is_some_and(|r| !r.trim().is_empty())
                || input
                    .access_token
                    .as_deref()
                    .is_some_and(|t| !t.trim().is_empty())
            {
                return Err(ValidationError::new(
                    "room_id",
                    "only a matrix channel has a room and an access token; a webhook's URL is all it needs",
                )
                .into());
            }
            (None, None)
        }
    };
    let routing = Routing {
        services: parse_services(&input.services)?,
        min_severity: parse_min_severity(input.min_severity.as_deref())?,
        events: parse_events(&input.events)?,
    };
    let new = NewChannel {
        name: &name,
        kind,
        url: &url,
        room_id: room_id.as_deref(),
        access_token: token.as_deref(),
        routing: &routing,
        created_by: actor,
    };
    let mut w = crate::store::Write::begin(pool).await?;
    let id = cstore::insert(w.tx(), &new, store::now()).await?;
    let detail = serde_json::json!({"name": name, "kind": kind, "routing": routing});
    w.audit_by(
        actor,
        "chat_channel.create",
        &format!("chat_channel:{id}"),
        &detail.to_string(),
    )
    .await?;
    w.commit().await?;
    tracing::info!(
        chat_channel.id = id,
        kind = kind.as_str(),
        "chat channel created"
    );
    cstore::get(pool, id).await
}

/// Replaces channel `id`'s routing on behalf of `actor` (admin).
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Validation`].
pub async fn update_routing(
    pool: &AnyPool,
    actor: &str,
    id: i64,
    input: &RoutingUpdate,
) -> AppResult<Channel> {
    let current = cstore::get(pool, id).await?;
    let routing = Routing {
        services: match &input.services {
            Some(s) => parse_services(s)?,
            None => current.routing.services,
        },
        min_severity: match &input.min_severity {
            Some(s) => parse_min_severity(Some(s))?,
            None => current.routing.min_severity,
        },
        events: match &input.events {
            Some(e) => parse_events(e)?,
            None => current.routing.events,
        },
    };
    let mut w = crate::store::Write::begin(pool).await?;
    cstore::set_routing(w.tx(), id, &routing, store::now()).await?;
    w.audit_by(
        actor,
        "chat_channel.update",
        &format!("chat_channel:{id}"),
        &serde_json::json!({"routing": routing}).to_string(),
    )
    .await?;
    w.commit().await?;
    cstore::get(pool, id).await
}

/// Deletes channel `id` and its queued and past messages on behalf of `actor` (admin).
///
/// # Errors
/// [`AppError::NotFound`].
pub async fn delete_channel(pool: &AnyPool, actor: &str, id: i64) -> AppResult<()> {
    let mut w = crate::store::Write::begin(pool).await?;
    cstore::delete(w.tx(), id).await?;
    w.audit_by(
        actor,
        "chat_channel.delete",
        &format!("chat_channel:{id}"),
        "{}",
    )
    .await?;
    w.commit().await?;
    Ok(())
}

/// Every channel, oldest first.
///
/// # Errors
/// Database errors.
pub async fn channels(pool: &AnyPool) -> AppResult<Vec<Channel>> {
    cstore::list(pool).await
}

/// Channel `id` with its most recent messages (newest first, at most 100) and its failed ones.
///
/// # Errors
/// [`AppError::NotFound`].
pub async fn channel(
    pool: &AnyPool,
    id: i64,
) -> AppResult<(Channel, Vec<OutboxRow>, Vec<OutboxRow>)> {
    let c = cstore::get(pool, id).await?;
    let recent = cstore::rows_of(pool, id, None, 100).await?;
    let failed = cstore::rows_of(pool, id, Some("failed"), 1000).await?;
    Ok((c, recent, failed))
}

/// Puts failed message `message` of channel `id` back in the queue on behalf of `actor`.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown channel; [`AppError::Conflict`] when the message is
/// not (or no longer) failed.
pub async fn retry_message(pool: &AnyPool, actor: &str, id: i64, message: i64) -> AppResult<()> {
    cstore::get(pool, id).await?;
    let mut w = crate::store::Write::begin(pool).await?;
    if !cstore::requeue(w.tx(), id, message, store::now()).await? {
        return Err(AppError::Conflict(format!(
            "message {message} of this channel is not failed (delivered, queued, or unknown)"
        )));
    }
    w.audit_by(
        actor,
        "chat_channel.retry",
        &format!("chat_channel:{id}"),
        &serde_json::json!({"message": message}).to_string(),
    )
    .await?;
    w.commit().await?;
    Ok(())
}

/// What "send a test message" got back from the chat service.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct TestOutcome {
    /// Whether the chat service took the message.
    pub delivered: bool,
    /// Its HTTP status, when it answered.
    pub status: Option<u16>,
    /// What it said (its answer's body, or the network error), at most 500 characters.
    pub said: String,
    /// What to do about it, when it was not delivered.
    pub hint: Option<String>,
}

/// Posts a test message to channel `id` and says what the chat service answered. A refusal or
/// an unreachable host is an outcome, not an error: the admin reads it on the page.
///
/// # Errors
/// [`AppError::NotFound`]; the HTTP client cannot be built.
pub async fn test_channel(
    pool: &AnyPool,
    settings: &ChatSettings,
    id: i64,
) -> AppResult<TestOutcome> {
    let c = cstore::get(pool, id).await?;
    let message = chat::Message {
        headline: "Test message".into(),
        incident_id: "IncidentMind".into(),
        title: format!(
            "channel '{}' is set up: incident messages will arrive here",
            c.name
        ),
        link: settings.public_url.clone(),
        sections: Vec::new(),
    };
    let client = chat::client().map_err(|e| AppError::Internal(e.into()))?;
    let txn = format!("im-test-{}", hex::encode(rand::random::<[u8; 16]>()));
    Ok(
        match chat::send(&client, &target_of(&c), &message, &txn, None).await {
            Ok(sent) => TestOutcome {
                delivered: true,
                status: Some(sent.status),
                said: sent.said,
                hint: None,
            },
            Err(e) => {
                let (status, hint) = match &e {
                chat::SendError::Refused { status, .. } => (Some(*status), Some(refusal_hint(c.kind, *status))),
                chat::SendError::Transient { status, .. } => (
                    *status,
                    Some("the chat service could not be reached or is failing; check the URL and that this server may reach it, then try again".to_string()),
                ),
            };
                TestOutcome {
                    delivered: false,
                    status,
                    said: e.to_string(),
                    hint,
                }
            }
        },
    )
}

fn refusal_hint(kind: ChannelKind, status: u16) -> String {
    match (kind, status) {
        (ChannelKind::Matrix, 401) => "the homeserver does not know this access token; create a new one for the posting account".into(),
        (ChannelKind::Matrix, 403) => "the account may not post in this room: invite it and have it join, or raise its power level".into(),
        (ChannelKind::Matrix, 404) => "no such room on this homeserver, or the URL is not the homeserver's base URL".into(),
        (_, 404 | 410) => "the webhook does not exist (deleted, or a wrong URL): create a new one and a new channel".into(),
        (_, 401 | 403) => "the chat service refused this webhook: check it is enabled and allowed to post".into(),
        _ => "the chat service refused the message; check the channel's settings".into(),
    }
}

/// Queued messages by channel: `(channel id, pending, delivered, failed)`.
///
/// # Errors
/// Database errors.
pub async fn counts(pool: &AnyPool) -> AppResult<Vec<(i64, i64, i64, i64)>> {
    let mut out: Vec<(i64, i64, i64, i64)> = Vec::new();
    for (channel, status, n) in cstore::counts(pool).await? {
        let i = match out.iter().position(|c| c.0 == channel) {
            Some(i) => i,
            None => {
                out.push((channel, 0, 0, 0));
                out.len() - 1
            }
        };
        match status.as_str() {
            "pending" => out[i].1 = n,
            "delivered" => out[i].2 = n,
            _ => out[i].3 = n,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_absolute_http_urls_with_a_host_are_taken() {
        assert_eq!(
            parse_url("url", "https://hooks.example.com/x/").unwrap(),
            "https://hooks.example.com/x"
        );
        for bad in [
            "ftp://x.example/",
            "javascript:alert(1)",
            "hooks.example.com",
            "file:///etc/passwd",
            "https://u:p@x.example/",
        ] {
            let e = parse_url("url", bad).unwrap_err();
            assert_eq!(e.field, "url", "{bad}");
        }
    }

    #[test]
    fn no_events_means_every_event() {
        assert_eq!(parse_events(&[]).unwrap(), ChatEvent::ALL.to_vec());
        assert!(parse_room(Some("#alias:example.org")).is_err());
        assert!(parse_room(Some("!abc:example.org")).is_ok());
    }
}
