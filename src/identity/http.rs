//! The HTTP client the OpenID Connect calls go through: our `reqwest` client (a whole-request
//! timeout, no redirects: a provider endpoint that redirects is refused rather than followed,
//! against SSRF), answers capped at [`MAX_ANSWER_BYTES`], plugged into `openidconnect` through
//! its `AsyncHttpClient` trait.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use openidconnect::{AsyncHttpClient, HttpRequest, HttpResponse};

/// The largest answer read from the provider (discovery document, key set, token answer).
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// Why a call to the provider failed, before any answer could be read.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// No answer within the timeout.
    #[error("no answer within {0} s")]
    Timeout(u64),
    /// The connection failed (refused, reset, unknown host).
    #[error("could not connect: {0}")]
    Connect(String),
    /// The answer was larger than [`MAX_ANSWER_BYTES`].
    #[error("the answer is larger than {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
    /// Anything else the client reported.
    #[error("{0}")]
    Other(String),
}

/// The provider's HTTP client.
#[derive(Debug, Clone)]
pub struct ProviderHttp {
    client: reqwest::Client,
    timeout: Duration,
}

impl ProviderHttp {
    /// A client giving up after `timeout` per request.
    ///
    /// # Errors
    /// The TLS backend cannot be set up.
    pub fn new(timeout: Duration) -> Result<Self, reqwest::Error> {
        Ok(Self {
            client: reqwest::Client::builder()
                .timeout(timeout)
                .connect_timeout(timeout)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("incidentmind/", env!("CARGO_PKG_VERSION")))
                .build()?,
            timeout,
        })
    }

    fn error(&self, e: &reqwest::Error) -> HttpError {
        if e.is_timeout() {
            HttpError::Timeout(self.timeout.as_secs().max(1))
        } else if e.is_connect() {
            HttpError::Connect(root_cause(e))
        } else {
            HttpError::Other(e.to_string())
        }
    }

    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let (parts, body) = request.into_parts();
        let mut answer = self
            .client
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .map_err(|e| self.error(&e))?;
        let mut response = HttpResponse::new(Vec::new());
        *response.status_mut() = answer.status();
        *response.headers_mut() = answer.headers().clone();
        let mut body = Vec::new();
        while let Some(chunk) = answer.chunk().await.map_err(|e| self.error(&e))? {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(HttpError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        *response.body_mut() = body;
        Ok(response)
    }
}

/// The innermost cause of `e` ("Connection refused (os error 111)"), the words a person acts on.
fn root_cause(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

impl<'c> AsyncHttpClient<'c> for ProviderHttp {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(self.send(request))
    }
}
