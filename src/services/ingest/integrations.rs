//! Integrations and their secrets: create and update them, the SHA-256 of a bearer secret, the
//! PagerDuty signature, and the policy that authenticates a webhook delivery.

use super::parse::AlertStatus;
use super::{FALLBACK_SERVICE, NAME_MAX, SIGNING_SECRET_MAX, Source, default_severity_map};
use std::collections::BTreeMap;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use sqlx::AnyPool;

use crate::domain::{Severity, ValidationError, optional_text, required_text};
use crate::error::{AppError, AppResult};
use crate::store;
use crate::store::integrations::{self as istore, Integration, IntegrationPatch, NewIntegration};

/// SHA-256 (hex) of a bearer secret: what is stored and looked up.
pub fn secret_digest(secret: &str) -> String {
    crate::digest::sha256_hex(secret.as_bytes())
}

/// Whether `header` (the value of `X-PagerDuty-Signature`) holds a `v1=<hex>` signature that is
/// the HMAC-SHA256 of `body` under `secret`. The header may list several signatures separated by
/// commas (secret rotation); one match is enough. Comparison is constant-time
/// (PagerDuty webhooks v3, "Verifying Signatures").
pub fn verify_pagerduty_signature(secret: &str, body: &[u8], header: &str) -> bool {
    header.split(',').any(|part| {
        let Some(hex_sig) = part.trim().strip_prefix("v1=") else {
            return false;
        };
        let Ok(sig) = hex::decode(hex_sig.trim()) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return false;
        };
        mac.update(body);
        mac.verify_slice(&sig).is_ok()
    })
}

/// The `X-PagerDuty-Signature` value for `body` under `secret` (`v1=<hex>`), as PagerDuty sends it.
pub fn pagerduty_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return String::new(), // HMAC accepts keys of any length; unreachable
    };
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// What a webhook delivery presented to authenticate itself, as read from the request.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// The bearer secret: `Authorization: Bearer …`, else `?token=`.
    pub secret: Option<String>,
    /// The `X-PagerDuty-Signature` header.
    pub signature: Option<String>,
}

/// Finds the integration a delivery to `source`'s endpoint comes from (the webhook policy):
/// - a bearer secret names the integration whose secret hashes (SHA-256) to it; it must be of
///   `source` (403 otherwise); one with a signing secret also needs a valid signature;
/// - PagerDuty only, without a bearer secret: a signature valid under the signing secret of one
///   PagerDuty integration;
/// - anything else is a 401.
///
/// # Errors
/// [`AppError::Unauthenticated`] (401) without a valid secret or signature;
/// [`AppError::Forbidden`] (403) for a secret of another source's integration.
pub async fn authenticate(
    pool: &AnyPool,
    source: Source,
    credentials: &Credentials,
    body: &[u8],
) -> AppResult<Integration> {
    let signature = credentials.signature.as_deref();
    if let Some(secret) = &credentials.secret {
        let Some(integ) = istore::find_by_secret(pool, &secret_digest(secret)).await? else {
            return Err(AppError::Unauthenticated);
        };
        if integ.source != source.as_str() {
            return Err(AppError::Forbidden(format!(
                "this secret belongs to a {} integration; point it at /api/v1/webhooks/{}",
                integ.source, integ.source
            )));
        }
        if let Some(signing) = &integ.signing_secret {
            let ok = signature.is_some_and(|s| verify_pagerduty_signature(signing, body, s));
            if !ok {
                return Err(AppError::Unauthenticated);
            }
        }
        return Ok(integ);
    }
    if source == Source::Pagerduty
        && let Some(sig) = signature
    {
        for integ in istore::list(pool, Some(source.as_str())).await? {
            if let Some(signing) = &integ.signing_secret
                && verify_pagerduty_signature(signing, body, sig)
            {
                return Ok(integ);
            }
        }
    }
    Err(AppError::Unauthenticated)
}

/// Body of `POST /api/v1/integrations` (and the admin form).
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::ToSchema)]
pub struct IntegrationInput {
    /// Unique name, 1–100 characters.
    #[serde(default)]
    pub name: String,
    /// `alertmanager`, `pagerduty`, `grafana` or `opsgenie`.
    #[serde(default)]
    #[schema(example = "alertmanager")]
    pub source: String,
    /// Service for alerts that name none (default `unassigned`).
    #[serde(default)]
    pub default_service: Option<String>,
    /// Severity for alerts whose severity is missing or unmapped (default `SEV3`).
    #[serde(default)]
    #[schema(value_type = Option<Severity>)]
    pub default_severity: Option<String>,
    /// Sender value → `SEV1`…`SEV4`, merged over [`default_severity_map`].
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, Severity>>)]
    pub severity_map: Option<BTreeMap<String, String>>,
    /// PagerDuty only: the subscription's signing secret.
    #[serde(default)]
    pub signing_secret: Option<String>,
}

