//! The session store the session layer uses ([`store`]): the database's
//! ([`DatabaseSessionStore`], every instance on the database knows a session) behind
//! [`RecentSessions`], a short-lived in-process cache, joined by tower-sessions'
//! `CachingSessionStore`. A signed-in page view then reads no session from the database while
//! its record is fresh (issue #56: the read cost every signed-in request a database round trip).

use std::time::Duration;

use async_trait::async_trait;
use tower_sessions::CachingSessionStore;
use tower_sessions::cookie::time::OffsetDateTime;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};

use crate::store::sessions::DatabaseSessionStore;

/// How long [`RecentSessions`] trusts a record: the longest a sign-out on another instance
/// takes to reach this one (one on this instance reaches it at once), as for
/// [`super::auth::KNOWN_USER_TTL`].
pub const RECENT_SESSION_TTL: Duration = Duration::from_secs(10);

/// Sessions [`RecentSessions`] keeps.
const RECENT_SESSIONS: u64 = 10_000;

/// The session layer's store: [`RecentSessions`] in front of the database.
pub type Sessions = CachingSessionStore<RecentSessions, DatabaseSessionStore>;

/// The session store of the app on `pool`.
pub fn store(pool: sqlx::AnyPool) -> Sessions {
    CachingSessionStore::new(RecentSessions::default(), DatabaseSessionStore::new(pool))
}

/// Session records recently read or written, each trusted [`RECENT_SESSION_TTL`] and never past
/// its own expiry. A `moka` cache; `tower-sessions-moka-store` keeps a record until the
/// session expires (12 h here), so a sign-out on another instance would go unseen that long.
#[derive(Debug, Clone)]
pub struct RecentSessions(moka::future::Cache<Id, Record>);

impl Default for RecentSessions {
    fn default() -> Self {
        Self(
            moka::future::Cache::builder()
                .max_capacity(RECENT_SESSIONS)
                .time_to_live(RECENT_SESSION_TTL)
                .build(),
        )
    }
}

#[async_trait]
impl SessionStore for RecentSessions {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        // The database drew the id (`CachingSessionStore` creates there first): kept as it is.
        self.0.insert(record.id, record.clone()).await;
        Ok(())
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        self.0.insert(record.id, record.clone()).await;
        Ok(())
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        Ok(self
            .0
            .get(id)
            .await
            .filter(|r| r.expiry_date > OffsetDateTime::now_utc()))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        self.0.invalidate(id).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(expiry: OffsetDateTime) -> Record {
        Record {
            id: Id::default(),
            data: std::collections::HashMap::default(),
            expiry_date: expiry,
        }
    }

    #[tokio::test]
    async fn a_recent_session_is_found_until_deleted_and_never_past_its_expiry() {
        let recent = RecentSessions::default();
        let now = OffsetDateTime::now_utc();
        let mut live = record(now + tower_sessions::cookie::time::Duration::hours(1));
        recent.create(&mut live).await.expect("create");
        assert_eq!(
            recent.load(&live.id).await.expect("load"),
            Some(live.clone())
        );
        recent.delete(&live.id).await.expect("delete");
        assert_eq!(recent.load(&live.id).await.expect("load"), None);
        let expired = record(now - tower_sessions::cookie::time::Duration::seconds(1));
        recent.save(&expired).await.expect("save");
        assert_eq!(recent.load(&expired.id).await.expect("load"), None);
    }
}
