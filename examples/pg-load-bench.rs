//! PostgreSQL load benchmark (issue #19, "Load bench"): two app instances on one PostgreSQL
//! database, 200 connections each, on the incident page and the Alertmanager webhook; req/s and
//! p99 beside a single SQLite instance in the same run.
//!
//! Usage: `cargo run --release --example pg-load-bench -- [--postgres URL] [--connections 200]
//! [--seconds 30] [--warmup 5] [--embeddings off|builtin] [--keep-database]`. The PostgreSQL
//! server is `--postgres` or else `INCIDENTMIND_TEST_DATABASE_URL` (e.g.
//! `postgres://postgres@127.0.0.1:55432/postgres`; `scripts/pg-test-cluster start` runs one). Logs
//! (`RUST_LOG`, default `incidentmind=warn`) go to stderr: an error answered under load is logged
//! there with its cause.
//!
//! Setup. On the server the bench creates a fresh database `im_bench_<uuid>` (dropped at the end
//! unless `--keep-database`) and builds two instances on it as `serve` builds them — A and B,
//! each `incidentmind::App::build` over the same URL with its own pool (20 connections,
//! `store::open_postgres`), its own background work (`App::spawn_background`) and its own router
//! on its own loopback port, served with the client's address. Writers of both serialise on the
//! advisory lock of `store::begin_write`. Beside them, instance S is the same app over a fresh
//! SQLite file in a temp dir. Each database gets, once (through A for PostgreSQL, the database
//! being shared): a responder and an admin with API tokens, the sample history, 40 open incidents
//! and an Alertmanager integration created through the API by the admin. Built-in embeddings are
//! off unless `--embeddings builtin`, so the CPU goes to the database path; rate limits are off
//! (one token on hundreds of connections would otherwise be answered 429, which measures the
//! limiter).
//!
//! Load, in two phases one after the other, each `--warmup` seconds (not measured) then
//! `--seconds`:
//!
//! 1. **PostgreSQL**: `--connections` client connections to A and as many to B;
//! 2. **SQLite**: `--connections` client connections to S.
//!
//! Each connection is its own keep-alive client signed in with the responder's API token and
//! sends one request after another (closed loop), drawn at random: **50 %** the HTML incident
//! page `GET /incidents/{id}` (a bench incident or, one in four, a learned one), **50 %**
//! `POST /api/v1/webhooks/alertmanager` with a v4 body. Each connection owns two alert groups of
//! three instances whose alerts fire and resolve, one instance flipped per delivery; one delivery
//! in four is an exact duplicate of the connection's previous one.
//!
//! Error rule: a request is an error unless the page answers 200 and the webhook 202 with the
//! dedupe shown in its answer — a group's first delivery opens its incident, no later one does,
//! and a duplicate opens nothing and creates no evidence. Transport errors and timeouts (60 s)
//! count too; the first few unexpected answers are printed.
//!
//! Prints one table: per phase and route, requests, req/s (those answered within `--seconds`,
//! over it), p50 and p99 (ms) and errors, a total per phase and, for PostgreSQL, per instance;
//! requests and latencies include the requests in flight at the deadline. Then the PostgreSQL
//! phase seen each second (backends on the bench database, requests waiting on the write lock,
//! idle connections in the pools of A and B), and the checks, PASS/FAIL each: no errors; no
//! duplicate delivery opened anything; exactly one alert group and one incident per alert group
//! sent, counted in each database at the end (across both instances for PostgreSQL); the audit
//! chain of both databases intact (`store::audit::verify`, what `incidentmind audit verify`
//! runs).
//!
//! Caveats: clients, app instances and (here) the PostgreSQL server share the machine's cores,
//! as production would not: the figures compare the backends on one box, they are not capacity.
//! In a closed loop every connection is always waiting, so latency is mostly queueing (Little's
//! law: mean ≈ connections / rate) and the PostgreSQL phase has twice the connections of the
//! SQLite one. Each PostgreSQL instance has 20 database connections for its 200 clients: requests
//! queue for them in the pool (its acquire timeout is sqlx's default, 30 s). Each group's
//! deliveries go to one instance; webhooks of A and B meet on the write lock and the shared
//! tables, not on a group. The database grows through the run (alerts, evidence, audit entries).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use incidentmind::memory::embeddings::{BuiltinEmbedder, Embedder};
use incidentmind::{App, Settings, services::users::add_user, store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use sqlx::Connection as _;

/// Incidents opened for the page reads, per database.
const BENCH_INCIDENTS: usize = 40;
/// Alert groups each connection owns, and instances (alerts) in each.
const GROUPS_PER_CONNECTION: usize = 2;
const INSTANCES: usize = 3;
/// A request taking longer than this is an error (a stall, not a slow answer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The routes measured, in the table's order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    Page,
    Webhook,
    WebhookDuplicate,
}

