//! `serve`'s sign-in options (issue #54): the OpenID Connect provider, the authenticating
//! proxy's headers, the groups → role mapping and whether passwords are accepted; turned into
//! [`IdentitySettings`] by [`IdentityArgs::settings`]. `Debug` never prints the client secret.

use clap::Args;

use crate::domain::identity::RoleMapping;
use crate::identity::{NameClaim, OidcConfig};
use crate::services::identity::{IdentitySettings, ProxySettings};

/// How people sign in.
#[derive(Clone, Args)]
pub struct IdentityArgs {
    /// OpenID Connect issuer URL (discovery at `{issuer}/.well-known/openid-configuration`), e.g.
    /// `https://example.okta.com` or `https://login.microsoftonline.com/{tenant}/v2.0`. Unset: no
    /// "Sign in with…" button.
    #[arg(long, env = "INCIDENTMIND_OIDC_ISSUER_URL")]
    pub oidc_issuer_url: Option<String>,
    /// The client id registered at the provider.
    #[arg(long, env = "INCIDENTMIND_OIDC_CLIENT_ID", default_value = "")]
    pub oidc_client_id: String,
    /// The client secret registered at the provider.
    #[arg(
        long,
        env = "INCIDENTMIND_OIDC_CLIENT_SECRET",
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub oidc_client_secret: String,
    /// The redirect URL registered at the provider; default `{--public-url}/signin/oidc/callback`.
    #[arg(long, env = "INCIDENTMIND_OIDC_REDIRECT_URL")]
    pub oidc_redirect_url: Option<String>,
    /// Scopes asked for besides `openid`, comma-separated (add `groups` where the provider needs
    /// it for the groups claim: Dex, Okta with a groups scope).
    #[arg(
        long,
        env = "INCIDENTMIND_OIDC_SCOPES",
        default_value = "profile,email",
        value_delimiter = ','
    )]
    pub oidc_scopes: Vec<String>,
    /// The claim that names the user: `preferred_username` or `email`.
    #[arg(
        long,
        env = "INCIDENTMIND_OIDC_NAME_CLAIM",
        default_value = "preferred_username"
    )]
    pub oidc_name_claim: String,
    /// The claim listing the user's groups (`groups`; Entra ID app roles: `roles`).
    #[arg(long, env = "INCIDENTMIND_OIDC_GROUPS_CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
    /// The sign-in button's words: "Sign in with {this}".
    #[arg(
        long,
        env = "INCIDENTMIND_OIDC_LABEL",
        default_value = "your company account"
    )]
    pub oidc_label: String,
    /// Seconds each call to the provider may take (discovery, keys, the code exchange).
    #[arg(long, env = "INCIDENTMIND_OIDC_TIMEOUT_SECS", default_value_t = 10)]
    pub oidc_timeout_secs: u64,
    /// Groups → role for OpenID Connect and the proxy, comma-separated `group=role`, e.g.
    /// `sre-admins=admin,sre-reviewers=reviewer`; the highest role any group gives wins.
    #[arg(long, env = "INCIDENTMIND_ROLE_MAP", default_value = "")]
    pub role_map: String,
    /// The role of someone none of whose groups is mapped (`responder`, `reviewer`, `admin`);
    /// empty: they are refused, with a page saying why.
    #[arg(long, env = "INCIDENTMIND_DEFAULT_ROLE", default_value = "")]
    pub default_role: String,
    /// The header an authenticating proxy names the user in (`X-Forwarded-Email`,
    /// `X-Auth-Request-User`); honoured only from --trusted-proxies addresses. Unset: off.
    #[arg(long, env = "INCIDENTMIND_AUTH_PROXY_USER_HEADER")]
    pub auth_proxy_user_header: Option<String>,
    /// The header listing the user's groups, comma-separated (`X-Forwarded-Groups`).
    #[arg(long, env = "INCIDENTMIND_AUTH_PROXY_GROUPS_HEADER")]
    pub auth_proxy_groups_header: Option<String>,
    /// Accept sign-in with a name and password (`false`: only the provider or the proxy; API
    /// tokens keep working).
    #[arg(
        long,
        env = "INCIDENTMIND_PASSWORD_SIGNIN",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub password_signin: bool,
}

impl std::fmt::Debug for IdentityArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityArgs")
            .field("oidc_issuer_url", &self.oidc_issuer_url)
            .field("oidc_client_id", &self.oidc_client_id)
            .field("oidc_redirect_url", &self.oidc_redirect_url)
            .field("role_map", &self.role_map)
            .field("default_role", &self.default_role)
            .field("auth_proxy_user_header", &self.auth_proxy_user_header)
            .field("password_signin", &self.password_signin)
            .finish_non_exhaustive()
    }
}

impl IdentityArgs {
    /// The sign-in settings; `public_url` is the default redirect URL's base.
    ///
    /// # Errors
    /// A bad role map, default role, name claim, header name or URL, in words.
    pub fn settings(&self, public_url: &str) -> anyhow::Result<IdentitySettings> {
        let roles = RoleMapping::parse(&self.role_map, &self.default_role)
            .map_err(|e| anyhow::anyhow!("--role-map / --default-role: {e}"))?;
        let oidc = match self
            .oidc_issuer_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            None => None,
            Some(issuer) => {
                let config = OidcConfig {
                    issuer_url: issuer.to_string(),
                    client_id: self.oidc_client_id.trim().to_string(),
                    client_secret: self.oidc_client_secret.clone(),
                    redirect_url: self.oidc_redirect_url.clone().unwrap_or_else(|| {
                        format!("{}/signin/oidc/callback", public_url.trim_end_matches('/'))
                    }),
                    scopes: self
                        .oidc_scopes
                        .iter()
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty() && s != "openid")
                        .collect(),
                    name_claim: NameClaim::parse(&self.oidc_name_claim)
                        .map_err(|e| anyhow::anyhow!("--oidc-name-claim: {e}"))?,
                    groups_claim: self.oidc_groups_claim.trim().to_string(),
                    timeout: std::time::Duration::from_secs(self.oidc_timeout_secs.max(1)),
                    label: self.oidc_label.clone(),
                };
                // Checked now, so a typo stops `serve` instead of hiding the button.
                crate::identity::Oidc::new(config.clone())?;
                Some(config)
            }
        };
        let header = |flag: &str, h: &str| {
            axum::http::HeaderName::from_bytes(h.trim().to_ascii_lowercase().as_bytes())
                .map_err(|e| anyhow::anyhow!("{flag} {h:?}: {e}"))
        };
        let proxy = match self
            .auth_proxy_user_header
            .as_deref()
            .filter(|h| !h.trim().is_empty())
        {
            None => None,
            Some(h) => Some(ProxySettings {
                user_header: header("--auth-proxy-user-header", h)?,
                groups_header: self
                    .auth_proxy_groups_header
                    .as_deref()
                    .filter(|g| !g.trim().is_empty())
                    .map(|g| header("--auth-proxy-groups-header", g))
                    .transpose()?,
            }),
        };
        anyhow::ensure!(
            self.password_signin || oidc.is_some() || proxy.is_some(),
            "--password-signin false needs --oidc-issuer-url or --auth-proxy-user-header, or nobody could sign in"
        );
        Ok(IdentitySettings {
            oidc,
            proxy,
            roles,
            password_signin: self.password_signin,
        })
    }
}
