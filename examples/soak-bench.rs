//! Soak benchmark (issue #22, "Load"): mixed traffic on 200 connections for ten minutes, on
//! loopback, with per-route errors and latency, memory growth and the audit chain at the end.
//!
//! Usage: `cargo run --release --example soak-bench -- [--connections 200] [--seconds 600]
//! [--warmup 30] [--embeddings builtin|off] [--no-metrics-upkeep] [--fixed-incidents]`. Besides
//! the resident set it prints what the allocators have handed out and not had back (jemalloc's
//! `stats.allocated` for Rust, glibc's `mallinfo2` for C) and the thread count, so live data
//! can be told from memory an allocator keeps mapped.
//!
//! Builds the app as `serve` builds it (`incidentmind::App::build` over a fresh SQLite file,
//! with the built-in embedding model unless `--embeddings off`, the memory worker running, the
//! router served with the client's address), replays the sample history, opens 40 incidents,
//! creates an Alertmanager integration through the API as an admin, and then runs `--connections`
//! client tasks, each on its own keep-alive connection, signed in with an API token, sending one
//! request after another (closed loop) for `--warmup` seconds (not measured) and then for
//! `--seconds`. Each request is drawn at random with this mix:
//!
//! - **58 % reads**: 20 % the incident page `GET /incidents/{id}` (an incident being worked or a
//!   learned one from the history), 8 % the list page `GET /incidents`, 8 %
//!   `GET /api/v1/incidents`, 10 % `GET /api/v1/incidents/{id}`, 8 % `GET /api/v1/recall?q=…`,
//!   4 % `GET /healthz`;
//! - **2 % new incidents**: `POST /api/v1/incidents` (201). The incidents being worked are a
//!   window of 40: the bench's own at the start, then each incident opened enters it and the
//!   oldest leaves, so an incident gets evidence for a while and then goes quiet, as on call,
//!   and the data each request touches stays the same size through the run.
//!   `--fixed-incidents` keeps the first 40 throughout (the run before this window: each of them
//!   ends with ~250 pastes, and pages, investigations and their memory grow with them);
//! - **15 % evidence**: `POST /api/v1/incidents/{id}/evidence` (JSON, logs or a note, texts made
//!   up here and unique per post); one in ten is an exact repeat of a paste the connection sent
//!   before, which must answer 200 ("already evidence") instead of 201;
//! - **10 % investigations**: `POST /api/v1/incidents/{id}/investigate` on an incident being
//!   worked;
//! - **15 % webhooks**: `POST /api/v1/webhooks/alertmanager` (v4 bodies: each connection owns two
//!   alert groups of three instances whose alerts fire and resolve); one in four is an exact
//!   duplicate of the connection's previous delivery, which must dedupe (202 with nothing opened
//!   and no evidence created).
//!
//! Error rule: a request counts as an error unless it answers its route's status — 200 for the
//! reads, 201 for new incidents, evidence and investigations, 200 for a repeated paste, 202 for
//! webhooks — and, for webhooks, unless the answer shows the dedupe: a group's first delivery opens its
//! incident, no later one does, and a duplicate creates no evidence. Transport errors count too.
//! No request sends an incident version, so a 409 (stale version) cannot be a real conflict here
//! and counts as an error like any other status. The API token and webhook rate limits are off
//! (0): one token on 200 connections would otherwise be answered 429, which measures the limiter.
//!
//! Prints, per route, the count, errors, p50 and p99 (ms); the total errors; the resident set
//! (RSS, `/proc/self/status`) after the warm-up, at the end and its growth; the alert groups and
//! incidents the webhooks made against the groups sent; and the audit chain verified at the end
//! with `store::audit::verify` (what `incidentmind audit verify` runs). Floors: **0 errors**,
//! **RSS growth ≤ 10 %**, audit chain intact, one incident per alert group; PASS/FAIL for each.
//!
//! Caveats: client and server share this process and its cores, as a load balancer and the app
//! would not: latencies are a lower bound on capacity and, in a closed loop with every connection
//! always waiting, mostly queueing (Little's law: mean ≈ connections / rate); they are printed,
//! not judged. The RSS is the whole process's, the client's included (its buffers are allocated
//! before the start figure; latencies go into fixed histograms, not growing lists). The database
//! grows through the run (evidence, alerts, investigations), so some growth is data.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use incidentmind::memory::embeddings::BuiltinEmbedder;
use incidentmind::{App, Settings, services::users::add_user, store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// Floor: the resident set at the end at most this much above the one after the warm-up.
const RSS_GROWTH_MAX: f64 = 0.10;
/// Incidents opened for evidence and investigations.
const BENCH_INCIDENTS: usize = 40;
/// Alert groups each connection owns, and instances (alerts) in each.
const GROUPS_PER_CONNECTION: usize = 2;
const INSTANCES: usize = 3;

/// The routes measured, in the table's order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Route {
    Page,
    ListPage,
    ApiList,
    ApiShow,
    Recall,
    Health,
    Open,
    Evidence,
    EvidenceRepeat,
    Investigate,
    Webhook,
    WebhookDuplicate,
}