const ROUTES: [Route; 3] = [Route::Page, Route::Webhook, Route::WebhookDuplicate];

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Page => "GET /incidents/{id}",
            Route::Webhook => "POST webhooks/alertmanager",
            Route::WebhookDuplicate => "POST webhooks/am (dup)",
        }
    }

    fn index(self) -> usize {
        ROUTES
            .iter()
            .position(|r| *r == self)
            .expect("route listed")
    }
}

/// Latency buckets: bucket `i` holds latencies in `[1.02^i, 1.02^(i+1))` µs (2 % resolution),
/// up to 1.02^1000 µs (far beyond the request timeout).
const BUCKETS: usize = 1000;

fn bucket(took: Duration) -> usize {
    let us = (took.as_secs_f64() * 1e6).max(1.0);
    ((us.ln() / 1.02f64.ln()) as usize).min(BUCKETS - 1)
}

/// One route's count, errors and latency histogram on one instance in one phase, shared by the
/// instance's connections (atomics, fixed size: nothing grows during the run).
struct RouteStats {
    count: AtomicU64,
    /// Of `count`, those answered before the phase's deadline (the rate's numerator).
    in_window: AtomicU64,
    errors: AtomicU64,
    buckets: Vec<AtomicU64>,
}

impl RouteStats {
    fn new() -> Self {
        Self {
            count: AtomicU64::new(0),
            in_window: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn record(&self, took: Duration, ok: bool, in_window: bool) {
        self.buckets[bucket(took)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        if in_window {
            self.in_window.fetch_add(1, Ordering::Relaxed);
        }
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Every route's stats on one instance, and the dedupe violations (a webhook answer opening
/// what it must not, or not opening what it must).
struct Stats {
    routes: Vec<RouteStats>,
    dedupe_failures: AtomicU64,
}

impl Stats {
    fn new() -> Self {
        Self {
            routes: ROUTES.iter().map(|_| RouteStats::new()).collect(),
            dedupe_failures: AtomicU64::new(0),
        }
    }
}

/// A snapshot summed over routes and/or instances, for a table row.
struct Summary {
    count: u64,
    in_window: u64,
    errors: u64,
    buckets: Vec<u64>,
}

impl Summary {
    fn new() -> Self {
        Self {
            count: 0,
            in_window: 0,
            errors: 0,
            buckets: vec![0; BUCKETS],
        }
    }

    fn add(&mut self, s: &RouteStats) {
        self.count += s.count.load(Ordering::Relaxed);
        self.in_window += s.in_window.load(Ordering::Relaxed);
        self.errors += s.errors.load(Ordering::Relaxed);
        for (a, b) in self.buckets.iter_mut().zip(&s.buckets) {
            *a += b.load(Ordering::Relaxed);
        }
    }

    /// The `p` quantile in ms (the bucket's geometric middle).
    fn quantile(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((p * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b;
            if seen >= rank {
                return 1.02f64.powf(i as f64 + 0.5) / 1000.0;
            }
        }
        1.02f64.powf(BUCKETS as f64) / 1000.0
    }

    /// `stats`' routes in `routes`, summed.
    fn of(stats: &[&Stats], routes: &[Route]) -> Self {
        let mut out = Self::new();
        for s in stats {
            for r in routes {
                out.add(&s.routes[r.index()]);
            }
        }
        out
    }
}

/// What a connection's requests go to: one instance's address and the credentials of its
/// database, with the incidents to read.
struct Target {
    base: String,
    token: String,
    webhook_secret: String,
    /// Open bench incidents (three page reads in four).
    open: Vec<String>,
    /// Learned incidents from the sample history (one page read in four).
    learned: Vec<String>,
}

/// One alert group a connection owns: its labels and each instance's state.
struct Group {
    alertname: &'static str,
    service: &'static str,
    shard: String,
    /// Per instance: firing, and when it started (RFC 3339).
    alerts: Vec<(bool, String)>,
    delivered: bool,
}

/// A connection's own state: its client, target, stats, random numbers, groups and what it
/// sent last.
struct Conn {
    client: reqwest::Client,
    target: Arc<Target>,
    warm: Arc<Stats>,
    measured: Arc<Stats>,
    rng: StdRng,
    groups: Vec<Group>,
    last_delivery: Option<Vec<u8>>,
}

const SERVICES: [&str; 8] = [
    "payments-gateway",
    "search-indexer",
    "image-resizer",
    "ledger-writer",
    "session-store",
    "notification-fanout",
    "inventory-sync",
    "geo-lookup",
];
const ALERTNAMES: [&str; 6] = [
    "LatencyP99AboveBudget",
    "QueueBacklogGrowing",
    "VolumeNearlyFull",
    "ContainerRestartLoop",
    "TlsCertificateExpiring",
    "ErrorBudgetBurnFast",
];
const SYMPTOMS: [&str; 6] = [
    "timeouts talking to the primary database",
    "a growing consumer lag on the events topic",
    "slow responses after the cache was flushed",
    "workers killed for exceeding their memory limit",
    "connection resets from the load balancer",
    "stale reads from a lagging replica",
];

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

impl Conn {
    /// A connection to `target` owning two alert groups whose shards start with `tag`.
    fn new(
        tag: &str,
        seed: u64,
        target: &Arc<Target>,
        warm: &Arc<Stats>,
        measured: &Arc<Stats>,
    ) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .timeout(REQUEST_TIMEOUT)
            .build()?;
        let mut rng = StdRng::seed_from_u64(seed);
        let groups = (0..GROUPS_PER_CONNECTION)
            .map(|g| Group {
                alertname: ALERTNAMES[rng.random_range(0..ALERTNAMES.len())],
                service: SERVICES[rng.random_range(0..SERVICES.len())],
                shard: format!("{tag}g{g}"),
                alerts: (0..INSTANCES).map(|_| (true, now())).collect(),
                delivered: false,
            })
            .collect();
        Ok(Self {
            client,
            target: Arc::clone(target),
            warm: Arc::clone(warm),
            measured: Arc::clone(measured),
            rng,
            groups,
            last_delivery: None,
        })
    }

    /// The next Alertmanager delivery (v4): one of the connection's groups, with one instance's
    /// state flipped (all firing on the group's first delivery).
    fn alert_body(&mut self) -> (Vec<u8>, usize) {
        let g = self.rng.random_range(0..self.groups.len());
        let flip = self.rng.random_range(0..INSTANCES);
        let group = &mut self.groups[g];
        if group.delivered {
            let (firing, started) = &mut group.alerts[flip];
            *firing = !*firing;
            if *firing {
                *started = now();
            }
        }
        let ended = now();
        let alerts: Vec<Value> = group
            .alerts
            .iter()
            .enumerate()
            .map(|(i, (firing, started))| {
                json!({
                    "status": if *firing { "firing" } else { "resolved" },
                    "labels": {
                        "alertname": group.alertname,
                        "service": group.service,
                        "shard": group.shard,
                        "instance": format!("10.9.{}.{}:9100", i, g),
                        "severity": "warning",
                    },
                    "annotations": {
                        "summary": format!("{} on {}", group.alertname, group.service),
                        "description": format!("instance {i} of shard {} crossed its threshold", group.shard),
                    },
                    "startsAt": started,
                    "endsAt": if *firing { "0001-01-01T00:00:00Z".to_string() } else { ended.clone() },
                    "fingerprint": format!("{}-{g}-{i}", group.shard),
                })
            })
            .collect();
        let any_firing = group.alerts.iter().any(|a| a.0);
        let labels =
            json!({"alertname": group.alertname, "service": group.service, "shard": group.shard});
        let body = json!({
            "receiver": "incidentmind",
            "status": if any_firing { "firing" } else { "resolved" },
            "alerts": alerts,
            "groupLabels": labels,
            "commonLabels": labels,
            "commonAnnotations": {},
            "externalURL": "http://alertmanager.bench.internal:9093",
            "version": "4",
            "groupKey": format!(
                "{{}}:{{alertname=\"{}\", service=\"{}\", shard=\"{}\"}}",
                group.alertname, group.service, group.shard
            ),
            "truncatedAlerts": 0,
        });
        (serde_json::to_vec(&body).expect("json"), g)
    }

    /// Sends one request (50 % page, 50 % webhook, a webhook being a duplicate one time in
    /// four); returns the route it was, whether it answered as expected, and whether a webhook
    /// answer broke the dedupe.
    async fn one(&mut self) -> (Route, bool, bool) {
        let t = Arc::clone(&self.target);
        if self.rng.random_bool(0.5) {
            let list = if self.rng.random_bool(0.75) || t.learned.is_empty() {
                &t.open
            } else {
                &t.learned
            };
            let id = &list[self.rng.random_range(0..list.len())];
            let r = self
                .client
                .get(format!("{}/incidents/{id}", t.base))
                .bearer_auth(&t.token)
                .send()
                .await;
            return (Route::Page, answered(r, 200).await, false);
        }
        let duplicate = self.last_delivery.is_some() && self.rng.random_bool(0.25);
        let (body, group, route) = if duplicate {
            let body = self.last_delivery.clone().expect("checked");
            (body, None, Route::WebhookDuplicate)
        } else {
            let (body, g) = self.alert_body();
            (body, Some(g), Route::Webhook)
        };
        let r = self
            .client
            .post(format!("{}/api/v1/webhooks/alertmanager", t.base))
            .bearer_auth(&t.webhook_secret)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        let v: Value = match r {
            Ok(r) if r.status().as_u16() == 202 => match r.json().await {
                Ok(v) => v,
                Err(e) => {
                    report_unexpected(&t.base, 202, &e.to_string());
                    return (route, false, false);
                }
            },
            other => return (route, answered(other, 202).await, false),
        };
        let opened = v["opened"].as_array().map_or(0, Vec::len);
        let created: u64 = v["groups"]
            .as_array()
            .map(|gs| {
                gs.iter()
                    .filter_map(|g| g["evidence_created"].as_u64())
                    .sum()
            })
            .unwrap_or(0);
        let ok = match group {
            None => opened == 0 && created == 0,
            Some(g) => {
                let first = !self.groups[g].delivered;
                self.groups[g].delivered = true;
                if first { opened == 1 } else { opened == 0 }
            }
        };
        if !ok {
            report_unexpected(&t.base, 202, &format!("dedupe: duplicate={duplicate} {v}"));
        }
        self.last_delivery = Some(body);
        (route, ok, !ok)
    }

    fn groups_delivered(&self) -> i64 {
        self.groups.iter().filter(|g| g.delivered).count() as i64
    }
}

/// Whether a response has `status` and its body reads.
async fn answered(res: reqwest::Result<reqwest::Response>, status: u16) -> bool {
    match res {
        Ok(r) if r.status().as_u16() == status => r.bytes().await.is_ok(),
        Ok(r) => {
            let s = r.status();
            let url = r.url().to_string();
            let body = r.text().await.unwrap_or_default();
            report_unexpected(&url, s.as_u16(), &body);
            false
        }
        Err(e) => {
            let url = e.url().map(ToString::to_string).unwrap_or_default();
            report_unexpected(&url, 0, &format!("{e:?}"));
            false
        }
    }
}

/// Prints the first few unexpected answers (where, status, start of the body), so a failure
/// says why; the server's log (stderr) has the cause of a 5xx.
fn report_unexpected(url: &str, status: u16, body: &str) {
    static SHOWN: AtomicU64 = AtomicU64::new(0);
    if SHOWN.fetch_add(1, Ordering::Relaxed) < 12 {
        let short: String = body.chars().take(400).collect();
        eprintln!("unexpected answer {status} from {url}: {short}");
    }
}

/// Runs every connection for `seconds` (each until its request in flight at the deadline
/// ends), recording into its warm-up or measured stats; returns the connections (they keep their
/// keep-alive connections and alert groups) and the wall time taken.
async fn load(conns: Vec<Conn>, seconds: u64, measured: bool) -> anyhow::Result<(Vec<Conn>, f64)> {
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut tasks = Vec::with_capacity(conns.len());
    for mut c in conns {
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                let t = Instant::now();
                let (route, ok, dedupe_broken) = c.one().await;
                let stats = if measured { &c.measured } else { &c.warm };
                let in_window = Instant::now() <= until;
                stats.routes[route.index()].record(t.elapsed(), ok, in_window);
                if dedupe_broken {
                    stats.dedupe_failures.fetch_add(1, Ordering::Relaxed);
                }
            }
            c
        }));
    }
    let mut back = Vec::with_capacity(tasks.len());
    for t in tasks {
        back.push(t.await?);
    }
    Ok((back, started.elapsed().as_secs_f64()))
}

/// One app instance as `serve` runs it: built, its background work started, its router served
/// on a loopback port with the client's address.
struct Instance {
    app: App,
    base: String,
    stop: tokio::sync::watch::Sender<bool>,
    worker: tokio::task::JoinHandle<()>,
}

impl Instance {
    async fn start(
        database_url: &str,
        embedder: Option<&Arc<dyn Embedder>>,
    ) -> anyhow::Result<Self> {
        let mut settings = Settings::default();
        // One token on every connection: the per-token and per-integration limits would answer
        // most requests 429 (see the module doc).
        settings.rate_limits.api_per_token = 0;
        settings.rate_limits.webhook_per_integration = 0;
        let mut config = incidentmind::app::Config::new(database_url);
        config.settings = settings;
        config.embedder = embedder.cloned();
        let app = App::build(config).await?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let worker = app.spawn_background(Duration::from_secs(10), stopped);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let router = app.router.clone();
        tokio::spawn(async move {
            let _ = axum::serve(
                listener,
                router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
            )
            .await;
        });
        Ok(Self {
            app,
            base,
            stop,
            worker,
        })
    }

