//! The outbound adapter to an OpenAI-compatible server (a leaf: it knows HTTP and the
//! `async-openai` crate, nothing of the product), shared by the model analyst and the
//! embedding endpoint so that memory does not depend on the analyst.

use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;

/// An async-openai client for the OpenAI-compatible server at `base_url` (ending in `/v1`),
/// sending `api_key` as a bearer token (empty: none), every call bounded by `timeout`. It uses the
/// plain reqwest service, without async-openai's default retry layer: one HTTP call per request,
/// never multiplied by retries. Shared by the LLM analyst ([`crate::analyst::llm`]) and the embedding endpoint
/// ([`crate::memory::embeddings`]).
///
/// # Errors
/// When the HTTP client cannot be built (TLS back end unavailable).
pub fn client(
    base_url: &str,
    api_key: &str,
    timeout: Duration,
) -> anyhow::Result<Client<OpenAIConfig>> {
    let http = reqwest::Client::builder().timeout(timeout).build()?;
    let config = OpenAIConfig::new()
        .with_api_base(base_url.trim_end_matches('/'))
        .with_api_key(api_key);
    Ok(Client::with_config(config)
        .with_http_service(async_openai::middleware::ReqwestService::new(http)))
}