/// Body of `PATCH /api/v1/integrations/{id}`: absent fields stay as they are.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::ToSchema)]
pub struct IntegrationUpdate {
    /// New default service.
    #[serde(default)]
    pub default_service: Option<String>,
    /// New default severity.
    #[serde(default)]
    #[schema(value_type = Option<Severity>)]
    pub default_severity: Option<String>,
    /// New mapping, merged over [`default_severity_map`] (replaces the previous one).
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, Severity>>)]
    pub severity_map: Option<BTreeMap<String, String>>,
    /// PagerDuty only: new signing secret; an empty string removes it.
    #[serde(default)]
    pub signing_secret: Option<String>,
}

fn parse_map(m: &BTreeMap<String, String>) -> Result<BTreeMap<String, Severity>, ValidationError> {
    let mut out = default_severity_map();
    for (k, v) in m {
        let key = required_text("severity_map", &k.to_lowercase(), 64)?;
        let sev = Severity::parse(v).map_err(|_| {
            ValidationError::new(
                "severity_map",
                format!("'{v}' (for '{key}') is not a severity; use SEV1, SEV2, SEV3 or SEV4"),
            )
        })?;
        out.insert(key, sev);
    }
    Ok(out)
}

fn parse_signing_secret(source: Source, s: &str) -> Result<Option<String>, ValidationError> {
    let s = optional_text("signing_secret", s, SIGNING_SECRET_MAX)?;
    if s.is_empty() {
        return Ok(None);
    }
    if source != Source::Pagerduty {
        return Err(ValidationError::new(
            "signing_secret",
            "only PagerDuty signs its webhooks; leave it empty for this source",
        ));
    }
    Ok(Some(s))
}

fn parse_default_severity(s: Option<&str>) -> Result<Severity, ValidationError> {
    match s.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(Severity::Sev3),
        Some(s) => {
            Severity::parse(s).map_err(|e| ValidationError::new("default_severity", e.message))
        }
    }
}

fn parse_default_service(s: Option<&str>) -> Result<String, ValidationError> {
    match s.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(FALLBACK_SERVICE.to_string()),
        Some(s) => crate::domain::incident::parse_service(s)
            .map_err(|e| ValidationError::new("default_service", e.message)),
    }
}

/// Creates an integration on behalf of `actor` (the caller checks the admin role) and returns
/// it with its bearer secret (`whk_` + 64 hex digits), which is shown once: only its SHA-256 is
/// stored.
///
/// # Errors
/// [`AppError::Validation`] naming the bad field; [`AppError::Conflict`] when the name is
/// taken; database errors.
pub async fn create_integration(
    pool: &AnyPool,
    actor: &str,
    input: &IntegrationInput,
) -> AppResult<(Integration, String)> {
    let name = required_text("name", &input.name, NAME_MAX)?;
    let source = Source::parse(&input.source)?;
    let default_service = parse_default_service(input.default_service.as_deref())?;
    let default_severity = parse_default_severity(input.default_severity.as_deref())?;
    let severity_map = parse_map(&input.severity_map.clone().unwrap_or_default())?;
    let signing_secret =
        parse_signing_secret(source, input.signing_secret.as_deref().unwrap_or(""))?;
    let bytes: [u8; 32] = rand::random();
    let secret = format!("whk_{}", hex::encode(bytes));
    let digest = secret_digest(&secret);
    let new = NewIntegration {
        name: &name,
        source: source.as_str(),
        default_service: &default_service,
        default_severity,
        severity_map: &severity_map,
        secret_sha256: &digest,
        signing_secret: signing_secret.as_deref(),
        created_by: actor,
    };
    let mut w = crate::store::Write::begin(pool).await?;
    let id = istore::insert(w.tx(), &new, store::now()).await?;
    let detail = serde_json::json!({"name": name, "source": source, "signing_secret": signing_secret.is_some()});
    w.audit_by(
        actor,
        "integration.create",
        &format!("integration:{id}"),
        &detail.to_string(),
    )
    .await?;
    w.commit().await?;
    tracing::info!(
        integration.id = id,
        source = source.as_str(),
        "integration created"
    );
    Ok((istore::get(pool, id).await?, secret))
}

