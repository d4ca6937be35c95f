//! The one place the application is put together: [`App::build`] opens the database (running
//! its migrations), builds organizational memory over it with the chosen embedder, adds the
//! optional model analyst, and builds the router over that [`AppState`]. `serve`, `demo` and the
//! integration tests all go through it, so the tests cover the wiring `serve` runs.
//!
//! What to build with (embedder, model analyst) is chosen by the caller: `cli` from its flags,
//! tests with their fakes.

use std::sync::Arc;

use axum::Router;

use crate::analyst::Analyst;
use crate::memory::{Embedder, Memory};
use crate::store::{self, OpenMode};
use crate::web::{self, AppState, Settings};

/// How often recorded histogram samples are folded into their buckets when nobody scrapes.
pub const METRICS_UPKEEP: std::time::Duration = std::time::Duration::from_secs(5);

/// What the app is built from.
#[derive(Clone)]
pub struct Config {
    /// SQLite database file (or `sqlite://…` URL), or a `postgres://…` URL; created (SQLite) or
    /// migrated (both) when needed.
    pub database_url: String,
    /// Settings the handlers read (body limits, cookies, self-confirm).
    pub settings: Settings,
    /// The embedder recall compares vectors of; `None`: recall on words and structured keys.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The model analyst; `None`: the built-in analyst only.
    pub llm: Option<Arc<dyn Analyst>>,
}

impl Config {
    /// A config over `database_url` with default settings, no embedder and no model.
    pub fn new(database_url: impl Into<String>) -> Self {
        Self {
            database_url: database_url.into(),
            settings: Settings::default(),
            embedder: None,
            llm: None,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field(
                "database_url",
                &crate::store::redacted_url(&self.database_url),
            )
            .field("settings", &self.settings)
            .field("embedder", &self.embedder.as_ref().map(|_| "configured"))
            .field("llm", &self.llm.as_ref().map(|_| "configured"))
            .finish()
    }
}

/// The built application: its state (pool, memory, settings, model) and the router over it.
#[derive(Debug, Clone)]
pub struct App {
    /// Shared state of every handler.
    pub state: AppState,
    /// The whole application ([`web::router`] over [`App::state`]), ready for `axum::serve`.
    pub router: Router,
}

impl App {
    /// Opens the database (creating it and running the migrations when missing), builds memory
    /// with `config.embedder`, adds `config.llm`, and builds the router.
    ///
    /// # Errors
    /// The database cannot be opened (the message names the file and what to do).
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let pool =
            store::Db::new(store::open(&config.database_url, OpenMode::CreateIfMissing).await?);
        let memory = Memory::new(pool.clone(), config.embedder);
        let prometheus = config.settings.prometheus.clone();
        let mut state = AppState::new(pool, config.settings).with_memory(memory);
        state.pages.follow(state.pool.changes());
        if store::Backend::of_url(&config.database_url) == store::Backend::Postgres {
            state.live.follow_instances_on(&config.database_url);
        }
        if let Some(p) = prometheus {
            tracing::info!(url = %crate::store::redacted_url(&p.url), "Prometheus source configured");
            state = state.with_prometheus(crate::prometheus::Prometheus::new(p)?);
        }
        if let Some(llm) = config.llm {
            let metered = crate::analyst::metered::MeteredAnalyst::new(llm, state.metrics.clone());
            state = state.with_llm(Arc::new(metered));
        }
        let router = web::router(state.clone());
        Ok(Self { state, router })
    }

    /// Starts the work `serve` runs beside the router, each until `stop` turns true: the
    /// memory worker ([`crate::memory::embeddings::run_worker`], woken by writes and at least
    /// every `idle`), the chat outbox worker ([`crate::services::chat::run_worker`]), the metrics
    /// upkeep (every [`METRICS_UPKEEP`], see
    /// [`crate::metrics::Metrics::upkeep`]) and, when [`Settings::consolidate_every`] is set,
    /// the consolidation schedule ([`crate::services::consolidation::run_schedule`]); it also
    /// embeds the failure modes' meanings once
    /// ([`crate::memory::Memory::failure_mode_meanings`]; pastes made before are tagged by
    /// patterns only). Returns the memory worker's handle: it stops between batches, so a caller shutting down may
    /// wait for it.
    pub fn spawn_background(
        &self,
        idle: std::time::Duration,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(
            self.state
                .metrics
                .clone()
                .upkeep(METRICS_UPKEEP, stop.clone()),
        );
        // Consolidation on its schedule: proposals only, never durable memory.
        if let Some(every) = self.state.settings.consolidate_every {
            tracing::info!(every_secs = every.as_secs(), "consolidation scheduled");
            tokio::spawn(crate::services::consolidation::run_schedule(
                self.state.memory.clone(),
                every,
                self.state.settings.rule_cap,
                stop.clone(),
            ));
        }
        // Chat messages from the outbox, beside every request, never inside one.
        tokio::spawn(crate::services::chat::run_worker(
            self.state.pool.pool().clone(),
            self.state.memory.clone(),
            self.state.settings.chat.clone(),
            std::sync::Arc::clone(&self.state.foreground),
            stop.clone(),
        ));
        let memory = self.state.memory.clone();
        tokio::spawn(async move {
            memory.failure_mode_meanings().await;
        });
        tokio::spawn(crate::memory::embeddings::run_worker(
            self.state.memory.clone(),
            idle,
            stop,
        ))
    }

    /// The database pool.
    pub fn pool(&self) -> &sqlx::AnyPool {
        &self.state.pool
    }

    /// Organizational memory (the same handle, caches and embedder the handlers use).
    pub fn memory(&self) -> &Memory {
        &self.state.memory
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    #[test]
    fn a_config_printed_for_debugging_hides_the_database_password() {
        let shown = format!(
            "{:?}",
            Config::new("postgres://app:s3cr3t-pw@db.internal:5432/incidentmind")
        );
        assert!(!shown.contains("s3cr3t-pw"), "{shown}");
        assert!(shown.contains("db.internal"), "{shown}");
    }
}
