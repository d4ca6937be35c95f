//! Rate limits: sign-in attempts per account and per client address, webhook
//! deliveries per integration, API requests per token. Each is a keyed GCRA limiter
//! (`governor`) of N per minute with bursts of N, held in [`crate::AppState`]; over it a request
//! is refused with 429 Too Many Requests (RFC 6585 §4) and `Retry-After` in seconds (RFC 9110
//! §10.2.3). The client address is the TCP peer, or, when the peer is a configured proxy, the
//! nearest address in `X-Forwarded-For` that is not one.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use governor::clock::Clock as _;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::error::AppError;

/// Configured limits, per minute (bursts of the same size); 0 turns a limit off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitSettings {
    /// Sign-in attempts per account name.
    pub signin_per_account: u32,
    /// Sign-in attempts per client address.
    pub signin_per_address: u32,
    /// Webhook deliveries per integration.
    pub webhook_per_integration: u32,
    /// API requests per bearer token.
    pub api_per_token: u32,
    /// Proxies whose `X-Forwarded-For` is believed; from anyone else it is ignored.
    pub trusted_proxies: Vec<IpAddr>,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            signin_per_account: 10,
            signin_per_address: 30,
            webhook_per_integration: 600,
            api_per_token: 600,
            trusted_proxies: Vec::new(),
        }
    }
}

/// Keys a limiter holds before it forgets the ones that are back at a full burst.
const PRUNE_ABOVE: usize = 10_000;

/// One keyed limiter, or none when its limit is 0.
#[derive(Debug)]
struct Limiter<K: std::hash::Hash + Eq + Clone>(Option<DefaultKeyedRateLimiter<K>>);

impl<K: std::hash::Hash + Eq + Clone> Limiter<K> {
    fn per_minute(n: u32) -> Self {
        Self(NonZeroU32::new(n).map(|n| RateLimiter::keyed(Quota::per_minute(n))))
    }

    /// Takes one cell for `key`; over the limit, the seconds until one is free (at least 1).
    fn check(&self, key: &K) -> Result<(), u64> {
        let Some(lim) = &self.0 else {
            return Ok(());
        };
        if lim.len() > PRUNE_ABOVE {
            lim.retain_recent();
        }
        lim.check_key(key).map_err(|not_until| {
            let wait = not_until.wait_time_from(lim.clock().now());
            // Rounded up: a client that waits this long is let in.
            (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
        })
    }
}

/// The app's limiters (one set per [`crate::AppState`]).
#[derive(Debug)]
pub struct RateLimiters {
    signin_account: Limiter<String>,
    signin_address: Limiter<IpAddr>,
    webhook: Limiter<i64>,
    api_token: Limiter<String>,
    trusted_proxies: Vec<IpAddr>,
}

fn too_many(what: &str, retry_after_secs: u64) -> AppError {
    AppError::TooManyRequests {
        what: what.to_string(),
        retry_after_secs,
    }
}

impl RateLimiters {
    /// Limiters of `s`.
    pub fn new(s: &RateLimitSettings) -> Self {
        Self {
            signin_account: Limiter::per_minute(s.signin_per_account),
            signin_address: Limiter::per_minute(s.signin_per_address),
            webhook: Limiter::per_minute(s.webhook_per_integration),
            api_token: Limiter::per_minute(s.api_per_token),
            trusted_proxies: s.trusted_proxies.clone(),
        }
    }

    /// One sign-in attempt for account `name` (trimmed, case-folded) from `address`.
    ///
    /// # Errors
    /// [`AppError::TooManyRequests`] when either limit is used up.
    pub fn signin(&self, name: &str, address: Option<IpAddr>) -> Result<(), AppError> {
        if let Some(ip) = address {
            self.signin_address
                .check(&ip)
                .map_err(|s| too_many("sign-in attempts from this address", s))?;
        }
        self.signin_account
            .check(&name.trim().to_lowercase())
            .map_err(|s| too_many("sign-in attempts for this account", s))
    }

    /// One delivery for integration `id`.
    ///
    /// # Errors
    /// [`AppError::Busy`] (a 503 the sender retries: a 429 would make Alertmanager drop the
    /// alert group until its next repeat).
    pub fn webhook(&self, id: i64) -> Result<(), AppError> {
        self.webhook
            .check(&id)
            .map_err(|retry_after_secs| AppError::Busy {
                what: "deliveries for this integration".to_string(),
                retry_after_secs,
            })
    }

    /// One API request with the token whose SHA-256 is `token_digest` (the raw token is not
    /// kept).
    ///
    /// # Errors
    /// [`AppError::TooManyRequests`].
    pub fn api_token(&self, token_digest: &str) -> Result<(), AppError> {
        self.api_token
            .check(&token_digest.to_string())
            .map_err(|s| too_many("requests with this API token", s))
    }

    /// The TCP peer of a request and whether it is one of the trusted proxies (whose
    /// `X-Forwarded-For` and authenticating-proxy headers are believed).
    pub fn peer(&self, parts: &Parts) -> Option<(IpAddr, bool)> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip())?;
        Some((peer, self.trusted_proxies.contains(&peer)))
    }

    /// The client's address: the TCP peer, unless the peer is a trusted proxy; then the
    /// right-most `X-Forwarded-For` entry that is not a trusted proxy (the left-most when all
    /// are). `None` when the server was not started with peer addresses.
    pub fn client_address(&self, parts: &Parts) -> Option<IpAddr> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip())?;
        if !self.trusted_proxies.contains(&peer) {
            return Some(peer);
        }
        let forwarded: Vec<IpAddr> = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|a| a.trim().parse().ok())
            .collect();
        forwarded
            .iter()
            .rev()
            .find(|a| !self.trusted_proxies.contains(a))
            .or(forwarded.first())
            .copied()
            .or(Some(peer))
    }
}

/// The client address of a request ([`RateLimiters::client_address`]).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddress(pub Option<IpAddr>);

impl FromRequestParts<super::AppState> for ClientAddress {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &super::AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(state.limits.client_address(parts)))
    }
}
