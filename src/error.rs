//! The library's one error type, [`AppError`], with what each variant means over HTTP: its
//! status ([`AppError::status`]), stable code ([`AppError::code`]) and the message people see
//! ([`AppError::public_message`]: 4xx show their text; 5xx are logged once with their source
//! chain and show a generic one).
//!
//! Turning it into a response (the JSON body or the HTML error page) is the web layer's job:
//! see `web::errors`.

use axum::http::StatusCode;

use crate::domain::{InvalidTransition, ValidationError};

/// Everything a service or handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Input broke a rule (HTTP 422).
    #[error(transparent)]
    Validation(#[from] ValidationError),
    /// The request body could not be read as the expected shape (HTTP 400).
    #[error("{0}")]
    BadRequest(String),
    /// The request body is larger than the configured limit (HTTP 413).
    #[error("request body is larger than the limit of {limit_bytes} bytes")]
    PayloadTooLarge {
        /// The configured limit in bytes.
        limit_bytes: usize,
    },
    /// No or bad credentials (HTTP 401).
    #[error("sign in or send an API token (Authorization: Bearer …)")]
    Unauthenticated,
    /// Signed in but the role does not allow this (HTTP 403).
    #[error("{0}")]
    Forbidden(String),
    /// The named thing does not exist (HTTP 404).
    #[error("{0} not found")]
    NotFound(String),
    /// An impossible workflow move (HTTP 409).
    #[error(transparent)]
    InvalidTransition(#[from] InvalidTransition),
    /// The resource changed under the request, or a unique key already exists (HTTP 409).
    #[error("{0}")]
    Conflict(String),
    /// Over a rate limit (HTTP 429 Too Many Requests, RFC 6585 §4); the response carries
    /// `Retry-After: <retry_after_secs>` (RFC 9110 §10.2.3).
    #[error("too many {what}; try again in {retry_after_secs} s")]
    TooManyRequests {
        /// What was counted ("sign-in attempts for this account").
        what: String,
        /// Seconds until a request would be accepted (at least 1).
        retry_after_secs: u64,
    },
    /// Too many deliveries from an alert sender right now (HTTP 503 Service Unavailable with
    /// `Retry-After`, RFC 9110 §15.6.4). Alert senders retry a 5xx and drop a 4xx
    /// (Alertmanager's webhook notifier does not retry a 429), so a sender over its limit is
    /// told to come back, never that its alert group was refused for good.
    #[error("too many {what} right now; retry in {retry_after_secs} s")]
    Busy {
        /// What was counted ("deliveries for this integration").
        what: String,
        /// Seconds until a delivery would be accepted (at least 1).
        retry_after_secs: u64,
    },
    /// The database's disk is full (SQLite `SQLITE_FULL`, result code 13; PostgreSQL SQLSTATE
    /// `53100` disk_full): the write was rolled
    /// back, nothing was stored, and reads still work (HTTP 503 Service Unavailable with
    /// `Retry-After`, RFC 9110 §15.6.4; logged).
    #[error(
        "the database's disk is full, so nothing was written: free space on the volume that holds \
         the database, then try again"
    )]
    StorageFull,
    /// A server the app queries on the user's behalf (Prometheus) is down, slow or answered an
    /// error that is not the user's input (HTTP 502 Bad Gateway); the message says which.
    #[error("{0}")]
    Upstream(String),
    /// Anything else: a bug or an unavailable database (HTTP 500, logged).
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

/// SQLite's primary result code for a full disk (`SQLITE_FULL`; sqlite.org/rescode.html).
const SQLITE_FULL: i64 = 13;

/// PostgreSQL's SQLSTATE for a full disk (`disk_full`; PostgreSQL manual, appendix A).
const PG_DISK_FULL: &str = "53100";

