//! The identity provider (issue #54): an outbound adapter, a leaf. OpenID Connect sign-in
//! through the `openidconnect` crate — discovery of the issuer (cached [`DISCOVERY_TTL`]), the
//! authorization code flow with PKCE (RFC 7636), `state` and `nonce`, the code exchanged at the
//! token endpoint, and the ID token checked (OpenID Connect Core 1.0 §3.1.3.7): its signature
//! through the provider's key set (fetched again once when the key id is unknown: the provider
//! rotated its keys), `iss`, `aud`, `exp` and `iat` within [`LEEWAY`], and the `nonce`. What it
//! returns is who the provider says the person is ([`ExternalIdentity`]); what that person may
//! do is decided by `services::identity`. `http.rs` is the HTTP client it calls through.
//!
//! Errors are typed ([`OidcError`]) and each says in plain words what failed, for the sign-in
//! page.

pub mod http;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreResponseType,
    CoreRevocableToken, CoreRevocationErrorResponse, CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AuthenticationFlow, AuthorizationCode, ClaimsVerificationError, Client,
    ClientId, ClientSecret, CsrfToken, DiscoveryError, EmptyExtraTokenFields, EndpointMaybeSet,
    EndpointNotSet, EndpointSet, IdTokenFields, IssuerUrl, JsonWebKeySet, Nonce, PkceCodeChallenge,
    PkceCodeVerifier, ProviderMetadataWithLogout, RedirectUrl, RequestTokenError, Scope,
    SignatureVerificationError, StandardErrorResponse, StandardTokenResponse,
};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

pub use self::http::{HttpError, ProviderHttp};
use crate::domain::identity::ExternalIdentity;

/// How long a discovery document (and its key set) is used before it is fetched again.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(3600);

/// Clock difference tolerated on `exp` and `iat` between us and the provider.
pub const LEEWAY: Duration = Duration::from_secs(60);

/// How long a started sign-in may take before its callback is refused.
pub const PENDING_TTL_SECS: i64 = 600;

/// Which claim names the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameClaim {
    /// `preferred_username` (Keycloak, Dex, Okta's login).
    PreferredUsername,
    /// `email` (Google, Entra ID with the email claim).
    Email,
}

impl NameClaim {
    /// Parses `preferred_username` or `email`.
    ///
    /// # Errors
    /// Anything else, in words.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "preferred_username" => Ok(Self::PreferredUsername),
            "email" => Ok(Self::Email),
            other => Err(format!(
                "'{other}' is not a name claim; use preferred_username or email"
            )),
        }
    }

    /// The claim's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PreferredUsername => "preferred_username",
            Self::Email => "email",
        }
    }
}

/// What the OpenID Connect sign-in is configured with (`--oidc-…`). `Debug` hides the secret.
#[derive(Clone)]
pub struct OidcConfig {
    /// The issuer URL; `/.well-known/openid-configuration` is read under it.
    pub issuer_url: String,
    /// The client id registered at the provider.
    pub client_id: String,
    /// The client secret (confidential client, `client_secret_basic`).
    pub client_secret: String,
    /// Where the provider sends the browser back: `https://…/signin/oidc/callback`.
    pub redirect_url: String,
    /// Scopes asked for besides `openid` (e.g. `profile`, `email`, `groups`).
    pub scopes: Vec<String>,
    /// The claim that names the user.
    pub name_claim: NameClaim,
    /// The claim listing the user's groups (`groups`; Entra ID: `roles` or `groups`).
    pub groups_claim: String,
    /// Whole-request timeout of each call to the provider.
    pub timeout: Duration,
    /// The button's words: "Sign in with {label}".
    pub label: String,
}

impl std::fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcConfig")
            .field("issuer_url", &self.issuer_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .field("redirect_url", &self.redirect_url)
            .field("scopes", &self.scopes)
            .field("name_claim", &self.name_claim)
            .field("groups_claim", &self.groups_claim)
            .field("timeout", &self.timeout)
            .field("label", &self.label)
            .finish()
    }
}

/// A sign-in started in a browser and not finished yet, kept in its session: the secrets the
/// callback is checked against.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingSignIn {
    /// The `state` sent (CSRF protection of the callback, RFC 6749 §10.12).
    pub state: String,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
    /// The PKCE verifier whose S256 challenge was sent.
    pub pkce_verifier: String,
    /// Where to go after signing in (a same-site path).
    pub next: String,
    /// When it started (Unix seconds).
    pub started: i64,
}

/// A sign-in the provider vouched for, checked.
#[derive(Debug, Clone)]
pub struct VerifiedSignIn {
    /// Who the person is.
    pub identity: ExternalIdentity,
    /// The ID token as received, kept in the session as the `id_token_hint` of sign-out.
    pub id_token: String,
}

