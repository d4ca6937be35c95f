//! Running it like a service: the real binary started with `serve` on a loopback
//! port and a temporary database, driven over HTTP, signalled, and its stderr read.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_incidentmind");

/// Runs the binary to completion (a CLI subcommand) with a clean environment.
fn run(args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(args)
        .env_remove("INCIDENTMIND_DATABASE_URL")
        .env_remove("RUST_LOG")
        .output()
        .expect("the binary runs")
}

/// Creates user `name` with `role` in `db` and returns its API token.
fn add_user(db: &Path, name: &str, role: &str) -> String {
    let out = run(&[
        "user",
        "add",
        name,
        "--role",
        role,
        "--database-url",
        db.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .expect("token line")
        .trim()
        .to_string()
}

/// `incidentmind serve` running on 127.0.0.1 (a port of its choice), with every stderr line kept.
pub struct Served {
    pub child: tokio::process::Child,
    pub base: String,
    pub addr: std::net::SocketAddr,
    pub stderr: Arc<Mutex<Vec<String>>>,
    pub db: PathBuf,
    pub token: String,
    _dir: Option<tempfile::TempDir>,
    /// The task reading stderr: it ends at end of file, once the process has exited.
    reader: Option<tokio::task::JoinHandle<()>>,
}

impl Served {
    /// Starts `serve` over a fresh database (with a responder `rita`), embeddings off, plus
    /// `extra` flags; returns once it logged its address.
    pub async fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("im.db");
        let mut s = Self::start_on(&db, extra).await;
        s._dir = Some(dir);
        s
    }

    /// Like [`Served::start`] over the database at `db` (created when missing).
    pub async fn start_on(db: &Path, extra: &[&str]) -> Self {
        let token = add_user(db, "rita", "responder");
        let mut child = tokio::process::Command::new(BIN)
            .args([
                "serve",
                "--database-url",
                db.to_str().unwrap(),
                "--bind",
                "127.0.0.1:0",
                "--embeddings",
                "off",
            ])
            .args(extra)
            .env_remove("INCIDENTMIND_DATABASE_URL")
            .env_remove("RUST_LOG")
            .env_remove("INCIDENTMIND_LLM_BASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("serve starts");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let kept = stderr.clone();
        let reader = tokio::spawn(async move {
            let mut tx = Some(tx);
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(i) = line.find("listening on http://") {
                    let rest = &line[i + "listening on http://".len()..];
                    let addr: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                        .collect();
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr);
                    }
                }
                kept.lock().unwrap().push(line);
            }
        });
        let addr = tokio::time::timeout(Duration::from_secs(60), rx)
            .await
            .expect("serve logs its address within 60 s")
            .expect("serve logs its address");
        let addr: std::net::SocketAddr = addr.parse().expect("an address");
        Self {
            child,
            base: format!("http://{addr}"),
            addr,
            stderr,
            db: db.to_path_buf(),
            token,
            _dir: None,
            reader: Some(reader),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Sends `signal` (`TERM`, `INT`) to the server with the `kill` command.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("running").to_string();
        let ok = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill runs");
        assert!(ok.success());
    }

    /// Waits up to `limit` for the process to exit and returns its status; by then every line
    /// it wrote to stderr has been read (the reader reached the end of the pipe).
    pub async fn exit_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let status = tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the server did not exit within {limit:?}"))
            .expect("wait");
        if let Some(reader) = self.reader.take() {
            tokio::time::timeout(Duration::from_secs(10), reader)
                .await
                .expect("stderr reaches its end within 10 s of the exit")
                .expect("the stderr reader");
        }
        status
    }

    /// Every stderr line so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Opens an incident as `rita` and returns its id.
    pub async fn open_incident(&self, client: &reqwest::Client) -> String {
        let res = client
            .post(self.url("/api/v1/incidents"))
            .bearer_auth(&self.token)
            .json(&json!({"title": "Checkout 503s", "service": "payments-api",
                          "severity": "SEV2", "description": "customers see errors"}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        res.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

/// A large evidence paste (JSON body) of `lines` log lines.
fn evidence_body(lines: usize) -> Vec<u8> {
    let mut log = String::new();
    for i in 0..lines {
        log.push_str(&format!(
            "2026-12-01T10:{:02}:{:02}Z ERROR payments-api upstream connect error to db-{} after 3000 ms\n",
            (i / 60) % 60,
            i % 60,
            i % 7
        ));
    }
    serde_json::to_vec(&json!({"kind": "logs", "content": log, "source": "pod logs"})).unwrap()
}

/// Starts a raw HTTP/1.1 evidence upload and sends only the first half of its body: a request
/// the server has accepted and is still reading.
async fn half_sent_upload(
    s: &Served,
    incident: &str,
    body: &[u8],
) -> (tokio::net::TcpStream, usize) {
    let mut conn = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    let head = format!(
        "POST /api/v1/incidents/{incident}/evidence HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        s.addr,
        s.token,
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let half = body.len() / 2;
    conn.write_all(&body[..half]).await.unwrap();
    conn.flush().await.unwrap();
    (conn, half)
}

#[tokio::test]
async fn sigterm_lets_the_request_in_flight_finish_refuses_new_connections_and_exits_0() {
    let mut s = Served::start(&["--shutdown-grace-secs", "15"]).await;
    let client = reqwest::Client::new();
    let incident = s.open_incident(&client).await;
    let body = evidence_body(2000);
    let (mut conn, half) = half_sent_upload(&s, &incident, &body).await;
    // Let the server read the head, so the request is in flight.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let signalled = Instant::now();
    s.signal("TERM");
    // No new connections once the signal is handled: wait for the listener to close.
    let refused = tokio::time::timeout(Duration::from_secs(5), async {
        while tokio::net::TcpStream::connect(s.addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        refused.is_ok(),
        "a new connection after SIGTERM must be refused"
    );
    // The slow client finishes its upload; the request completes.
    conn.write_all(&body[half..]).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), conn.read_to_end(&mut response))
        .await
        .expect("the response arrives")
        .unwrap();
    let response = String::from_utf8_lossy(&response);
    let status_line = response.lines().next().unwrap_or_default().to_string();
    assert_eq!(status_line, "HTTP/1.1 201 Created", "{response}");
    assert!(response.contains("\"lines\":2000"), "{response}");
    let status = s.exit_within(Duration::from_secs(15)).await;
    assert!(status.success(), "exit status {status:?}");
    assert!(signalled.elapsed() < Duration::from_secs(15));
    let log = s.stderr_lines().join("\n");
    assert!(log.contains("shutting down"), "{log}");
    assert!(log.contains("shut down"), "{log}");
    // The evidence is stored: the request was not cut.
    let pool = incidentmind::store::open(
        s.db.to_str().unwrap(),
        incidentmind::store::OpenMode::MustExist,
    )
    .await
    .unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM evidence")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn ctrl_c_with_a_request_that_never_finishes_exits_when_the_grace_period_is_over() {
    let mut s = Served::start(&["--shutdown-grace-secs", "1"]).await;
    let client = reqwest::Client::new();
    let incident = s.open_incident(&client).await;
    let body = evidence_body(200);
    let (_conn, _) = half_sent_upload(&s, &incident, &body).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let signalled = Instant::now();
    s.signal("INT");
    let status = s.exit_within(Duration::from_secs(10)).await;
    let took = signalled.elapsed();
    assert!(status.success(), "exit status {status:?}");
    assert!(
        took >= Duration::from_millis(900),
        "waited for the grace period: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    let log = s.stderr_lines().join("\n");
    assert!(log.contains("grace period over"), "{log}");
}

#[tokio::test]
async fn json_logs_are_one_object_per_line_with_the_request_span_and_no_secrets() {
    const PASSWORD: &str = "Jt3Kb1I3lES2xB";
    const BEARER: &str = "eUNC5uaCQR3ARhoOOw8VWXlaxb4H";
    let mut s = Served::start(&["--log-format", "json"]).await;
    let client = reqwest::Client::new();
    let incident = s.open_incident(&client).await;
    // A paste carrying secrets (from the redaction corpus).
    let content = format!(
        "2026-12-01T10:00:00Z ERROR payments-api jdbc:mysql://db:3306/app?user=app&password={PASSWORD} refused\n\
         2026-12-01T10:00:01Z WARN payments-api retrying with Authorization: Bearer {BEARER}\n"
    );
    let res = client
        .post(s.url(&format!("/api/v1/incidents/{incident}/evidence")))
        .bearer_auth(&s.token)
        .json(&json!({"kind": "logs", "content": content, "source": "pod logs"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    // A request presenting a secret as its credentials (refused).
    let res = client
        .get(s.url("/api/v1/me"))
        .header("authorization", format!("Bearer {BEARER}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let res = client.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    s.signal("TERM");
    assert!(s.exit_within(Duration::from_secs(20)).await.success());

    let lines = s.stderr_lines();
    assert!(lines.len() >= 5, "{lines:?}");
    let mut evidence_line = None;
    for line in &lines {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line:?}"));
        assert!(
            v["level"].is_string() && v["timestamp"].is_string(),
            "{line}"
        );
        assert!(!line.contains('\u{1b}'), "ANSI code in {line:?}");
        for secret in [PASSWORD, BEARER, s.token.as_str()] {
            assert!(!line.contains(secret), "a secret in the log: {line}");
        }
        if v["span"]["http.route"] == "/api/v1/incidents/{id}/evidence" {
            evidence_line = Some(v);
        }
    }
    let v = evidence_line.expect("a log line inside the evidence request's span");
    assert_eq!(v["span"]["name"], "request");
    assert_eq!(v["span"]["http.method"], "POST");
    assert_eq!(v["span"]["incident.id"], incident.as_str());
    let request_id = v["span"]["request.id"].as_str().unwrap();
    assert!(uuid::Uuid::parse_str(request_id).is_ok(), "{request_id}");
    assert_eq!(v["fields"]["status"], 201);
    let printed = lines.join("\n");
    assert!(printed.contains("\"http.route\":\"/healthz\""), "{printed}");
}

/// The value of the sample `series` (name and labels exactly as rendered) in a scrape.
fn sample_value(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn metrics_after_a_scripted_workflow_report_every_family_with_exact_counts() {
    use crate::helpers::{CapturingModel, spawn_app_full, spawn_app_with};
    use incidentmind::analyst::llm::{LlmAnalyst, LlmConfig};
    // Without a token /metrics is not served at all.
    let closed = spawn_app_with(Default::default()).await;
    let res = closed
        .client
        .get(closed.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);

    const SCRAPE: &str = "scrape-secret-123";
    let model = CapturingModel::start("this is not JSON").await;
    let llm = LlmAnalyst::new(LlmConfig {
        base_url: model.base.clone(),
        model: "stub-model".into(),
        api_key: String::new(),
        timeout: Duration::from_secs(5),
        token_budget: 4000,
        context_tokens: None,
    })
    .unwrap();
    let settings = incidentmind::Settings {
        metrics_token_sha256: Some(incidentmind::digest::sha256_hex(SCRAPE.as_bytes())),
        ..Default::default()
    };
    let app = spawn_app_full(settings, Some(Arc::new(llm))).await;
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "source": "pod logs",
                   "content": "2026-12-01T10:00:00Z ERROR payments-api connection pool exhausted\n"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/investigate"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let res = app
        .get(&app.responder, "/api/v1/recall?q=connection%20pool&k=5")
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    // Webhooks: one opens an incident, its repeat changes nothing, a wrong secret is refused.
    let res = app
        .post_json(
            &app.admin,
            "/api/v1/integrations",
            json!({"name": "prod", "source": "alertmanager"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let secret = res.json::<Value>().await.unwrap()["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/alerts/alertmanager_v4_firing.captured.json"
    ))
    .unwrap();
    for (token, expected) in [
        (secret.as_str(), StatusCode::ACCEPTED),
        (secret.as_str(), StatusCode::ACCEPTED),
        ("whk_wrong", StatusCode::UNAUTHORIZED),
    ] {
        let res = app
            .client
            .post(app.url("/api/v1/webhooks/alertmanager"))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), expected);
    }

    // The scrape needs the token.
    let res = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let res = app.get("wrong", "/metrics").await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let res = app.get(SCRAPE, "/metrics").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let scrape = res.text().await.unwrap();
    println!("{scrape}");
    let value = |series: &str| {
        sample_value(&scrape, series).unwrap_or_else(|| panic!("no {series} in\n{scrape}"))
    };
    for family in [
        "incidentmind_http_requests_total",
        "incidentmind_http_request_duration_seconds",
        "incidentmind_webhook_deliveries_total",
        "incidentmind_recall_duration_seconds",
        "incidentmind_recall_results",
        "incidentmind_model_calls_total",
        "incidentmind_model_fallbacks_total",
        "incidentmind_incidents_open",
        "incidentmind_memory_records",
        "incidentmind_audit_log_entries",
        "incidentmind_embedding_backlog",
    ] {
        assert!(
            scrape.contains(&format!("# TYPE {family} ")),
            "{family} missing:\n{scrape}"
        );
    }
    // The shipped dashboard and alert rules query only families this scrape has.
    let names = regex::Regex::new(r"incidentmind_[a-z_]+").unwrap();
    for example in ["grafana-dashboard.json", "compose/alert-rules.yml"] {
        let text =
            std::fs::read_to_string(format!("{}/examples/{example}", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        for name in names.find_iter(&text).map(|m| m.as_str()) {
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            assert!(
                scrape.contains(&format!("# TYPE {family} ")),
                "examples/{example} names {name}, which /metrics does not serve"
            );
        }
    }
    assert_eq!(
        value(
            r#"incidentmind_http_requests_total{method="POST",route="/api/v1/incidents",status="201"}"#
        ),
        1.0
    );
    assert_eq!(
        value(r#"incidentmind_http_requests_total{method="GET",route="/metrics",status="401"}"#),
        2.0
    );
    assert_eq!(
        value(
            r#"incidentmind_http_request_duration_seconds_count{method="POST",route="/api/v1/incidents/{id}/evidence",status="201"}"#
        ),
        1.0
    );
    for (outcome, n) in [("opened", 1.0), ("duplicate", 1.0), ("rejected", 1.0)] {
        assert_eq!(
            value(&format!(
                r#"incidentmind_webhook_deliveries_total{{source="alertmanager",outcome="{outcome}"}}"#
            )),
            n
        );
    }
    assert_eq!(
        value(r#"incidentmind_recall_duration_seconds_count{origin="search"}"#),
        1.0
    );
    assert_eq!(
        value(r#"incidentmind_recall_results_count{origin="investigation"}"#),
        1.0
    );
    assert_eq!(
        value(r#"incidentmind_model_calls_total{operation="investigate",outcome="fallback"}"#),
        1.0
    );
    assert_eq!(
        value(
            r#"incidentmind_model_fallbacks_total{operation="investigate",reason="invalid_output"}"#
        ),
        1.0
    );
    assert_eq!(
        value(r#"incidentmind_incidents_open{state="investigating",severity="SEV2"}"#),
        1.0
    );
    assert_eq!(
        value(r#"incidentmind_incidents_open{state="confirmed",severity="SEV1"}"#),
        0.0
    );
    assert!(value(r#"incidentmind_memory_records{kind="observation"}"#) >= 1.0);
    assert_eq!(
        value("incidentmind_audit_log_entries"),
        app.count("audit_log").await as f64
    );
    assert_eq!(value("incidentmind_embedding_backlog"), 0.0);
}

/// The address `serve` logged for `--metrics-listen` (`serving /metrics on http://ADDR`).
fn metrics_address(served: &Served) -> String {
    let lines = served.stderr_lines();
    let line = lines
        .iter()
        .find_map(|l| l.split("serving /metrics on http://").nth(1))
        .unwrap_or_else(|| panic!("no metrics address logged: {lines:?}"));
    line.chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn metrics_listen_serves_metrics_on_a_separate_address_without_a_token_and_nothing_else() {
    let client = reqwest::Client::new();
    // --metrics-listen alone: /metrics on its own address, not on --bind.
    let mut served = Served::start(&["--metrics-listen", "127.0.0.1:0"]).await;
    let metrics = format!("http://{}", metrics_address(&served));
    assert_ne!(metrics, served.base);
    served.open_incident(&client).await;
    let res = client
        .get(format!("{metrics}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        res.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let scrape = res.text().await.unwrap();
    assert_eq!(
        sample_value(
            &scrape,
            r#"incidentmind_http_requests_total{method="POST",route="/api/v1/incidents",status="201"}"#
        ),
        Some(1.0),
        "{scrape}"
    );
    assert_eq!(
        sample_value(
            &scrape,
            r#"incidentmind_incidents_open{state="investigating",severity="SEV2"}"#
        ),
        Some(1.0)
    );
    let res = client.get(served.url("/metrics")).send().await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::NOT_FOUND,
        "no token: not on --bind"
    );
    for path in ["/api/v1/me", "/healthz", "/incidents"] {
        let res = client
            .get(format!("{metrics}{path}"))
            .bearer_auth(&served.token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
    }
    // It stops with the app on SIGTERM.
    served.signal("TERM");
    assert!(served.exit_within(Duration::from_secs(10)).await.success());
    assert!(
        client
            .get(format!("{metrics}/metrics"))
            .send()
            .await
            .is_err(),
        "the metrics address is closed after shutdown"
    );

    // With --metrics-token as well: the token guards /metrics on --bind only.
    let served = Served::start(&[
        "--metrics-listen",
        "127.0.0.1:0",
        "--metrics-token",
        "scrape-secret",
    ])
    .await;
    let metrics = format!("http://{}", metrics_address(&served));
    let status = |res: reqwest::Response| res.status();
    assert_eq!(
        status(
            client
                .get(format!("{metrics}/metrics"))
                .send()
                .await
                .unwrap()
        ),
        StatusCode::OK
    );
    assert_eq!(
        status(client.get(served.url("/metrics")).send().await.unwrap()),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(
            client
                .get(served.url("/metrics"))
                .bearer_auth("scrape-secret")
                .send()
                .await
                .unwrap()
        ),
        StatusCode::OK
    );

    // A taken address fails the start with a message naming the option.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("im.db");
    let out = run(&[
        "serve",
        "--database-url",
        db.to_str().unwrap(),
        "--bind",
        "127.0.0.1:0",
        "--embeddings",
        "off",
        "--metrics-listen",
        &addr,
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on --metrics-listen {addr}")),
        "{stderr}"
    );
}

/// `n` symptom records written with the store's bulk insert, plus one audit entry, in one
/// transaction.
async fn bulk_records(pool: &sqlx::AnyPool, from: usize, n: usize) {
    use incidentmind::domain::MemoryKind;
    use incidentmind::domain::memory::NewRecord;
    let at = jiff::Timestamp::now();
    let rows: Vec<(NewRecord, jiff::Timestamp)> = (from..from + n)
        .map(|i| {
            let mut r = NewRecord::new(
                MemoryKind::Symptom,
                format!("checkout latency reading {i} on payments-api"),
                "victor",
            );
            r.services = vec!["payments-api".into()];
            (r, at)
        })
        .collect();
    let mut tx = incidentmind::store::begin_write(pool).await.unwrap();
    incidentmind::store::memory::insert_bulk(&mut tx, &rows)
        .await
        .unwrap();
    incidentmind::store::audit::append(&mut tx, "test", "bulk_insert", "records", &n.to_string())
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

async fn cli(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(BIN)
        .args(args)
        .env_remove("INCIDENTMIND_DATABASE_URL")
        .env_remove("RUST_LOG")
        .output()
        .await
        .expect("the binary runs")
}

async fn counts(path: &Path) -> (i64, i64) {
    let pool = incidentmind::store::open(
        path.to_str().unwrap(),
        incidentmind::store::OpenMode::MustExist,
    )
    .await
    .unwrap();
    let records: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM records")
        .fetch_one(&pool)
        .await
        .unwrap();
    let audit: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_log")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        incidentmind::store::audit::verify(&pool).await.unwrap(),
        incidentmind::store::audit::Verification::Intact { entries: audit }
    );
    pool.close().await;
    (records, audit)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn a_backup_taken_while_a_writer_runs_passes_its_checks_and_restores_with_equal_counts() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.db");
    let copy = dir.path().join("backup.db");
    let fresh = dir.path().join("restored").join("im.db");
    std::fs::create_dir(fresh.parent().unwrap()).unwrap();
    let pool = incidentmind::store::open(
        live.to_str().unwrap(),
        incidentmind::store::OpenMode::CreateIfMissing,
    )
    .await
    .unwrap();
    bulk_records(&pool, 0, 10_000).await;

    // A writer that keeps adding records and audit entries during the backup.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let batches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = tokio::spawn({
        let (pool, stop, batches) = (pool.clone(), stop.clone(), batches.clone());
        async move {
            let mut next = 10_000;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                bulk_records(&pool, next, 20).await;
                next += 20;
                batches.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    while batches.load(std::sync::atomic::Ordering::SeqCst) < 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = batches.load(std::sync::atomic::Ordering::SeqCst);
    let out = cli(&[
        "backup",
        copy.to_str().unwrap(),
        "--database-url",
        live.to_str().unwrap(),
    ])
    .await;
    let during = batches.load(std::sync::atomic::Ordering::SeqCst) - before;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.await.unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("integrity ok, audit log intact"), "{said}");
    assert!(during > 0, "the writer went on during the backup");

    // The copy is one consistent snapshot: its audit chain verifies, and every batch in it is
    // whole (records come in twenties after the first 10,000, each with its audit entry).
    let (records, audit) = counts(&copy).await;
    assert!(records >= 10_000 + 3 * 20, "{records}");
    assert_eq!((records - 10_000) % 20, 0, "{records}");
    assert_eq!(audit, 1 + (records - 10_000) / 20);
    assert!(
        said.contains(&format!("{records} memory records")),
        "{said}"
    );

    // Backups are never overwritten.
    let again = cli(&[
        "backup",
        copy.to_str().unwrap(),
        "--database-url",
        live.to_str().unwrap(),
    ])
    .await;
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));

    // Restore into a fresh path: the same counts.
    let out = cli(&[
        "restore",
        copy.to_str().unwrap(),
        "--database-url",
        fresh.to_str().unwrap(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(counts(&fresh).await, (records, audit));

    // A database that holds anything is not overwritten without --force.
    let live_counts = counts(&live).await;
    let refused = cli(&[
        "restore",
        copy.to_str().unwrap(),
        "--database-url",
        live.to_str().unwrap(),
    ])
    .await;
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("is not empty") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(counts(&live).await, live_counts);
    // With --force (the server stopped: the test's pool closed) it is replaced.
    pool.close().await;
    let forced = cli(&[
        "restore",
        copy.to_str().unwrap(),
        "--force",
        "--database-url",
        live.to_str().unwrap(),
    ])
    .await;
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    assert_eq!(counts(&live).await, (records, audit));
}

fn limited(
    f: impl FnOnce(&mut incidentmind::web::limits::RateLimitSettings),
) -> incidentmind::Settings {
    let mut rate_limits = incidentmind::web::limits::RateLimitSettings {
        signin_per_account: 0,
        signin_per_address: 0,
        webhook_per_integration: 0,
        api_per_token: 0,
        trusted_proxies: Vec::new(),
    };
    f(&mut rate_limits);
    incidentmind::Settings {
        rate_limits,
        ..Default::default()
    }
}

async fn sign_in(
    app: &crate::helpers::TestApp,
    name: &str,
    password: &str,
    forwarded_for: Option<&str>,
) -> reqwest::Response {
    let mut req = app
        .client
        .post(app.url("/signin"))
        .header("origin", &app.base)
        .form(&[
            ("name", name),
            ("password", password),
            ("next", "/incidents"),
        ]);
    if let Some(xff) = forwarded_for {
        req = req.header("x-forwarded-for", xff);
    }
    req.send().await.unwrap()
}

/// The `Retry-After` of a 429, in seconds.
fn retry_after(res: &reqwest::Response) -> u64 {
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn sign_in_attempts_are_limited_per_account_with_a_429_and_retry_after() {
    let app = crate::helpers::spawn_app_with(limited(|l| l.signin_per_account = 2)).await;
    for _ in 0..2 {
        let res = sign_in(&app, "rita", "wrong password", None).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    // The third attempt for the account is refused, even with the right password (and the
    // name in other case).
    let res = sign_in(&app, "RITA", crate::helpers::PASSWORD, None).await;
    let secs = retry_after(&res);
    assert!((1..=30).contains(&secs), "{secs}");
    let page = res.text().await.unwrap();
    assert!(page.contains("Too many sign-in attempts"), "{page}");
    // Another account is not affected.
    let res = sign_in(&app, "victor", crate::helpers::PASSWORD, None).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn sign_in_attempts_are_limited_per_client_address_and_forwarded_for_counts_only_from_a_trusted_proxy()
 {
    // Not behind a trusted proxy: X-Forwarded-For is ignored, the peer (127.0.0.1) is counted.
    let app = crate::helpers::spawn_app_with(limited(|l| l.signin_per_address = 2)).await;
    for (i, name) in ["rita", "victor"].into_iter().enumerate() {
        let xff = format!("203.0.113.{i}");
        let res = sign_in(&app, name, "wrong password", Some(&xff)).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    let res = sign_in(&app, "ada", crate::helpers::PASSWORD, Some("203.0.113.9")).await;
    assert!(retry_after(&res) >= 1);

    // Behind a trusted proxy (the loopback peer): each forwarded client has its own budget.
    let app = crate::helpers::spawn_app_with(limited(|l| {
        l.signin_per_address = 2;
        l.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    }))
    .await;
    for name in ["rita", "victor"] {
        let res = sign_in(&app, name, "wrong password", Some("203.0.113.7")).await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    // A spoofed left-most entry does not help: the right-most untrusted address is the client.
    let res = sign_in(
        &app,
        "ada",
        "wrong password",
        Some("198.51.100.1, 203.0.113.7"),
    )
    .await;
    assert!(retry_after(&res) >= 1);
    let res = sign_in(&app, "ada", crate::helpers::PASSWORD, Some("203.0.113.8")).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn webhook_deliveries_are_limited_per_integration() {
    let app = crate::helpers::spawn_app_with(limited(|l| l.webhook_per_integration = 2)).await;
    let mut secrets = Vec::new();
    for name in ["prod", "staging"] {
        let res = app
            .post_json(
                &app.admin,
                "/api/v1/integrations",
                json!({"name": name, "source": "alertmanager"}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
        secrets.push(
            res.json::<Value>().await.unwrap()["secret"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/alerts/alertmanager_v4_firing.captured.json"
    ))
    .unwrap();
    let deliver = |secret: String| {
        let req = app
            .client
            .post(app.url("/api/v1/webhooks/alertmanager"))
            .bearer_auth(secret)
            .header("content-type", "application/json")
            .body(body.clone());
        async move { req.send().await.unwrap() }
    };
    for _ in 0..2 {
        assert_eq!(
            deliver(secrets[0].clone()).await.status(),
            StatusCode::ACCEPTED
        );
    }
    // A 503 with Retry-After, which Alertmanager retries (it drops a group answered 429).
    let res = deliver(secrets[0].clone()).await;
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let wait: u64 = res
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a Retry-After in seconds");
    assert!(wait >= 1);
    let (status, code, message) = crate::helpers::error_of(res).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(code, "busy");
    assert!(
        message.contains("deliveries for this integration"),
        "{message}"
    );
    assert_eq!(
        deliver(secrets[1].clone()).await.status(),
        StatusCode::ACCEPTED
    );
}

#[tokio::test]
async fn api_requests_are_limited_per_token() {
    let app = crate::helpers::spawn_app_with(limited(|l| l.api_per_token = 3)).await;
    for _ in 0..3 {
        assert_eq!(
            app.get(&app.responder, "/api/v1/me").await.status(),
            StatusCode::OK
        );
    }
    let res = app.get(&app.responder, "/api/v1/me").await;
    assert!(retry_after(&res) >= 1);
    let (_, code, _) = crate::helpers::error_of(res).await;
    assert_eq!(code, "rate_limited");
    // Another token (another user) has its own budget; an unknown token is a 401, not a 429.
    assert_eq!(
        app.get(&app.reviewer, "/api/v1/me").await.status(),
        StatusCode::OK
    );
    assert_eq!(
        app.get("im_unknown", "/api/v1/me").await.status(),
        StatusCode::UNAUTHORIZED
    );
}
