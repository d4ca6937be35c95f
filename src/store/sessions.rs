//! A `tower_sessions::SessionStore` on the app's database pool, either backend (the published
//! SQLx store needs an older sqlx). Sessions live in the database, so every app instance on it
//! knows them. Records are JSON; expired sessions are never returned and are pruned on write.

use async_trait::async_trait;
use sqlx::AnyPool;
use tower_sessions::cookie::time::OffsetDateTime;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};

/// Session storage in the `sessions` table.
#[derive(Debug, Clone)]
pub struct DatabaseSessionStore {
    pool: AnyPool,
}

impl DatabaseSessionStore {
    /// Wraps the app's pool.
    pub fn new(pool: AnyPool) -> Self {
        Self { pool }
    }
}

fn backend(e: impl std::fmt::Display) -> session_store::Error {
    session_store::Error::Backend(e.to_string())
}

#[async_trait]
impl SessionStore for DatabaseSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        let data = serde_json::to_vec(&record.data)
            .map_err(|e| session_store::Error::Encode(e.to_string()))?;
        // Ids are 128-bit random; on the astronomically unlikely collision, draw a new one.
        loop {
            let res =
                sqlx::query("INSERT INTO sessions (id, data, expiry_date) VALUES ($1, $2, $3)")
                    .bind(record.id.to_string())
                    .bind(&data)
                    .bind(record.expiry_date.unix_timestamp())
                    .execute(&self.pool)
                    .await;
            match res {
                Ok(_) => return Ok(()),
                Err(e) if super::is_unique_violation(&e) => record.id = Id::default(),
                Err(e) => return Err(backend(e)),
            }
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let data = serde_json::to_vec(&record.data)
            .map_err(|e| session_store::Error::Encode(e.to_string()))?;
        sqlx::query(
            "INSERT INTO sessions (id, data, expiry_date) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET data = excluded.data, expiry_date = excluded.expiry_date",
        )
        .bind(record.id.to_string())
        .bind(data)
        .bind(record.expiry_date.unix_timestamp())
        .execute(&self.pool)
        .await
        .map_err(backend)?;
        sqlx::query("DELETE FROM sessions WHERE expiry_date < $1")
            .bind(OffsetDateTime::now_utc().unix_timestamp())
            .execute(&self.pool)
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let row: Option<(Vec<u8>, i64)> = sqlx::query_as(
            "SELECT data, expiry_date FROM sessions WHERE id = $1 AND expiry_date > $2",
        )
        .bind(id.to_string())
        .bind(OffsetDateTime::now_utc().unix_timestamp())
        .fetch_optional(&self.pool)
        .await
        .map_err(backend)?;
        let Some((data, expiry)) = row else {
            return Ok(None);
        };
        Ok(Some(Record {
            id: *id,
            data: serde_json::from_slice(&data)
                .map_err(|e| session_store::Error::Decode(e.to_string()))?,
            expiry_date: OffsetDateTime::from_unix_timestamp(expiry).map_err(backend)?,
        }))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        sqlx::query("DELETE FROM sessions WHERE id = $1")
            .bind(id.to_string())
            .execute(&self.pool)
            .await
            .map_err(backend)?;
        Ok(())
    }
}