    /// Stops the background work and waits for the memory worker (between its batches).
    async fn stop(&mut self) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(30), &mut self.worker).await;
    }
}

/// What every instance on one database shares: the tokens, the integration's secret and the
/// incidents to read, made once through `first`.
struct Fixture {
    token: String,
    webhook_secret: String,
    open: Vec<String>,
    learned: Vec<String>,
}

impl Fixture {
    async fn make(first: &Instance) -> anyhow::Result<Self> {
        let pool = first.app.pool();
        let memory = first.app.memory();
        let token = add_user(pool, "rita", "responder", None).await?;
        let admin = add_user(pool, "ada", "admin", None).await?;
        incidentmind::services::sample::load_history(memory).await?;
        incidentmind::memory::embeddings::catch_up(memory).await?;
        let learned: Vec<String> = sqlx::query_scalar("SELECT id FROM incidents")
            .fetch_all(pool)
            .await?;
        let mut open = Vec::with_capacity(BENCH_INCIDENTS);
        for n in 0..BENCH_INCIDENTS {
            let svc = SERVICES[n % SERVICES.len()];
            let new = incidentmind::domain::NewIncident {
                title: format!("{svc}: {} (load {n})", SYMPTOMS[n % SYMPTOMS.len()]),
                service: svc.into(),
                severity: incidentmind::domain::Severity::Sev3,
                description: format!(
                    "Opened by the load bench. Responders saw {} on {svc}.",
                    SYMPTOMS[(n * 5) % SYMPTOMS.len()]
                ),
            };
            let inc = incidentmind::services::workflow::open_incident(
                &incidentmind::store::Db::new(pool.clone()),
                "rita",
                &new,
            )
            .await?;
            open.push(inc.id.to_string());
        }
        let res = reqwest::Client::new()
            .post(format!("{}/api/v1/integrations", first.base))
            .bearer_auth(&admin)
            .json(&json!({"name": "bench-alertmanager", "source": "alertmanager"}))
            .send()
            .await?;
        anyhow::ensure!(
            res.status().as_u16() == 201,
            "integration: {}",
            res.status()
        );
        let v: Value = res.json().await?;
        Ok(Self {
            token,
            webhook_secret: v["secret"].as_str().unwrap_or_default().to_string(),
            open,
            learned,
        })
    }