/// What failed in an OpenID Connect sign-in; `Display` is shown on the sign-in page.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The provider could not be reached.
    #[error("the identity provider at {issuer} could not be reached ({detail}); try again later")]
    Unreachable {
        /// The issuer URL.
        issuer: String,
        /// Why.
        detail: String,
    },
    /// The provider did not answer in time.
    #[error("the identity provider at {issuer} did not answer within {secs} s; try again later")]
    Slow {
        /// The issuer URL.
        issuer: String,
        /// The timeout.
        secs: u64,
    },
    /// The discovery document or key set is unusable.
    #[error("the identity provider at {issuer} answered with an unusable configuration: {detail}")]
    Discovery {
        /// The issuer URL.
        issuer: String,
        /// What is wrong.
        detail: String,
    },
    /// No sign-in was started in this browser, or it is too old.
    #[error(
        "no sign-in was started in this browser, or it took longer than 10 minutes; start again"
    )]
    NoPending,
    /// The callback's `state` is not the one this browser's sign-in sent.
    #[error(
        "the answer from the identity provider does not belong to the sign-in this browser \
         started (the state does not match); start again"
    )]
    WrongState,
    /// The provider sent the browser back with an error (e.g. the person declined).
    #[error("the identity provider did not sign you in: {0}")]
    Provider(String),
    /// The callback carries no code.
    #[error("the identity provider sent no sign-in code; start again")]
    NoCode,
    /// The token endpoint refused the code.
    #[error(
        "the identity provider refused the sign-in code ({0}); a code works once and only for a \
         few minutes: start again"
    )]
    CodeRefused(String),
    /// The token endpoint's answer had no ID token.
    #[error("the identity provider sent no ID token; check that the scope includes openid")]
    NoIdToken,
    /// The ID token failed a check.
    #[error("the identity provider's ID token was refused: {0}")]
    BadIdToken(String),
    /// The ID token has no claim naming the user.
    #[error(
        "the ID token has no {0} claim to name you by; ask an administrator to check the name claim setting"
    )]
    NoName(&'static str),
}

/// The claims besides the standard ones, kept as JSON (the groups claim's name is configured).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OtherClaims {
    /// Every other claim by name.
    #[serde(flatten)]
    pub claims: HashMap<String, serde_json::Value>,
}

impl AdditionalClaims for OtherClaims {}

type Fields = IdTokenFields<
    OtherClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type TokenAnswer = StandardTokenResponse<Fields, CoreTokenType>;
type OidcClient = Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    TokenAnswer,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

struct Discovered {
    metadata: ProviderMetadataWithLogout,
    fetched: Instant,
}