const ROUTES: [Route; 12] = [
    Route::Page,
    Route::ListPage,
    Route::ApiList,
    Route::ApiShow,
    Route::Recall,
    Route::Health,
    Route::Open,
    Route::Evidence,
    Route::EvidenceRepeat,
    Route::Investigate,
    Route::Webhook,
    Route::WebhookDuplicate,
];

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Page => "GET /incidents/{id}",
            Route::ListPage => "GET /incidents",
            Route::ApiList => "GET /api/v1/incidents",
            Route::ApiShow => "GET /api/v1/incidents/{id}",
            Route::Recall => "GET /api/v1/recall?q=",
            Route::Health => "GET /healthz",
            Route::Open => "POST /api/v1/incidents",
            Route::Evidence => "POST …/evidence",
            Route::EvidenceRepeat => "POST …/evidence (repeat)",
            Route::Investigate => "POST …/investigate",
            Route::Webhook => "POST webhooks/alertmanager",
            Route::WebhookDuplicate => "POST webhooks/am (dup)",
        }
    }

    /// Draws a route with the mix of the module doc (percent).
    fn draw(rng: &mut StdRng) -> Route {
        match rng.random_range(0..100u32) {
            0..20 => Route::Page,
            20..28 => Route::ListPage,
            28..36 => Route::ApiList,
            36..46 => Route::ApiShow,
            46..54 => Route::Recall,
            54..58 => Route::Health,
            58..60 => Route::Open,
            60..75 => Route::Evidence,
            75..85 => Route::Investigate,
            _ => Route::Webhook,
        }
    }
}

/// Latency buckets: bucket `i` holds latencies in `[1.02^i, 1.02^(i+1))` µs (2 % resolution),
/// up to 1.02^1000 µs (far beyond the request timeout).
const BUCKETS: usize = 1000;

/// One route's count, errors and latency histogram, shared by every connection (atomics, fixed
/// size: nothing grows during the run).
struct RouteStats {
    count: AtomicU64,
    errors: AtomicU64,
    buckets: Vec<AtomicU64>,
}