    fn target(&self, instance: &Instance) -> Arc<Target> {
        Arc::new(Target {
            base: instance.base.clone(),
            token: self.token.clone(),
            webhook_secret: self.webhook_secret.clone(),
            open: self.open.clone(),
            learned: self.learned.clone(),
        })
    }

    /// Incidents in the database before any webhook.
    fn incidents_before(&self) -> i64 {
        (self.open.len() + self.learned.len()) as i64
    }
}

/// One phase's instances (label, warm-up and measured stats) and its run.
struct Phase {
    backend: &'static str,
    instances: Vec<(&'static str, Arc<Stats>, Arc<Stats>)>,
    elapsed: f64,
    groups_sent: i64,
}

/// Builds `per_instance` connections to each of `instances` (tagged for unique alert groups),
/// runs the warm-up and the measured load, and returns the phase with its connections' groups.
async fn run_phase(
    backend: &'static str,
    fixture: &Fixture,
    instances: &[(&'static str, &Instance)],
    per_instance: usize,
    warmup: u64,
    seconds: u64,
) -> anyhow::Result<Phase> {
    let mut phase = Phase {
        backend,
        instances: Vec::new(),
        elapsed: 0.0,
        groups_sent: 0,
    };
    let mut conns = Vec::with_capacity(per_instance * instances.len());
    for (n, (label, instance)) in instances.iter().enumerate() {
        let target = fixture.target(instance);
        let (warm, measured) = (Arc::new(Stats::new()), Arc::new(Stats::new()));
        for c in 0..per_instance {
            let tag = format!("{backend}-{label}-c{c}");
            let seed = 0x19_0000 + (n * per_instance + c) as u64;
            conns.push(Conn::new(&tag, seed, &target, &warm, &measured)?);
        }
        phase.instances.push((label, warm, measured));
    }
    println!(
        "{backend}: {} connections ({per_instance} to {}{}), warm-up {warmup} s then {seconds} s…",
        conns.len(),
        if instances.len() > 1 { "each of " } else { "" },
        instances
            .iter()
            .map(|(l, i)| format!("{l} {}", i.base))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (conns, _) = load(conns, warmup, false).await?;
    let (conns, elapsed) = load(conns, seconds, true).await?;
    phase.elapsed = elapsed;
    phase.groups_sent = conns.iter().map(Conn::groups_delivered).sum();
    Ok(phase)
}

/// The database side of the PostgreSQL phase, sampled each second on a connection of its own:
/// the most backends on the bench database, the most and mean requests waiting on the write lock
/// (`pg_locks`, advisory, not granted), and the fewest and mean idle connections in the
/// instances' pools (0: requests queue for a connection).
#[derive(Default)]
struct ServerView {
    samples: u64,
    backends_max: i64,
    waiting_max: i64,
    waiting_sum: i64,
    idle_min: usize,
    idle_sum: usize,
}

async fn sample_server(
    url: String,
    pools: Vec<sqlx::AnyPool>,
    done: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<ServerView> {
    let mut conn = sqlx::AnyConnection::connect(&url).await?;
    let mut view = ServerView {
        idle_min: usize::MAX,
        ..ServerView::default()
    };
    while !*done.borrow() {
        let (backends, waiting): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()), \
                    (SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)",
        )
        .fetch_one(&mut conn)
        .await?;
        view.samples += 1;
        view.backends_max = view.backends_max.max(backends);
        view.waiting_max = view.waiting_max.max(waiting);
        view.waiting_sum += waiting;
        let idle: usize = pools.iter().map(sqlx::AnyPool::num_idle).sum();
        view.idle_min = view.idle_min.min(idle);
        view.idle_sum += idle;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    conn.close().await.ok();
    Ok(view)
}

/// What the webhooks made in one database, against the groups sent: alert groups, incidents
/// opened by them (all incidents but those made before the load) and distinct incidents of the
/// alert groups.
async fn webhook_counts(pool: &sqlx::AnyPool) -> anyhow::Result<(i64, i64, i64)> {
    let groups: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM alert_groups")
        .fetch_one(pool)
        .await?;
    let incidents: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM incidents")
        .fetch_one(pool)
        .await?;
    let distinct: i64 = sqlx::query_scalar("SELECT COUNT(DISTINCT incident_id) FROM alert_groups")
        .fetch_one(pool)
        .await?;
    Ok((groups, incidents, distinct))
}

/// Raises the soft open-file limit to the hard one (each connection is a socket on the client
/// and one on the server: 800+ with the PostgreSQL pools). Returns the limit in effect.
fn raise_open_files() -> u64 {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit read and write the struct given, nothing else.
        #[allow(unsafe_code)]
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) != 0 {
                return 0;
            }
            if lim.rlim_cur < lim.rlim_max {
                let want = libc::rlimit {
                    rlim_cur: lim.rlim_max,
                    rlim_max: lim.rlim_max,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const want) == 0 {
                    lim = want;
                }
            }
        }
        lim.rlim_cur
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// The process settings first (`incidentmind::startup`), as the `incidentmind` binary makes
/// them, then the logs and the bench on a multi-threaded runtime.
fn main() -> anyhow::Result<()> {
    incidentmind::startup::prepare();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "incidentmind=warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

#[allow(
    clippy::too_many_lines,
    reason = "a benchmark run: it sets up, runs both phases and prints each figure and check, top to bottom"
)]
async fn run() -> anyhow::Result<()> {
    let usage = "usage: pg-load-bench [--postgres URL] [--connections 200] [--seconds 30] \
                 [--warmup 5] [--embeddings off|builtin] [--keep-database]";
    let mut server = std::env::var("INCIDENTMIND_TEST_DATABASE_URL").ok();
    let mut connections = 200usize;
    let mut seconds = 30u64;
    let mut warmup = 5u64;
    let mut with_model = false;
    let mut keep = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--postgres" => server = Some(value()?),
            "--connections" => connections = value()?.parse()?,
            "--seconds" => seconds = value()?.parse()?,
            "--warmup" => warmup = value()?.parse()?,
            "--embeddings" => {
                with_model = match value()?.as_str() {
                    "builtin" => true,
                    "off" => false,
                    other => anyhow::bail!("--embeddings takes off or builtin, not {other}"),
                }
            }
            "--keep-database" => keep = true,
            other => anyhow::bail!("unknown argument {other}; {usage}"),
        }
    }
    let server = server.ok_or_else(|| {
        anyhow::anyhow!(
            "no PostgreSQL server: give --postgres URL or set INCIDENTMIND_TEST_DATABASE_URL; {usage}"
        )
    })?;
    anyhow::ensure!(
        connections > 0 && seconds > 0,
        "connections and seconds must be > 0"
    );
    println!("open-file limit {}", raise_open_files());
    let embedder: Option<Arc<dyn Embedder>> = if with_model {
        Some(Arc::new(BuiltinEmbedder::load(
            &incidentmind::memory::minilm::default_dir(),
        )?))
    } else {
        None
    };