/// The OpenID Connect relying party, in `AppState` when configured: the settings, the HTTP
/// client and the provider's discovery document with its key set (cached).
pub struct Oidc {
    config: OidcConfig,
    http: ProviderHttp,
    discovered: Mutex<Option<Discovered>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Oidc {
    /// The relying party for `config`; nothing is fetched until the first sign-in.
    ///
    /// # Errors
    /// The issuer or redirect URL does not parse, or the HTTP client cannot be built.
    pub fn new(config: OidcConfig) -> anyhow::Result<Self> {
        IssuerUrl::new(config.issuer_url.clone())
            .map_err(|e| anyhow::anyhow!("--oidc-issuer-url {:?}: {e}", config.issuer_url))?;
        RedirectUrl::new(config.redirect_url.clone())
            .map_err(|e| anyhow::anyhow!("--oidc-redirect-url {:?}: {e}", config.redirect_url))?;
        anyhow::ensure!(
            !config.client_id.trim().is_empty(),
            "--oidc-client-id is required with --oidc-issuer-url"
        );
        Ok(Self {
            http: ProviderHttp::new(config.timeout)?,
            config,
            discovered: Mutex::new(None),
        })
    }

    /// The settings.
    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    fn request_error(&self, e: HttpError) -> OidcError {
        let issuer = self.config.issuer_url.clone();
        match e {
            HttpError::Timeout(secs) => OidcError::Slow { issuer, secs },
            other => OidcError::Unreachable {
                issuer,
                detail: other.to_string(),
            },
        }
    }

    fn discovery_error(&self, e: DiscoveryError<HttpError>) -> OidcError {
        match e {
            DiscoveryError::Request(e) => self.request_error(e),
            other => OidcError::Discovery {
                issuer: self.config.issuer_url.clone(),
                detail: other.to_string(),
            },
        }
    }

    /// The provider's metadata, from the cache while fresh, else discovered again.
    async fn metadata(&self, refresh: bool) -> Result<ProviderMetadataWithLogout, OidcError> {
        let mut cached = self.discovered.lock().await;
        if let Some(d) = cached.as_ref()
            && !refresh
            && d.fetched.elapsed() < DISCOVERY_TTL
        {
            return Ok(d.metadata.clone());
        }
        let issuer =
            IssuerUrl::new(self.config.issuer_url.clone()).map_err(|e| OidcError::Discovery {
                issuer: self.config.issuer_url.clone(),
                detail: e.to_string(),
            })?;
        let metadata = ProviderMetadataWithLogout::discover_async(issuer, &self.http)
            .await
            .map_err(|e| self.discovery_error(e))?;
        *cached = Some(Discovered {
            metadata: metadata.clone(),
            fetched: Instant::now(),
        });
        Ok(metadata)
    }

    /// Fetches the key set again (the provider rotated its keys) and keeps it with the cached
    /// metadata.
    async fn refetch_keys(
        &self,
        mut metadata: ProviderMetadataWithLogout,
    ) -> Result<ProviderMetadataWithLogout, OidcError> {
        let keys = JsonWebKeySet::fetch_async(metadata.jwks_uri(), &self.http)
            .await
            .map_err(|e| self.discovery_error(e))?;
        metadata = metadata.set_jwks(keys);
        let mut cached = self.discovered.lock().await;
        *cached = Some(Discovered {
            metadata: metadata.clone(),
            fetched: Instant::now(),
        });
        Ok(metadata)
    }

    fn client(&self, metadata: ProviderMetadataWithLogout) -> Result<OidcClient, OidcError> {
        let redirect = RedirectUrl::new(self.config.redirect_url.clone()).map_err(|e| {
            OidcError::Discovery {
                issuer: self.config.issuer_url.clone(),
                detail: format!("redirect URL: {e}"),
            }
        })?;
        Ok(OidcClient::from_provider_metadata(
            metadata,
            ClientId::new(self.config.client_id.clone()),
            Some(ClientSecret::new(self.config.client_secret.clone())),
        )
        .set_redirect_uri(redirect))
    }

    /// Starts a sign-in: the URL to send the browser to (authorization endpoint with `state`,
    /// `nonce` and the S256 PKCE challenge), and what the session keeps until the callback.
    ///
    /// # Errors
    /// The provider cannot be reached or discovered ([`OidcError`]).
    pub async fn begin(
        &self,
        next: String,
        now_unix: i64,
    ) -> Result<(url::Url, PendingSignIn), OidcError> {
        let client = self.client(self.metadata(false).await?)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in &self.config.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.url();
        Ok((
            url,
            PendingSignIn {
                state: state.secret().clone(),
                nonce: nonce.secret().clone(),
                pkce_verifier: verifier.secret().clone(),
                next,
                started: now_unix,
            },
        ))
    }

    /// Finishes a sign-in at the callback: checks `state` against `pending`, exchanges `code`
    /// (with the PKCE verifier) and checks the ID token.
    ///
    /// # Errors
    /// Every failure, in words ([`OidcError`]).
    pub async fn finish(
        &self,
        pending: &PendingSignIn,
        state: &str,
        code: &str,
        now_unix: i64,
    ) -> Result<VerifiedSignIn, OidcError> {
        if now_unix - pending.started > PENDING_TTL_SECS {
            return Err(OidcError::NoPending);
        }
        if !constant_time_eq(state.as_bytes(), pending.state.as_bytes()) {
            return Err(OidcError::WrongState);
        }
        if code.is_empty() {
            return Err(OidcError::NoCode);
        }
        let metadata = self.metadata(false).await?;
        let client = self.client(metadata.clone())?;
        let answer = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| OidcError::Discovery {
                issuer: self.config.issuer_url.clone(),
                detail: e.to_string(),
            })?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
            .request_async(&self.http)
            .await
            .map_err(|e| match e {
                RequestTokenError::ServerResponse(r) => OidcError::CodeRefused(
                    r.error_description()
                        .cloned()
                        .unwrap_or_else(|| r.error().to_string()),
                ),
                RequestTokenError::Request(e) => self.request_error(e),
                other => OidcError::CodeRefused(other.to_string()),
            })?;
        let id_token = answer
            .extra_fields()
            .id_token()
            .ok_or(OidcError::NoIdToken)?
            .clone();
        let nonce = Nonce::new(pending.nonce.clone());
        let checked = {
            let verifier = verifier(&client);
            id_token.claims(&verifier, &nonce).cloned()
        };
        let claims = match checked {
            Err(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            )) => {
                // An unknown key id: the provider may have rotated its keys since we fetched
                // them. Fetch once more and check again.
                tracing::info!("ID token signed with an unknown key; fetching the key set again");
                let client = self.client(self.refetch_keys(metadata).await?)?;
                let verifier = verifier(&client);
                id_token
                    .claims(&verifier, &nonce)
                    .cloned()
                    .map_err(|e| OidcError::BadIdToken(in_words(&e)))?
            }
            other => other.map_err(|e| OidcError::BadIdToken(in_words(&e)))?,
        };
        let name = match self.config.name_claim {
            NameClaim::PreferredUsername => claims.preferred_username().map(|n| n.to_string()),
            NameClaim::Email => claims.email().map(|e| e.to_string()),
        }
        .filter(|n| !n.trim().is_empty())
        .ok_or(OidcError::NoName(self.config.name_claim.as_str()))?;
        let groups = groups_of(
            claims
                .additional_claims()
                .claims
                .get(&self.config.groups_claim),
        );
        Ok(VerifiedSignIn {
            identity: ExternalIdentity {
                source: "oidc",
                name,
                groups,
            },
            id_token: id_token.to_string(),
        })
    }

    /// Where to send the browser to end its session at the provider too (RP-Initiated Logout
    /// 1.0), when the provider has an `end_session_endpoint`: with the ID token as hint and our
    /// sign-in page (`?signed_out=1`) to come back to. `None` when it has none or cannot be
    /// reached (our session is ended anyway).
    pub async fn end_session_url(&self, id_token: &str) -> Option<url::Url> {
        let metadata = self.metadata(false).await.ok()?;
        let endpoint = metadata
            .additional_metadata()
            .end_session_endpoint
            .clone()?;
        let back = url::Url::parse(&self.config.redirect_url)
            .ok()?
            .join("/signin?signed_out=1")
            .ok()?;
        let mut url = endpoint.url().clone();
        url.query_pairs_mut()
            .append_pair("id_token_hint", id_token)
            .append_pair("post_logout_redirect_uri", back.as_str())
            .append_pair("client_id", &self.config.client_id);
        Some(url)
    }
}

