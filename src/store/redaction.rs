//! Per-incident redaction maps, so a secret gets the same placeholder every time within one
//! incident (`<email-1>` stays `<email-1>`).

use super::Tx;
use crate::error::{AppError, AppResult};
use crate::evidence::redact::Redactor;

const SELECT: &str = "SELECT map FROM redaction_maps WHERE incident_id = $1";

fn parse(map: Option<String>) -> AppResult<Redactor> {
    match map {
        Some(m) => serde_json::from_str(&m).map_err(|e| AppError::Internal(e.into())),
        None => Ok(fresh()),
    }
}

/// A new incident's redactor: a random salt per incident, so stored fingerprints of secrets
/// cannot be confirmed by guessing.
pub fn fresh() -> Redactor {
    Redactor::with_salt(hex::encode(rand::random::<[u8; 16]>()))
}

/// Loads the incident's redactor (a fresh, salted one when none is stored yet). Called by the
/// incident write alone ([`super::IncidentWrite`]), which saves it once at commit.
///
/// # Errors
/// Database errors; a stored map that does not parse.
pub async fn load(tx: &mut Tx, incident_id: &str) -> AppResult<Redactor> {
    parse(
        sqlx::query_scalar(SELECT)
            .bind(incident_id)
            .fetch_optional(&mut **tx)
            .await?,
    )
}

/// The incident's stored redactor inside the write transaction, `None` when none is stored yet.
///
/// # Errors
/// Database errors; a stored map that does not parse.
pub(super) async fn stored_in(tx: &mut Tx, incident_id: &str) -> AppResult<Option<Redactor>> {
    let map: Option<String> = sqlx::query_scalar(SELECT)
        .bind(incident_id)
        .fetch_optional(&mut **tx)
        .await?;
    map.map(|m| parse(Some(m))).transpose()
}

/// Reads the incident's redactor without a write transaction (for previews that must not save
/// new placeholders).
///
/// # Errors
/// Database errors; a stored map that does not parse.
pub async fn peek(pool: &sqlx::AnyPool, incident_id: &str) -> AppResult<Redactor> {
    parse(
        sqlx::query_scalar(SELECT)
            .bind(incident_id)
            .fetch_optional(pool)
            .await?,
    )
}

/// The incident's stored redactor, `None` when none is stored yet (read without a write
/// transaction).
///
/// # Errors
/// Database errors; a stored map that does not parse.
pub async fn stored(pool: &sqlx::AnyPool, incident_id: &str) -> AppResult<Option<Redactor>> {
    let map: Option<String> = sqlx::query_scalar(SELECT)
        .bind(incident_id)
        .fetch_optional(pool)
        .await?;
    map.map(|m| parse(Some(m))).transpose()
}

/// Stores the incident's redactor.
///
/// # Errors
/// Database errors.
pub async fn save(tx: &mut Tx, incident_id: &str, r: &Redactor) -> AppResult<()> {
    let map = serde_json::to_string(r).map_err(|e| AppError::Internal(e.into()))?;
    sqlx::query(
        "INSERT INTO redaction_maps (incident_id, map) VALUES ($1, $2)
         ON CONFLICT (incident_id) DO UPDATE SET map = excluded.map",
    )
    .bind(incident_id)
    .bind(map)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
