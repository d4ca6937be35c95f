//! The append-only audit log: every incident transition and memory write, with actor and
//! instant, chained by SHA-256 (each entry's hash covers the previous entry's hash), so that an
//! edit of any row breaks verification from that row on.

use sha2::{Digest, Sha256};
use sqlx::AnyPool;

use super::{Tx, db_time, now};
use crate::error::AppResult;

/// Hash of the (absent) entry before the first one.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// An audit entry as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, serde::Serialize)]
pub struct AuditEntry {
    /// 1-based position in the log.
    pub seq: i64,
    /// RFC 3339 UTC instant.
    pub at: String,
    /// Who did it.
    pub actor: String,
    /// What was done, e.g. `incident.resolve`, `memory.write`.
    pub action: String,
    /// What it was done to, e.g. `INC-2026-0001`.
    pub subject: String,
    /// Details (JSON or one line).
    pub detail: String,
    /// Hash of the previous entry (hex SHA-256), [`GENESIS`] for the first.
    pub prev_hash: String,
    /// Hex SHA-256 over `prev_hash`, seq, at, actor, action, subject and detail.
    pub hash: String,
}

/// Computes an entry's hash: SHA-256 over the fields separated by a unit separator (0x1F), hex.
pub fn entry_hash(
    prev_hash: &str,
    seq: i64,
    at: &str,
    actor: &str,
    action: &str,
    subject: &str,
    detail: &str,
) -> String {
    let mut h = Sha256::new();
    for part in [
        prev_hash,
        &seq.to_string(),
        at,
        actor,
        action,
        subject,
        detail,
    ] {
        h.update(part.as_bytes());
        h.update([0x1f]);
    }
    hex::encode(h.finalize())
}

/// Appends one entry inside the caller's write transaction.
///
/// # Errors
/// Database errors.
pub async fn append(
    tx: &mut Tx,
    actor: &str,
    action: &str,
    subject: &str,
    detail: &str,
) -> AppResult<()> {
    let last: Option<(i64, String)> =
        sqlx::query_as("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
            .fetch_optional(&mut **tx)
            .await?;
    let (seq, prev) = match last {
        Some((s, h)) => (s + 1, h),
        None => (1, GENESIS.to_string()),
    };
    let at = db_time(now());
    let hash = entry_hash(&prev, seq, &at, actor, action, subject, detail);
    sqlx::query(
        "INSERT INTO audit_log (seq, at, actor, action, subject, detail, prev_hash, hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(seq)
    .bind(&at)
    .bind(actor)
    .bind(action)
    .bind(subject)
    .bind(detail)
    .bind(&prev)
    .bind(&hash)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Result of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Every entry's hash matches and links to its predecessor.
    Intact {
        /// Number of entries checked.
        entries: i64,
    },
    /// The first entry that does not match.
    Broken {
        /// Its sequence number.
        seq: i64,
        /// Why: recomputed hash differs, or the link to the previous entry differs, or a gap.
        reason: String,
    },
}

/// Recomputes the whole chain.
///
/// # Errors
/// Database errors.
pub async fn verify(pool: &AnyPool) -> AppResult<Verification> {
    let rows: Vec<AuditEntry> = sqlx::query_as("SELECT * FROM audit_log ORDER BY seq")
        .fetch_all(pool)
        .await?;
    let mut prev = GENESIS.to_string();
    for (i, e) in rows.iter().enumerate() {
        let expected_seq = i as i64 + 1;
        if e.seq != expected_seq {
            return Ok(Verification::Broken {
                seq: e.seq,
                reason: format!("expected entry {expected_seq}: an entry is missing"),
            });
        }
        if e.prev_hash != prev {
            return Ok(Verification::Broken {
                seq: e.seq,
                reason: "does not link to the previous entry".into(),
            });
        }
        let h = entry_hash(
            &prev, e.seq, &e.at, &e.actor, &e.action, &e.subject, &e.detail,
        );
        if h != e.hash {
            return Ok(Verification::Broken {
                seq: e.seq,
                reason: "content does not match its hash (edited after writing)".into(),
            });
        }
        prev = h;
    }
    Ok(Verification::Intact {
        entries: rows.len() as i64,
    })
}