impl RouteStats {
    fn new() -> Self {
        Self {
            count: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn record(&self, took: Duration, ok: bool) {
        let us = (took.as_secs_f64() * 1e6).max(1.0);
        let i = ((us.ln() / 1.02f64.ln()) as usize).min(BUCKETS - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The `p` quantile in ms (the bucket's geometric middle).
    fn quantile(&self, p: f64) -> f64 {
        let n = self.count.load(Ordering::Relaxed);
        if n == 0 {
            return 0.0;
        }
        let rank = ((p * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                return 1.02f64.powf(i as f64 + 0.5) / 1000.0;
            }
        }
        1.02f64.powf(BUCKETS as f64) / 1000.0
    }
}

/// Every route's stats for one phase (warm-up or measured).
struct Stats(Vec<RouteStats>);

impl Stats {
    fn new() -> Self {
        Self(ROUTES.iter().map(|_| RouteStats::new()).collect())
    }

    fn of(&self, r: Route) -> &RouteStats {
        &self.0[ROUTES.iter().position(|x| *x == r).expect("route listed")]
    }

    fn errors(&self) -> u64 {
        self.0
            .iter()
            .map(|s| s.errors.load(Ordering::Relaxed))
            .sum()
    }

    fn count(&self) -> u64 {
        self.0.iter().map(|s| s.count.load(Ordering::Relaxed)).sum()
    }
}

/// What every connection shares: the base URL, tokens, the incidents to read and write.
struct Shared {
    base: String,
    token: String,
    webhook_secret: String,
    /// The incidents being worked (evidence, investigations, pages): the 40 opened at the start,
    /// then, unless `--fixed-incidents`, a window that each incident opened during the run
    /// enters while the oldest leaves it.
    open: std::sync::Mutex<std::collections::VecDeque<String>>,
    /// Whether incidents opened during the run enter [`Shared::open`].
    rolling: bool,
    /// Incidents opened through the API during the run (warm-up included).
    opened: AtomicU64,
    /// Learned incidents from the sample history (pages and API reads).
    learned: Vec<String>,
}

impl Shared {
    /// The incidents being worked; a panic while the lock was held left nothing half-written
    /// (one push or pop), so a poisoned lock is taken over.
    fn worked(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<String>> {
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
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

/// A connection's own state: its client, random numbers, groups and what it sent last.
struct Conn {
    client: reqwest::Client,
    rng: StdRng,
    id: usize,
    groups: Vec<Group>,
    last_delivery: Option<Vec<u8>>,
    pastes: Vec<(String, Value)>,
    seq: u64,
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
const SYMPTOMS: [&str; 10] = [
    "timeouts talking to the primary database",
    "a growing consumer lag on the events topic",
    "slow responses after the cache was flushed",
    "workers killed for exceeding their memory limit",
    "connection resets from the load balancer",
    "duplicate messages delivered to subscribers",
    "disk writes stalling on the data volume",
    "a thundering herd after the nightly batch",
    "requests rejected by the upstream rate limiter",
    "stale reads from a lagging replica",
];
const LOG_TEMPLATES: [&str; 8] = [
    "WARN pool wait exceeded {ms}ms for {svc} (in use {n}/64) trace={hex}",
    "ERROR deadline of {ms}ms exceeded calling {svc}.Lookup attempt={n} trace={hex}",
    "INFO retrying batch {hex} after {ms}ms backoff ({n} items pending)",
    "ERROR write to /var/lib/{svc}/segment-{n} failed: no space left on device",
    "WARN consumer group {svc}-workers lagging by {n} messages (partition {n2})",
    "ERROR upstream {svc} answered 503 in {ms}ms, circuit now half-open ({n} failures)",
    "INFO gc pause of {ms}ms on worker {n2}, heap at {n} MiB",
    "WARN request {hex} to {svc} took {ms}ms, above the {n2}00ms budget",
];

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

impl Conn {
    fn pick<'a>(&mut self, list: &'a [String]) -> &'a str {
        &list[self.rng.random_range(0..list.len())]
    }

    /// One of the incidents being worked ([`Shared::open`]), at random.
    fn pick_open(&mut self, s: &Shared) -> String {
        let open = s.worked();
        open[self.rng.random_range(0..open.len())].clone()
    }

    /// A log paste of 5–30 lines from the templates, with random fields, unique by `seq`.
    fn log_paste(&mut self) -> String {
        self.seq += 1;
        let lines = self.rng.random_range(5..=30);
        let mut out = String::new();
        for l in 0..lines {
            let t = LOG_TEMPLATES[self.rng.random_range(0..LOG_TEMPLATES.len())];
            let line = t
                .replace("{ms}", &self.rng.random_range(40..9000u32).to_string())
                .replace("{svc}", SERVICES[self.rng.random_range(0..SERVICES.len())])
                .replace("{n}", &self.rng.random_range(1..5000u32).to_string())
                .replace("{n2}", &self.rng.random_range(1..9u32).to_string())
                .replace("{hex}", &format!("{:012x}", self.rng.random::<u64>() >> 16));
            out.push_str(&format!(
                "2026-12-02T{:02}:{:02}:{:02}Z c{}-{} {line}\n",
                (l / 3600) % 24,
                (l / 60) % 60,
                l % 60,
                self.id,
                self.seq
            ));
        }
        out
    }

    /// A note in words of its own, unique by `seq`.
    fn note(&mut self) -> String {
        self.seq += 1;
        let svc = SERVICES[self.rng.random_range(0..SERVICES.len())];
        let sym = SYMPTOMS[self.rng.random_range(0..SYMPTOMS.len())];
        format!(
            "Responder note {}-{}: {svc} shows {sym}; rolled one canary back at minute {} and \
             the graphs flattened for about {} minutes before it came back.",
            self.id,
            self.seq,
            self.rng.random_range(1..60u32),
            self.rng.random_range(2..20u32)
        )
    }

    fn question(&mut self) -> String {
        let svc = SERVICES[self.rng.random_range(0..SERVICES.len())];
        let sym = SYMPTOMS[self.rng.random_range(0..SYMPTOMS.len())];
        match self.rng.random_range(0..3u32) {
            0 => format!("{svc} {sym}"),
            1 => format!("what fixed {sym} last time"),
            _ => format!("why does {svc} page us at night"),
        }
    }

    /// The next Alertmanager delivery: one of the connection's groups, with one instance's
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
        let body = json!({
            "receiver": "incidentmind",
            "status": if any_firing { "firing" } else { "resolved" },
            "alerts": alerts,
            "groupLabels": {"alertname": group.alertname, "service": group.service, "shard": group.shard},
            "commonLabels": {"alertname": group.alertname, "service": group.service, "shard": group.shard},
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
}

/// Whether a response has `status` and its body reads.
async fn answered(res: reqwest::Result<reqwest::Response>, status: u16) -> bool {
    match res {
        Ok(r) if r.status().as_u16() == status => r.bytes().await.is_ok(),
        Ok(r) => {
            let s = r.status();
            let body = r.text().await.unwrap_or_default();
            report_unexpected(s.as_u16(), &body);
            false
        }
        Err(e) => {
            report_unexpected(0, &e.to_string());
            false
        }
    }
}

/// Prints the first few unexpected answers (status, start of the body), so a failure says why.
fn report_unexpected(status: u16, body: &str) {
    static SHOWN: AtomicU64 = AtomicU64::new(0);
    if SHOWN.fetch_add(1, Ordering::Relaxed) < 10 {
        let short: String = body.chars().take(300).collect();
        eprintln!("unexpected answer {status}: {short}");
    }
}

/// Sends one request of `route` (a webhook may turn into a duplicate, a paste into a repeat);
/// returns the route it was and whether it answered as expected.
#[allow(
    clippy::too_many_lines,
    reason = "one match arm per route of the soak mix, each with the answer it expects"
)]
async fn one(c: &mut Conn, s: &Shared, route: Route) -> (Route, bool) {
    let b = &s.base;
    let t = &s.token;
    match route {
        Route::Page => {
            let id = if c.rng.random_bool(0.75) || s.learned.is_empty() {
                c.pick_open(s)
            } else {
                c.pick(&s.learned).to_string()
            };
            let r = c
                .client
                .get(format!("{b}/incidents/{id}"))
                .bearer_auth(t)
                .send()
                .await;
            (route, answered(r, 200).await)
        }
        Route::ListPage => {
            let r = c
                .client
                .get(format!("{b}/incidents"))
                .bearer_auth(t)
                .send()
                .await;
            (route, answered(r, 200).await)
        }
        Route::ApiList => {
            let url = if c.rng.random_bool(0.5) {
                format!("{b}/api/v1/incidents")
            } else {
                format!("{b}/api/v1/incidents?state=all")
            };
            let r = c.client.get(url).bearer_auth(t).send().await;
            (route, answered(r, 200).await)
        }
        Route::ApiShow => {
            let id = if c.rng.random_bool(0.5) || s.learned.is_empty() {
                c.pick_open(s)
            } else {
                c.pick(&s.learned).to_string()
            };
            let r = c
                .client
                .get(format!("{b}/api/v1/incidents/{id}"))
                .bearer_auth(t)
                .send()
                .await;
            (route, answered(r, 200).await)
        }
        Route::Recall => {
            let q = c.question();
            let r = c
                .client
                .get(format!("{b}/api/v1/recall"))
                .query(&[("q", q.as_str())])
                .bearer_auth(t)
                .send()
                .await;
            (route, answered(r, 200).await)
        }
        Route::Health => {
            let r = c.client.get(format!("{b}/healthz")).send().await;
            (route, answered(r, 200).await)
        }
        Route::Open => {
            let svc = SERVICES[c.rng.random_range(0..SERVICES.len())];
            let body = json!({
                "title": format!("{svc}: {}", SYMPTOMS[c.rng.random_range(0..SYMPTOMS.len())]),
                "service": svc,
                "severity": "SEV3",
                "description": c.note(),
            });
            let r = c
                .client
                .post(format!("{b}/api/v1/incidents"))
                .bearer_auth(t)
                .json(&body)
                .send()
                .await;
            let id = match r {
                Ok(res) if res.status().as_u16() == 201 => res
                    .json::<Value>()
                    .await
                    .ok()
                    .and_then(|v| v["id"].as_str().map(str::to_owned)),
                other => {
                    answered(other, 201).await;
                    None
                }
            };
            let Some(id) = id else {
                return (route, false);
            };
            s.opened.fetch_add(1, Ordering::Relaxed);
            if s.rolling {
                let mut open = s.worked();
                open.push_back(id);
                if open.len() > BENCH_INCIDENTS {
                    open.pop_front();
                }
            }
            (route, true)
        }
        Route::Evidence | Route::EvidenceRepeat => {
            let repeat = !c.pastes.is_empty() && c.rng.random_bool(0.1);
            let (id, body, route, status) = if repeat {
                let i = c.rng.random_range(0..c.pastes.len());
                let (id, body) = c.pastes[i].clone();
                (id, body, Route::EvidenceRepeat, 200)
            } else {
                let id = c.pick_open(s);
                let body = if c.rng.random_bool(0.7) {
                    json!({"kind": "logs", "content": c.log_paste(), "source": format!("host-{}", c.id % 17)})
                } else {
                    json!({"kind": "note", "content": c.note(), "source": "responder"})
                };
                // A few pastes are kept to repeat later (bounded: the client must not grow).
                if c.pastes.len() < 8 {
                    c.pastes.push((id.clone(), body.clone()));
                } else if c.rng.random_bool(0.1) {
                    let i = c.rng.random_range(0..c.pastes.len());
                    c.pastes[i] = (id.clone(), body.clone());
                }
                (id, body, Route::Evidence, 201)
            };
            let r = c
                .client
                .post(format!("{b}/api/v1/incidents/{id}/evidence"))
                .bearer_auth(t)
                .json(&body)
                .send()
                .await;
            (route, answered(r, status).await)
        }
        Route::Investigate => {
            let id = c.pick_open(s);
            let r = c
                .client
                .post(format!("{b}/api/v1/incidents/{id}/investigate"))
                .bearer_auth(t)
                .send()
                .await;
            (route, answered(r, 201).await)
        }
        Route::Webhook | Route::WebhookDuplicate => {
            let duplicate = c.last_delivery.is_some() && c.rng.random_bool(0.25);
            let (body, group) = if duplicate {
                (c.last_delivery.clone().expect("checked"), None)
            } else {
                let (body, g) = c.alert_body();
                (body, Some(g))
            };
            let route = if duplicate {
                Route::WebhookDuplicate
            } else {
                Route::Webhook
            };
            let r = c
                .client
                .post(format!("{b}/api/v1/webhooks/alertmanager"))
                .bearer_auth(&s.webhook_secret)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await;
            let v: Value = match r {
                Ok(r) if r.status().as_u16() == 202 => match r.json().await {
                    Ok(v) => v,
                    Err(e) => {
                        report_unexpected(202, &e.to_string());
                        return (route, false);
                    }
                },
                other => return (route, answered(other, 202).await),
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
                    let first = !c.groups[g].delivered;
                    c.groups[g].delivered = true;
                    if first { opened == 1 } else { opened == 0 }
                }
            };
            if !ok {
                report_unexpected(202, &format!("dedupe: duplicate={duplicate} {v}"));
            }
            c.last_delivery = Some(body);
            (route, ok)
        }
    }
}

/// Runs every connection for `seconds`, recording into `stats`; returns the connections for
/// the next phase (they keep their keep-alive connections and alert groups).
async fn load(
    conns: Vec<Conn>,
    shared: &Arc<Shared>,
    stats: &Arc<Stats>,
    seconds: u64,
) -> anyhow::Result<Vec<Conn>> {
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::with_capacity(conns.len());
    for mut c in conns {
        let shared = Arc::clone(shared);
        let stats = Arc::clone(stats);
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                let route = Route::draw(&mut c.rng);
                let t = Instant::now();
                let (route, ok) = one(&mut c, &shared, route).await;
                stats.of(route).record(t.elapsed(), ok);
            }
            c
        }));
    }
    let mut back = Vec::with_capacity(tasks.len());
    for t in tasks {
        back.push(t.await?);
    }
    Ok(back)
}

/// The process's resident set in KiB (`VmRSS` of `/proc/self/status`).
fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// One `… kB` field of `/proc/self/status` in KiB (0 when absent). `RssAnon` is heap and
/// stacks; `RssFile` is file pages mapped in, here mostly the SQLite database read through its
/// memory map (page cache the kernel may take back, which grows with the database, not a leak);
/// `RssShmem` holds the WAL index (`-shm`). See proc(5).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Bytes handed out and not given back, in KiB: Rust allocations (jemalloc's
/// `stats.allocated`, see `incidentmind::startup`) plus C allocations, SQLite's above all
/// (glibc's `mallinfo2`: `uordblks` from its arenas plus `hblkhd` in their own maps). Set
/// against `RssAnon` it tells live data from memory the allocators keep after it was freed.
fn malloc_in_use_kib() -> u64 {
    rust_heap_kib() + c_heap_kib()
}

/// jemalloc's `stats.allocated` in KiB (0 where jemalloc is not the allocator).
fn rust_heap_kib() -> u64 {
    #[cfg(not(target_env = "msvc"))]
    {
        // The counters are a snapshot taken at the last epoch advance.
        let _ = tikv_jemalloc_ctl::epoch::advance();
        tikv_jemalloc_ctl::stats::allocated::read().map_or(0, |b| (b / 1024) as u64)
    }
    #[cfg(target_env = "msvc")]
    {
        0
    }
}

/// glibc's bytes in use in KiB (0 on other C libraries).
fn c_heap_kib() -> u64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        #[allow(unsafe_code)]
        let m = unsafe { libc::mallinfo2() };
        ((m.uordblks + m.hblkhd) / 1024) as u64
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        0
    }
}