/// Changes an integration's defaults, mapping or PagerDuty signing secret on behalf of `actor`
/// (the caller checks the admin role).
///
/// # Errors
/// [`AppError::NotFound`]; [`AppError::Validation`] naming the bad field; database errors.
pub async fn update_integration(
    pool: &AnyPool,
    actor: &str,
    id: i64,
    input: &IntegrationUpdate,
) -> AppResult<Integration> {
    let current = istore::get(pool, id).await?;
    let source = Source::parse(&current.source).map_err(|e| AppError::Internal(e.into()))?;
    let patch = IntegrationPatch {
        default_service: input
            .default_service
            .as_deref()
            .map(|s| parse_default_service(Some(s)))
            .transpose()?,
        default_severity: input
            .default_severity
            .as_deref()
            .map(|s| parse_default_severity(Some(s)))
            .transpose()?,
        severity_map: input.severity_map.as_ref().map(parse_map).transpose()?,
        signing_secret: input
            .signing_secret
            .as_deref()
            .map(|s| parse_signing_secret(source, s))
            .transpose()?,
    };
    let mut w = crate::store::Write::begin(pool).await?;
    istore::update(w.tx(), id, &patch, store::now()).await?;
    let detail = serde_json::json!({
        "default_service": patch.default_service,
        "default_severity": patch.default_severity,
        "severity_map": patch.severity_map.is_some(),
        "signing_secret": patch.signing_secret.as_ref().map(|s| if s.is_some() { "set" } else { "removed" }),
    });
    w.audit_by(
        actor,
        "integration.update",
        &format!("integration:{id}"),
        &detail.to_string(),
    )
    .await?;
    w.commit().await?;
    istore::get(pool, id).await
}

/// Every integration, oldest first (admins' list).
///
/// # Errors
/// Database errors.
pub async fn list_integrations(pool: &AnyPool) -> AppResult<Vec<Integration>> {
    istore::list(pool, None).await
}

/// Integration `id`.
///
/// # Errors
/// [`AppError::NotFound`]; database errors.
pub async fn integration(pool: &AnyPool, id: i64) -> AppResult<Integration> {
    istore::get(pool, id).await
}

/// The alerts of incident `id`, in the order they arrived.
pub struct IncidentAlerts {
    /// Every alert, first received first.
    pub alerts: Vec<crate::store::alerts::StoredAlert>,
    /// How many are firing.
    pub firing: i64,
    /// How many are resolved.
    pub resolved: i64,
    /// The alert group that opened the incident, with its integration's name and source.
    pub group: Option<(crate::store::alerts::AlertGroup, String, String)>,
}

/// Reads the [`IncidentAlerts`] of incident `id`. The counts are those of the alerts read, so
/// a delivery that commits meanwhile can never make them disagree with the list.
///
/// # Errors
/// [`AppError::NotFound`] for an unknown incident; database errors.
pub async fn incident_alerts(
    pool: &AnyPool,
    id: &crate::domain::IncidentId,
) -> AppResult<IncidentAlerts> {
    crate::store::incidents::get(pool, id).await?;
    let alerts = crate::store::alerts::list_for_incident(pool, id.as_str()).await?;
    let count = |status: AlertStatus| {
        alerts
            .iter()
            .filter(|a| a.status == status.as_str())
            .count() as i64
    };
    let (firing, resolved) = (count(AlertStatus::Firing), count(AlertStatus::Resolved));
    let group = crate::store::alerts::group_of_incident(pool, id.as_str()).await?;
    Ok(IncidentAlerts {
        alerts,
        firing,
        resolved,
        group,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_on_the_raw_body_and_accept_a_rotation_list() {
        let body = br#"{"event":{}}"#;
        let sig = pagerduty_signature("s3cret", body);
        assert!(verify_pagerduty_signature("s3cret", body, &sig));
        let rotating = format!("v1=00ff, {sig}");
        assert!(verify_pagerduty_signature("s3cret", body, &rotating));
        assert!(!verify_pagerduty_signature("other", body, &sig));
        assert!(!verify_pagerduty_signature("s3cret", b"{}", &sig));
        assert!(!verify_pagerduty_signature("s3cret", body, "v1=zz"));
        assert!(!verify_pagerduty_signature("s3cret", body, ""));
    }
}