    // A fresh database on the server, as the tests' `fresh_postgres_database` makes one.
    sqlx::any::install_default_drivers();
    let name = format!("im_bench_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::AnyConnection::connect(&server).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await?;
    admin.close().await.ok();
    let mut pg_url = url::Url::parse(&server)?;
    pg_url.set_path(&name);
    let pg_url = pg_url.to_string();
    println!("PostgreSQL database {}", store::redacted_url(&pg_url));

    let t = Instant::now();
    let mut a = Instance::start(&pg_url, embedder.as_ref()).await?;
    let mut b = Instance::start(&pg_url, embedder.as_ref()).await?;
    let pg_fixture = Fixture::make(&a).await?;
    let dir = tempfile::tempdir()?;
    let sqlite_path = dir.path().join("pg-load-bench.db");
    let mut s = Instance::start(
        sqlite_path.to_str().expect("utf-8 temp path"),
        embedder.as_ref(),
    )
    .await?;
    let sqlite_fixture = Fixture::make(&s).await?;
    println!(
        "setup in {:.1} s: {} learned and {} open incidents per database, embeddings {}",
        t.elapsed().as_secs_f64(),
        pg_fixture.learned.len(),
        pg_fixture.open.len(),
        if with_model { "built-in" } else { "off" }
    );

    // Phase 1: PostgreSQL, A and B, with the server's view sampled beside it.
    let (done, done_rx) = tokio::sync::watch::channel(false);
    let pools = vec![a.app.pool().clone(), b.app.pool().clone()];
    let sampler = tokio::spawn(sample_server(pg_url.clone(), pools, done_rx));
    let pg = run_phase(
        "PostgreSQL",
        &pg_fixture,
        &[("A", &a), ("B", &b)],
        connections,
        warmup,
        seconds,
    )
    .await?;
    let _ = done.send(true);
    let view = sampler.await?;
    a.stop().await;
    b.stop().await;

    // Phase 2: SQLite, S alone.
    let sq = run_phase(
        "SQLite",
        &sqlite_fixture,
        &[("S", &s)],
        connections,
        warmup,
        seconds,
    )
    .await?;
    s.stop().await;

    // The table.
    println!();
    println!(
        "{:<22} {:<27} {:>9} {:>8} {:>9} {:>9} {:>7}",
        "backend/instances", "route", "requests", "req/s", "p50 ms", "p99 ms", "errors"
    );
    let row = |who: &str, what: &str, sum: &Summary| {
        println!(
            "{who:<22} {what:<27} {:>9} {:>8.0} {:>9.2} {:>9.2} {:>7}",
            sum.count,
            sum.in_window as f64 / seconds as f64,
            sum.quantile(0.50),
            sum.quantile(0.99),
            sum.errors
        );
    };
    for phase in [&pg, &sq] {
        let labels: Vec<&str> = phase.instances.iter().map(|i| i.0).collect();
        let who = format!(
            "{} {} ({}×{connections})",
            phase.backend,
            labels.join("+"),
            labels.len()
        );
        let measured: Vec<&Stats> = phase.instances.iter().map(|i| &*i.2).collect();
        for r in ROUTES {
            row(&who, r.name(), &Summary::of(&measured, &[r]));
        }
        row(&who, "total", &Summary::of(&measured, &ROUTES));
        if phase.instances.len() > 1 {
            for (label, _, m) in &phase.instances {
                row(
                    &format!("{} {label}", phase.backend),
                    "total",
                    &Summary::of(&[&**m], &ROUTES),
                );
            }
        }
    }
    println!(
        "req/s: requests answered within the {seconds} s; requests and latencies include those in \
         flight at the deadline (the last ended at {:.1} s on PostgreSQL, {:.1} s on SQLite)",
        pg.elapsed, sq.elapsed
    );
    match &view {
        Ok(v) => println!(
            "PostgreSQL, sampled each second ({} samples, warm-up included): up to {} backends on \
             the bench database; requests waiting on the write lock max {}, mean {:.1}; idle \
             connections in the pools of A and B (40 in all) min {}, mean {:.1}",
            v.samples,
            v.backends_max,
            v.waiting_max,
            v.waiting_sum as f64 / v.samples.max(1) as f64,
            v.idle_min,
            v.idle_sum as f64 / v.samples.max(1) as f64
        ),
        Err(e) => println!("PostgreSQL server view not sampled: {e}"),
    }

    // The checks.
    let mark = |ok: bool| if ok { "PASS" } else { "FAIL" };
    let mut all_ok = true;
    for (phase, fixture, pool) in [
        (&pg, &pg_fixture, a.app.pool()),
        (&sq, &sqlite_fixture, s.app.pool()),
    ] {
        let every: Vec<&Stats> = phase
            .instances
            .iter()
            .flat_map(|i| [&*i.1, &*i.2])
            .collect();
        let total = Summary::of(&every, &ROUTES);
        let dups = Summary::of(&every, &[Route::WebhookDuplicate]);
        let dedupe: u64 = every
            .iter()
            .map(|s| s.dedupe_failures.load(Ordering::Relaxed))
            .sum();
        let (groups, incidents, distinct) = webhook_counts(pool).await?;
        let opened = incidents - fixture.incidents_before();
        let errors_ok = total.errors == 0;
        let dedupe_ok = dedupe == 0 && dups.errors == 0;
        let groups_ok = groups == phase.groups_sent
            && opened == phase.groups_sent
            && distinct == phase.groups_sent;
        let audit = store::audit::verify(pool).await?;
        let audit_ok = matches!(audit, store::audit::Verification::Intact { .. });
        let backend = phase.backend;
        println!(
            "  {} {backend}: errors {} of {} requests, warm-up included (floor 0)",
            mark(errors_ok),
            total.errors,
            total.count
        );
        println!(
            "  {} {backend}: dedupe — {} duplicate deliveries, {} failed; {dedupe} webhook answers \
             opened what they must not (or not what they must)",
            mark(dedupe_ok),
            dups.count,
            dups.errors
        );
        println!(
            "  {} {backend}: one incident per alert group — {} groups sent, {groups} alert groups, \
             {opened} incidents opened by webhooks, {distinct} distinct incidents of the groups",
            mark(groups_ok),
            phase.groups_sent
        );
        match &audit {
            store::audit::Verification::Intact { entries } => {
                println!("  PASS {backend}: audit log intact, {entries} entries");
            }
            store::audit::Verification::Broken { seq, reason } => {
                println!("  FAIL {backend}: audit log BROKEN at entry {seq}: {reason}");
            }
        }
        all_ok &= errors_ok && dedupe_ok && groups_ok && audit_ok;
    }
    println!("{}", mark(all_ok));

    // The PostgreSQL database goes, unless kept to look at.
    a.app.pool().close().await;
    b.app.pool().close().await;
    if keep {
        println!("kept database {name}");
    } else {
        let mut admin = sqlx::AnyConnection::connect(&server).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE {name} WITH (FORCE)"
        )))
        .execute(&mut admin)
        .await?;
        admin.close().await.ok();
    }
    Ok(())
}