impl From<sqlx::Error> for AppError {
    /// [`AppError::StorageFull`] for `SQLITE_FULL` (sqlx reports the extended result code,
    /// whose low byte is the primary one) or PostgreSQL's `disk_full`, else
    /// [`AppError::Internal`].
    fn from(e: sqlx::Error) -> Self {
        let full = e.as_database_error().is_some_and(|d| {
            if d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .is_some()
            {
                d.code().as_deref() == Some(PG_DISK_FULL)
            } else {
                d.code()
                    .and_then(|c| c.parse::<i64>().ok())
                    .is_some_and(|c| c & 0xff == SQLITE_FULL)
            }
        });
        if full {
            tracing::error!(error = %e, "the database's disk is full; the write was rolled back");
            return Self::StorageFull;
        }
        // PostgreSQL refuses text with a NUL character (22021) or a JSON `\u0000` (22P05); SQLite
        // stores both. Stored texts drop NUL on the way in (redaction); a key or filter that
        // still carries one is the sender's input, refused as such.
        let code = e.as_database_error().and_then(|d| d.code());
        if matches!(code.as_deref(), Some("22021" | "22P05")) {
            return Self::BadRequest(
                "the request holds a NUL character (\\u0000), which no field may contain".into(),
            );
        }
        Self::Internal(e.into())
    }
}

impl From<crate::domain::incident::StaleVersion> for AppError {
    /// [`AppError::Conflict`] (409) with the stale version's message.
    fn from(e: crate::domain::incident::StaleVersion) -> Self {
        Self::Conflict(e.to_string())
    }
}

impl From<crate::domain::incident::Closed> for AppError {
    /// [`AppError::Conflict`] (409): a learned incident takes no new work.
    fn from(e: crate::domain::incident::Closed) -> Self {
        Self::Conflict(e.to_string())
    }
}

impl From<sqlx::migrate::MigrateError> for AppError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self::Internal(e.into())
    }
}

/// `Retry-After` on a full disk's 503: long enough for an operator to act.
const STORAGE_FULL_RETRY_SECS: u64 = 60;

impl AppError {
    /// The HTTP status for this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::InvalidTransition(_) | Self::Conflict(_) => StatusCode::CONFLICT,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Busy { .. } | Self::StorageFull => StatusCode::SERVICE_UNAVAILABLE,
            Self::Upstream(_) => StatusCode::BAD_GATEWAY,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// A stable machine-readable code for the JSON API (`validation`, `invalid_transition`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Validation(_) => "validation",
            Self::BadRequest(_) => "bad_request",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::Unauthenticated => "unauthenticated",
            Self::Forbidden(_) => "forbidden",
            Self::NotFound(_) => "not_found",
            Self::InvalidTransition(_) => "invalid_transition",
            Self::Conflict(_) => "conflict",
            Self::TooManyRequests { .. } => "rate_limited",
            Self::Busy { .. } => "busy",
            Self::StorageFull => "storage_full",
            Self::Upstream(_) => "upstream",
            Self::Internal(_) => "internal",
        }
    }

    /// The message shown to people: the error text for 4xx, a generic sentence for 5xx.
    /// Logs 5xx errors with their source chain (once, inside the request span).
    pub fn public_message(&self) -> String {
        if let Self::Internal(e) = self {
            tracing::error!(error = ?e, "internal error");
            return "something went wrong on our side; the error was logged".to_string();
        }
        self.to_string()
    }

    /// Seconds for the `Retry-After` header of a 429, a busy 503 or a full disk's 503; `None`
    /// for other errors.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::TooManyRequests {
                retry_after_secs, ..
            }
            | Self::Busy {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            Self::StorageFull => Some(STORAGE_FULL_RETRY_SECS),
            _ => None,
        }
    }

    /// Shorthand for a 403 naming the role that is needed.
    pub fn needs_role(role: crate::domain::Role, what: &str) -> Self {
        Self::Forbidden(format!("{what} needs the {role} role"))
    }
}

/// Result alias for the library.
pub type AppResult<T> = Result<T, AppError>;