/// The ID-token checks: signature, `iss`, `aud` (the client id; another audience beside it is
/// refused), `exp` with [`LEEWAY`], `iat` no later than now plus [`LEEWAY`], and the nonce
/// (checked by `claims`).
fn verifier(client: &OidcClient) -> openidconnect::IdTokenVerifier<'_, CoreJsonWebKey> {
    let leeway = chrono::Duration::from_std(LEEWAY).unwrap_or_default();
    client
        .id_token_verifier()
        .set_time_fn(move || chrono::Utc::now() - leeway)
        .set_issue_time_verifier_fn(move |iat| {
            if iat <= chrono::Utc::now() + leeway {
                Ok(())
            } else {
                Err(format!("issued in the future ({iat})"))
            }
        })
}

/// A claims check failure in plain words.
fn in_words(e: &ClaimsVerificationError) -> String {
    match e {
        ClaimsVerificationError::Expired(_) => {
            "it has expired (if this keeps happening, check the clocks of this server and of the \
             provider)"
                .into()
        }
        ClaimsVerificationError::InvalidAudience(d) => {
            format!("it was issued for another application, not this client id ({d})")
        }
        ClaimsVerificationError::InvalidIssuer(d) => {
            format!("it was issued by another provider than the configured issuer ({d})")
        }
        ClaimsVerificationError::InvalidNonce(_) => {
            "it does not belong to this sign-in (the nonce does not match)".into()
        }
        ClaimsVerificationError::SignatureVerification(
            SignatureVerificationError::NoMatchingKey,
        ) => "it is signed with a key the provider does not publish (unknown key id), even after \
              fetching the provider's keys again"
            .into(),
        ClaimsVerificationError::SignatureVerification(s) => {
            format!("its signature does not check out ({s})")
        }
        other => other.to_string(),
    }
}

/// The groups of a claim: a list of strings, or one string (some providers send one group
/// bare); anything else gives none.
fn groups_of(claim: Option<&serde_json::Value>) -> Vec<String> {
    match claim {
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

/// Compares two secrets in time independent of where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_come_from_a_list_or_a_single_string() {
        assert_eq!(
            groups_of(Some(&serde_json::json!(["a", 3, "b"]))),
            vec!["a", "b"]
        );
        assert_eq!(groups_of(Some(&serde_json::json!("solo"))), vec!["solo"]);
        assert!(groups_of(Some(&serde_json::json!({"a": 1}))).is_empty());
        assert!(groups_of(None).is_empty());
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