/// `RssAnon / RssFile / RssShmem` in MiB, for the report.
fn rss_parts() -> [u64; 3] {
    ["RssAnon:", "RssFile:", "RssShmem:"].map(status_kib)
}

/// The process settings first (`incidentmind::startup`), as the `incidentmind` binary makes
/// them, then the bench on a multi-threaded runtime.
fn main() -> anyhow::Result<()> {
    incidentmind::startup::prepare();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

#[allow(
    clippy::too_many_lines,
    reason = "a benchmark run: it sets up, measures each figure in turn and prints it against its floor, top to bottom"
)]
async fn run() -> anyhow::Result<()> {
    let mut connections = 200usize;
    let mut seconds = 600u64;
    let mut warmup = 30u64;
    let mut with_model = true;
    let mut upkeep = true;
    let mut rolling = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--connections" => connections = value()?.parse()?,
            "--seconds" => seconds = value()?.parse()?,
            "--warmup" => warmup = value()?.parse()?,
            "--embeddings" => {
                with_model = match value()?.as_str() {
                    "builtin" => true,
                    "off" => false,
                    other => anyhow::bail!("--embeddings takes builtin or off, not {other}"),
                }
            }
            "--no-metrics-upkeep" => upkeep = false,
            "--fixed-incidents" => rolling = false,
            other => anyhow::bail!(
                "unknown argument {other}; usage: soak-bench [--connections 200] [--seconds 600] [--warmup 30] [--embeddings builtin|off] [--no-metrics-upkeep] [--fixed-incidents]"
            ),
        }
    }
    anyhow::ensure!(
        connections > 0 && seconds > 0,
        "connections and seconds must be > 0"
    );
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("soak-bench.db");
    let mut settings = Settings::default();
    // One token on every connection: the per-token and per-integration limits would answer
    // most requests 429 (see the module doc).
    settings.rate_limits.api_per_token = 0;
    settings.rate_limits.webhook_per_integration = 0;
    let mut config = incidentmind::app::Config::new(path.to_str().expect("utf-8 temp path"));
    config.settings = settings;
    if with_model {
        config.embedder = Some(Arc::new(BuiltinEmbedder::load(
            &incidentmind::memory::minilm::default_dir(),
        )?));
    }
    let app = App::build(config).await?;
    let pool = app.pool().clone();
    let memory = app.memory().clone();
    let token = add_user(&pool, "rita", "responder", None).await?;
    let admin = add_user(&pool, "ada", "admin", None).await?;
    let t = Instant::now();
    let loaded = incidentmind::services::sample::load_history(&memory).await?;
    incidentmind::memory::embeddings::catch_up(&memory).await?;
    println!(
        "sample history: {} incidents learned and embedded in {:.1} s",
        loaded.len(),
        t.elapsed().as_secs_f64()
    );
    let learned: Vec<String> = sqlx::query_scalar("SELECT id FROM incidents")
        .fetch_all(&pool)
        .await?;
    let mut open = Vec::new();
    for n in 0..BENCH_INCIDENTS {
        let svc = SERVICES[n % SERVICES.len()];
        let new = incidentmind::domain::NewIncident {
            title: format!("{svc}: {} (soak {n})", SYMPTOMS[n % SYMPTOMS.len()]),
            service: svc.into(),
            severity: incidentmind::domain::Severity::Sev3,
            description: format!(
                "Opened by the soak bench. Responders saw {} on {svc}.",
                SYMPTOMS[(n * 7) % SYMPTOMS.len()]
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

    // Served as `serve` serves it: the background work (memory worker, metrics upkeep), and the
    // client's address for the limits. `--no-metrics-upkeep` runs the memory worker alone, as
    // `serve` did before the upkeep (to measure what it is worth).
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = if upkeep {
        app.spawn_background(Duration::from_secs(10), stopped)
    } else {
        tokio::spawn(incidentmind::memory::embeddings::run_worker(
            memory.clone(),
            Duration::from_secs(10),
            stopped,
        ))
    };
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

    let setup = reqwest::Client::new();
    let res = setup
        .post(format!("{base}/api/v1/integrations"))
        .bearer_auth(&admin)
        .json(&json!({"name": "soak-alertmanager", "source": "alertmanager"}))
        .send()
        .await?;
    anyhow::ensure!(
        res.status().as_u16() == 201,
        "integration: {}",
        res.status()
    );
    let v: Value = res.json().await?;
    let webhook_secret = v["secret"].as_str().unwrap_or_default().to_string();
    let shared = Arc::new(Shared {
        base,
        token,
        webhook_secret,
        open: std::sync::Mutex::new(open.into()),
        rolling,
        opened: AtomicU64::new(0),
        learned,
    });

    let mut conns = Vec::with_capacity(connections);
    for id in 0..connections {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .timeout(Duration::from_secs(150))
            .build()?;
        let mut rng = StdRng::seed_from_u64(0x50a4_0000 + id as u64);
        let groups = (0..GROUPS_PER_CONNECTION)
            .map(|g| Group {
                alertname: ALERTNAMES[rng.random_range(0..ALERTNAMES.len())],
                service: SERVICES[rng.random_range(0..SERVICES.len())],
                shard: format!("c{id}g{g}"),
                alerts: (0..INSTANCES).map(|_| (true, now())).collect(),
                delivered: false,
            })
            .collect();
        conns.push(Conn {
            client,
            rng,
            id,
            groups,
            last_delivery: None,
            pastes: Vec::with_capacity(8),
            seq: 0,
        });
    }

    println!(
        "{connections} connections, mixed traffic (58 % reads, 2 % new incidents, 15 % evidence, \
         10 % investigate, 15 % webhooks), warm-up {warmup} s then {seconds} s, client and server \
         in one process; evidence and investigations on {}",
        if rolling {
            "the 40 newest incidents (each incident opened enters, the oldest leaves)"
        } else {
            "the same 40 incidents throughout (--fixed-incidents)"
        }
    );
    let warm = Arc::new(Stats::new());
    let measured = Arc::new(Stats::new());
    let conns = load(conns, &shared, &warm, warmup).await?;
    let rss_start = rss_kib();
    let parts_start = rss_parts();
    let (malloc_start, threads_start) = (malloc_in_use_kib(), status_kib("Threads:"));
    let heaps_start = (rust_heap_kib(), c_heap_kib());
    let started = Instant::now();
    // RSS, heap and stacks, mapped pages and malloc in use every 10 s, for the peak and trend
    // lines that tell a leak (steady climb) from caches filling (a climb that flattens).
    let samples = Arc::new(
        (0..128)
            .map(|_| std::array::from_fn::<AtomicU64, 4, _>(|_| AtomicU64::new(0)))
            .collect::<Vec<_>>(),
    );
    let sampler = {
        let samples = Arc::clone(&samples);
        tokio::spawn(async move {
            let mut i = 0usize;
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let [anon, file, _] = rss_parts();
                let now = [rss_kib(), anon, file, malloc_in_use_kib()];
                for (slot, v) in samples[i].iter().zip(now) {
                    slot.store(v, Ordering::Relaxed);
                }
                i = (i + 1).min(samples.len() - 1);
            }
        })
    };
    let conns = load(conns, &shared, &measured, seconds).await?;
    let elapsed = started.elapsed().as_secs_f64();
    sampler.abort();
    let rss_end = rss_kib();
    let parts_end = rss_parts();
    let (malloc_end, threads_end) = (malloc_in_use_kib(), status_kib("Threads:"));
    let heaps_end = (rust_heap_kib(), c_heap_kib());
    // `SOAK_BENCH_EXIT_AT_END=1`, for a heap profiler (heaptrack): what is alive at the end
    // shows as "leaked" (nothing is dropped); compare a short run with a long one.
    if std::env::var_os("SOAK_BENCH_EXIT_AT_END").is_some() {
        println!("malloc in use {malloc_start} → {malloc_end} KiB; exiting without dropping");
        std::process::exit(0);
    }
    let groups_sent = conns
        .iter()
        .flat_map(|c| &c.groups)
        .filter(|g| g.delivered)
        .count() as i64;
    drop(conns);

    println!(
        "{:<28} {:>8} {:>7} {:>9} {:>9}",
        "route", "count", "errors", "p50 ms", "p99 ms"
    );
    for r in ROUTES {
        let s = measured.of(r);
        println!(
            "{:<28} {:>8} {:>7} {:>9.2} {:>9.2}",
            r.name(),
            s.count.load(Ordering::Relaxed),
            s.errors.load(Ordering::Relaxed),
            s.quantile(0.50),
            s.quantile(0.99)
        );
    }
    let total = measured.count();
    let errors = measured.errors() + warm.errors();
    println!(
        "total {total} requests in {elapsed:.0} s ({:.0} req/s); errors {} measured + {} in warm-up ({} warm-up requests)",
        total as f64 / elapsed,
        measured.errors(),
        warm.errors(),
        warm.count()
    );
    let trend = |k: usize| -> String {
        samples
            .iter()
            .map(|a| a[k].load(Ordering::Relaxed))
            .filter(|v| *v > 0)
            .map(|v| format!("{}", v / 1024))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let peak = samples
        .iter()
        .map(|a| a[0].load(Ordering::Relaxed))
        .max()
        .unwrap_or(0)
        .max(rss_end);
    let growth = (rss_end as f64 - rss_start as f64) / (rss_start.max(1) as f64);
    println!(
        "RSS after warm-up {:.1} MiB, at end {:.1} MiB (peak {:.1} MiB), growth {:+.1} %",
        rss_start as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        peak as f64 / 1024.0,
        growth * 100.0
    );
    println!("RSS every 10 s (MiB): {}", trend(0));
    println!("  heap and stacks (RssAnon): {}", trend(1));
    println!("  mapped pages (RssFile):    {}", trend(2));
    println!("  allocated (Rust + C):      {}", trend(3));
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "  of which heap and stacks (RssAnon) {:.1} → {:.1} MiB ({:+.1} %), mapped database \
         pages (RssFile) {:.1} → {:.1} MiB, WAL index (RssShmem) {:.1} → {:.1} MiB",
        mib(parts_start[0]),
        mib(parts_end[0]),
        (parts_end[0] as f64 - parts_start[0] as f64) / (parts_start[0].max(1) as f64) * 100.0,
        mib(parts_start[1]),
        mib(parts_end[1]),
        mib(parts_start[2]),
        mib(parts_end[2]),
    );
    println!(
        "  allocated and not freed {:.1} → {:.1} MiB (Rust, jemalloc {:.1} → {:.1}; C, glibc \
         {:.1} → {:.1}); threads {threads_start} → {threads_end}",
        mib(malloc_start),
        mib(malloc_end),
        mib(heaps_start.0),
        mib(heaps_end.0),
        mib(heaps_start.1),
        mib(heaps_end.1),
    );

    // What the webhooks made: one alert group and one incident per group sent.
    let alert_groups: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM alert_groups")
        .fetch_one(&pool)
        .await?;
    let incidents: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM incidents")
        .fetch_one(&pool)
        .await?;
    let expected_incidents = (shared.learned.len() + BENCH_INCIDENTS) as i64
        + groups_sent
        + shared.opened.load(Ordering::Relaxed) as i64;
    let evidence: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM evidence")
        .fetch_one(&pool)
        .await?;
    println!(
        "webhooks: {alert_groups} alert groups for {groups_sent} groups sent; {incidents} incidents \
         ({expected_incidents} expected); {evidence} evidence records"
    );

    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(30), worker).await;
    let audit = store::audit::verify(&pool).await?;
    let audit_ok = matches!(audit, store::audit::Verification::Intact { .. });
    let groups_ok = alert_groups == groups_sent && incidents == expected_incidents;
    let errors_ok = errors == 0;
    let rss_ok = growth <= RSS_GROWTH_MAX;
    let mark = |ok: bool| if ok { "PASS" } else { "FAIL" };
    println!("  {} errors {errors} (floor 0)", mark(errors_ok));
    println!(
        "  {} RSS growth {:+.1} % (floor ≤ {:.0} %)",
        mark(rss_ok),
        growth * 100.0,
        RSS_GROWTH_MAX * 100.0
    );
    println!(
        "  {} one incident per alert group ({alert_groups} groups, {groups_sent} sent)",
        mark(groups_ok)
    );
    match &audit {
        store::audit::Verification::Intact { entries } => {
            println!("  PASS audit log intact: {entries} entries");
        }
        store::audit::Verification::Broken { seq, reason } => {
            println!("  FAIL audit log BROKEN at entry {seq}: {reason}");
        }
    }
    println!("{}", mark(errors_ok && rss_ok && groups_ok && audit_ok));
    Ok(())
}
