//! The chat senders (outbound adapters, leaves of DESIGN.md §7): one [`Message`] rendered for
//! each kind of channel and posted over HTTP — `slack.rs` (an incoming webhook: Block Kit with a
//! plain-text fallback), `matrix.rs` (the client-server API, threads), `teams.rs` (a Workflows
//! webhook taking an Adaptive Card). Every piece of text that is not ours is escaped for its
//! format (`text.rs`). Errors are typed and say whether trying again may help ([`SendError`]);
//! retries and backoff belong to the outbox worker (`services::chat`), never to these.

pub mod matrix;
pub mod slack;
pub mod teams;
pub mod text;

use std::time::Duration;

/// One message about an incident, before it is rendered for a channel. `headline`, section
/// labels, the incident id and the link are ours; `title` and every section line are redacted
/// text from people and alerts, escaped by each sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// What happened, e.g. "Incident opened" (ours).
    pub headline: String,
    /// The incident id (ours), shown as the link's label.
    pub incident_id: String,
    /// The incident's title (theirs).
    pub title: String,
    /// The incident page (absolute URL).
    pub link: String,
    /// What the message says, in order.
    pub sections: Vec<Section>,
}

/// A labelled part of a [`Message`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Its label (ours), e.g. "Known dead ends"; empty for none.
    pub label: String,
    /// Its lines (theirs), shown as a list when there are several.
    pub lines: Vec<String>,
}

impl Message {
    /// The message as plain text, each line as written (not escaped): what a log or a test
    /// reads.
    pub fn plain(&self) -> String {
        let mut out = format!("{}: {} {}\n", self.headline, self.incident_id, self.title);
        for s in &self.sections {
            if !s.label.is_empty() {
                out.push_str(&s.label);
                out.push('\n');
            }
            for l in &s.lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        out.push_str(&self.link);
        out
    }
}

/// Where a message goes, with the secret it needs.
#[derive(Clone)]
pub enum Target {
    /// A Slack-compatible incoming webhook URL.
    Slack {
        /// The webhook URL (a secret).
        url: String,
    },
    /// A Matrix room.
    Matrix {
        /// The homeserver's base URL (`https://matrix.example.org`).
        homeserver: String,
        /// The room id (`!abc:example.org`).
        room_id: String,
        /// The access token of the account that posts (a secret).
        access_token: String,
    },
    /// A Teams Workflows webhook URL.
    Teams {
        /// The webhook URL (a secret).
        url: String,
    },
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Slack { .. } => f.write_str("Slack(<redacted>)"),
            Self::Teams { .. } => f.write_str("Teams(<redacted>)"),
            Self::Matrix {
                homeserver,
                room_id,
                ..
            } => write!(f, "Matrix({homeserver}, {room_id}, <redacted>)"),
        }
    }
}

/// What the chat service answered to a message it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// Its HTTP status.
    pub status: u16,
    /// The id it gave the message (a Matrix event id; `None` for webhooks, which name none).
    pub remote_id: Option<String>,
    /// What it said, cut to 500 characters.
    pub said: String,
}

/// Why a message was not posted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// Trying again later may work: the service could not be reached, timed out, answered 5xx
    /// or 429 (then `retry_after` is what it asked for).
    #[error("{message}")]
    Transient {
        /// The HTTP status, when there was an answer.
        status: Option<u16>,
        /// How long the service asked to wait (`Retry-After`, Matrix's `retry_after_ms`).
        retry_after: Option<Duration>,
        /// What went wrong, as the service or the network said it.
        message: String,
    },
    /// The service refused the message for good (4xx but 429: a wrong URL, a token that may not
    /// post to the room, a body it rejects); trying again changes nothing until the channel
    /// is fixed.
    #[error("{message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// What it said.
        message: String,
    },
}

impl SendError {
    /// Whether trying again later may work.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient { .. })
    }
}

/// Longest stretch of a chat service's answer kept.
const SAID_MAX: usize = 500;

/// How long one delivery may take, connection included.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client of the senders: [`SEND_TIMEOUT`], no redirects (a webhook that redirects is
/// misconfigured, and following it would hand the message to another host).
///
/// # Errors
/// The TLS backend cannot be initialised.
pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("IncidentMind/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Posts `message` to `target`. `txn_id` is the idempotency key (the Matrix transaction id: a
/// second send with the same key posts nothing new); `thread_root` the message a Matrix reply
/// threads under.
///
/// # Errors
/// [`SendError`], saying whether trying again may help.
pub async fn send(
    client: &reqwest::Client,
    target: &Target,
    message: &Message,
    txn_id: &str,
    thread_root: Option<&str>,
) -> Result<Sent, SendError> {
    match target {
        Target::Slack { url } => post_json(client, url, &slack::body(message)).await,
        Target::Teams { url } => post_json(client, url, &teams::body(message)).await,
        Target::Matrix {
            homeserver,
            room_id,
            access_token,
        } => {
            let body = matrix::body(message, thread_root);
            matrix::send(client, homeserver, room_id, access_token, txn_id, &body).await
        }
    }
}

/// POSTs `body` as JSON to a webhook `url` and reads the answer.
async fn post_json(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> Result<Sent, SendError> {
    let res = client.post(url).json(body).send().await;
    answer(res, |_| None).await
}

/// The answer to a request: a 2xx is [`Sent`] (with `remote_id` read from its body), anything
/// else a [`SendError`].
pub(crate) async fn answer(
    res: Result<reqwest::Response, reqwest::Error>,
    remote_id: impl FnOnce(&str) -> Option<String>,
) -> Result<Sent, SendError> {
    let res = res.map_err(|e| SendError::Transient {
        status: None,
        retry_after: None,
        message: network_error(&e),
    })?;
    let status = res.status();
    let retry_after = res
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let text = res.text().await.unwrap_or_default();
    let said = text::cut(text.trim(), SAID_MAX, "");
    if status.is_success() {
        return Ok(Sent {
            status: status.as_u16(),
            remote_id: remote_id(&text),
            said,
        });
    }
    let message = format!(
        "HTTP {}: {}",
        status.as_u16(),
        if said.is_empty() {
            status.canonical_reason().unwrap_or("").to_string()
        } else {
            said
        }
    );
    if status.as_u16() == 429 || status.is_server_error() || status.as_u16() == 408 {
        // Matrix says how long to wait in its body ({"retry_after_ms": …}) as well.
        let body_wait = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("retry_after_ms").and_then(serde_json::Value::as_u64))
            .map(Duration::from_millis);
        return Err(SendError::Transient {
            status: Some(status.as_u16()),
            retry_after: retry_after.or(body_wait),
            message,
        });
    }
    Err(SendError::Refused {
        status: status.as_u16(),
        message,
    })
}

/// A network error in words a person can act on (reqwest's own text names the URL, and with it
/// a webhook's secret path).
fn network_error(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect (is the host reachable from this server?)"
    } else if e.is_redirect() {
        "answered with a redirect (the URL is not the webhook's own)"
    } else {
        "the request failed"
    };
    let mut source = std::error::Error::source(e);
    let mut why = String::new();
    while let Some(s) = source {
        why = s.to_string();
        source = s.source();
    }
    if why.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {why}")
    }
}
