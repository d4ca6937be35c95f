//! Test harness: a fresh SQLite file per test, the real router served on 127.0.0.1, and users of
//! each role with API tokens and passwords.

use incidentmind::Settings;
use incidentmind::app::{App, Config};
use incidentmind::services::users::add_user;
use reqwest::{Client, Response, StatusCode};
use serde_json::{Value, json};
use sqlx::AnyPool;

/// Password of every test user.
pub const PASSWORD: &str = "correct horse battery";

pub struct TestApp {
    pub base: String,
    pub pool: AnyPool,
    /// The app's database handle (same pool; its change hub is the one the app's pages and
    /// live streams follow).
    pub db: incidentmind::store::Db,
    /// The app's memory (same pool, same caches and embedder as its handlers).
    pub memory: incidentmind::memory::Memory,
    /// The app's count of write requests in flight (what its chat worker yields to).
    pub foreground: std::sync::Arc<incidentmind::load::Foreground>,
    pub responder: String,
    pub reviewer: String,
    pub admin: String,
    pub client: Client,
    /// The database URL the app was built with (a SQLite path, or a PostgreSQL URL when the
    /// suite runs on PostgreSQL).
    pub database_url: String,
    _dir: tempfile::TempDir,
    /// Drops the PostgreSQL database this app was given when the test ends (the suite creates
    /// one per test: ~13 MB each, several GB over a run on a CI disk).
    _pg_database: Option<DropDatabaseAtEnd>,
}

/// Drops a test database on the PostgreSQL `server` when dropped (`WITH (FORCE)`: the app's
/// own pool may still hold connections). Runs on its own thread and runtime, since it is dropped
/// inside the test's runtime; failures are ignored (the cluster is thrown away after the run).
pub struct DropDatabaseAtEnd {
    server: String,
    name: String,
}

impl Drop for DropDatabaseAtEnd {
    fn drop(&mut self) {
        let server = self.server.clone();
        let name = self.name.clone();
        let dropper = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                use sqlx::Connection as _;
                if let Ok(mut admin) = sqlx::AnyConnection::connect(&server).await {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
                        .execute(&mut admin)
                        .await;
                    let _ = admin.close().await;
                }
            });
        });
        let _ = dropper.join();
    }
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(Settings::default()).await
}

pub async fn spawn_app_with(settings: Settings) -> TestApp {
    spawn_app_full(settings, None).await
}

pub async fn spawn_app_full(
    settings: Settings,
    llm: Option<std::sync::Arc<dyn incidentmind::analyst::Analyst>>,
) -> TestApp {
    spawn_app_inner(settings, llm, None, None).await
}

/// A test app on an existing `database_url` (e.g. one from [`fresh_postgres_database`]).
pub async fn spawn_app_at(database_url: &str) -> TestApp {
    spawn_app_inner(
        Settings::default(),
        None,
        None,
        Some(database_url.to_string()),
    )
    .await
}

/// Another app instance on `database_url`, built and served as `serve` does (own pool, memory,
/// router and loopback port) and sharing nothing else with the first: its base URL.
pub async fn serve_instance(database_url: &str) -> String {
    let built = App::build(Config::new(database_url))
        .await
        .expect("second instance");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = built
        .router
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    format!("http://{addr}")
}

/// A test app whose memory compares the vectors of `embedder`.
pub async fn spawn_app_with_embedder(
    embedder: std::sync::Arc<dyn incidentmind::memory::Embedder>,
) -> TestApp {
    spawn_app_inner(Settings::default(), None, Some(embedder), None).await
}

/// A test app with both a model analyst and an embedder (e.g. both pointed at a
/// [`CapturingModel`]).
pub async fn spawn_app_with_models(
    llm: std::sync::Arc<dyn incidentmind::analyst::Analyst>,
    embedder: std::sync::Arc<dyn incidentmind::memory::Embedder>,
) -> TestApp {
    spawn_app_inner(Settings::default(), Some(llm), Some(embedder), None).await
}

/// A loopback stand-in for an OpenAI-compatible server (`/v1/chat/completions` and
/// `/v1/embeddings`) that keeps every request body it was sent. Chat calls are answered with
/// `reply` (a post-mortem prompt too: it then fails validation and the built-in draft is used).
#[derive(Clone)]
pub struct CapturingModel {
    /// Base URL including `/v1`.
    pub base: String,
    /// Every request body, in arrival order.
    pub bodies: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl CapturingModel {
    pub async fn start(reply: &'static str) -> Self {
        use axum::Json;
        use axum::extract::State;
        type Seen = (std::sync::Arc<std::sync::Mutex<Vec<Value>>>, &'static str);
        async fn chat(State((seen, reply)): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
            seen.lock().unwrap().push(body);
            Json(
                serde_json::json!({"choices": [{"index": 0, "message": {"role": "assistant",
                "content": reply}, "finish_reason": "stop"}]}),
            )
        }
        async fn embed(State((seen, _)): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
            let n = match &body["input"] {
                Value::Array(a) => a.len(),
                _ => 1,
            };
            seen.lock().unwrap().push(body.clone());
            let data: Vec<Value> = (0..n)
                .map(|i| {
                    serde_json::json!({"object": "embedding", "index": i,
                    "embedding": [1.0, (i % 7) as f32, 0.5]})
                })
                .collect();
            Json(serde_json::json!({"object": "list", "data": data, "model": body["model"]}))
        }
        let bodies: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = Default::default();
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(chat))
            .route("/v1/embeddings", axum::routing::post(embed))
            .with_state((bodies.clone(), reply));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        CapturingModel {
            base: format!("http://{addr}/v1"),
            bodies,
        }
    }

    /// Every captured body as one JSON text each.
    pub fn texts(&self) -> Vec<String> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .map(|b| b.to_string())
            .collect()
    }
}

/// Drops the trigger that keeps `audit_log` append-only, as someone with database access could:
/// for tests that show `audit verify` catching an edited row.
pub async fn drop_audit_update_guard(pool: &AnyPool) {
    use incidentmind::store::Backend;
    let sql = Backend::of(pool).sql(
        "DROP TRIGGER audit_log_no_update",
        "DROP TRIGGER audit_log_no_update ON audit_log",
    );
    sqlx::query(sql)
        .execute(pool)
        .await
        .expect("drop the trigger");
}

/// Every row of every table (FTS shadow tables included) as text, one string per row.
pub async fn dump_all_tables(pool: &AnyPool) -> Vec<(String, String)> {
    use sqlx::{Column, Row, ValueRef};
    if incidentmind::store::Backend::of(pool) == incidentmind::store::Backend::Postgres {
        // Each row cast to its text form: every column, whatever its type.
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations' ORDER BY 1",
        )
        .fetch_all(pool)
        .await
        .expect("tables");
        let mut out = Vec::new();
        for t in tables {
            let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT CAST(t AS text) FROM \"{t}\" t"
            )))
            .fetch_all(pool)
            .await
            .expect("select rows");
            out.extend(rows.into_iter().map(|r| (t.clone(), r)));
        }
        return out;
    }
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name <> '_sqlx_migrations' \
             ORDER BY name",
    )
    .fetch_all(pool)
    .await
    .expect("tables");
    let mut out = Vec::new();
    for t in tables {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT * FROM \"{t}\"")))
            .fetch_all(pool)
            .await
            .expect("select *");
        for row in rows {
            let mut text = String::new();
            for (i, col) in row.columns().iter().enumerate() {
                let raw = row.try_get_raw(i).expect("raw");
                if raw.is_null() {
                    continue;
                }
                let v = if let Ok(s) = row.try_get::<String, _>(i) {
                    s
                } else if let Ok(b) = row.try_get::<Vec<u8>, _>(i) {
                    String::from_utf8_lossy(&b).into_owned()
                } else if let Ok(n) = row.try_get::<i64, _>(i) {
                    n.to_string()
                } else if let Ok(f) = row.try_get::<f64, _>(i) {
                    f.to_string()
                } else {
                    String::new()
                };
                text.push_str(col.name());
                text.push('=');
                text.push_str(&v);
                text.push('\n');
            }
            out.push((t.clone(), text));
        }
    }
    out
}

/// A test app served on `listener` (bound first, so a peer configured with the app's address,
/// such as an OpenID provider holding its redirect URL, can be started before the app).
pub async fn spawn_app_on(listener: tokio::net::TcpListener, settings: Settings) -> TestApp {
    spawn_app_listening(settings, None, None, None, Some(listener)).await
}

async fn spawn_app_inner(
    settings: Settings,
    llm: Option<std::sync::Arc<dyn incidentmind::analyst::Analyst>>,
    embedder: Option<std::sync::Arc<dyn incidentmind::memory::Embedder>>,
    database_url: Option<String>,
) -> TestApp {
    spawn_app_listening(settings, llm, embedder, database_url, None).await
}

async fn spawn_app_listening(
    settings: Settings,
    llm: Option<std::sync::Arc<dyn incidentmind::analyst::Analyst>>,
    embedder: Option<std::sync::Arc<dyn incidentmind::memory::Embedder>>,
    database_url: Option<String>,
    listener: Option<tokio::net::TcpListener>,
) -> TestApp {
    if std::env::var_os("INCIDENTMIND_TEST_LOG").is_some() {
        // The app's own log (errors behind a 500) in the test output.
        let _ = tracing_subscriber::fmt()
            .with_env_filter("incidentmind=warn")
            .with_test_writer()
            .try_init();
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db_path = dir.path().join("test.db");
    let mut pg_database = None;
    let database_url = match (database_url, suite_on_postgres()) {
        (Some(url), _) => url,
        (None, Some(server)) => {
            let url = fresh_postgres_database(&server).await;
            let name = url::Url::parse(&url)
                .expect("database URL")
                .path()
                .trim_start_matches('/')
                .to_string();
            pg_database = Some(DropDatabaseAtEnd { server, name });
            url
        }
        (None, None) => db_path.to_str().expect("utf-8 path").to_string(),
    };
    // The app as `serve` builds it (database and migrations, memory, model, router).
    let built = App::build(Config {
        database_url: database_url.clone(),
        settings,
        embedder,
        llm,
    })
    .await
    .expect("app");
    let pool = built.state.pool.pool().clone();
    let db = built.state.pool.clone();
    let memory = built.state.memory.clone();
    let foreground = std::sync::Arc::clone(&built.state.foreground);
    let responder = add_user(&pool, "rita", "responder", Some(PASSWORD))
        .await
        .expect("user");
    let reviewer = add_user(&pool, "victor", "reviewer", Some(PASSWORD))
        .await
        .expect("user");
    let admin = add_user(&pool, "ada", "admin", Some(PASSWORD))
        .await
        .expect("user");
    let listener = match listener {
        Some(l) => l,
        None => tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind"),
    };
    let addr = listener.local_addr().expect("addr");
    // With peer addresses, as `serve` runs it (rate limits per client address).
    let app = built
        .router
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    TestApp {
        base: format!("http://{addr}"),
        pool,
        db,
        memory,
        foreground,
        responder,
        reviewer,
        admin,
        client: Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client"),
        database_url,
        _dir: dir,
        _pg_database: pg_database,
    }
}

/// The PostgreSQL server the PostgreSQL tests use (`INCIDENTMIND_TEST_DATABASE_URL`, e.g.
/// `postgres://postgres@127.0.0.1:55432/postgres`, as `scripts/pg-test-cluster start` prints).
/// Without it, under `CI=true`, panics (CI must run them); otherwise prints SKIPPED and gives
/// `None`.
pub fn postgres_server(test: &str) -> Option<String> {
    match std::env::var("INCIDENTMIND_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            crate::skip::skip(
                test,
                "no PostgreSQL (set INCIDENTMIND_TEST_DATABASE_URL; scripts/pg-test-cluster \
                 start prints one)",
                crate::skip::Required::InCi(None),
            );
            None
        }
    }
}

/// `Some(server)` when the whole suite runs on PostgreSQL: `INCIDENTMIND_TEST_BACKEND=postgres`
/// (with `INCIDENTMIND_TEST_DATABASE_URL` naming the server, else a panic).
pub fn suite_on_postgres() -> Option<String> {
    if std::env::var("INCIDENTMIND_TEST_BACKEND").as_deref() != Ok("postgres") {
        return None;
    }
    Some(
        std::env::var("INCIDENTMIND_TEST_DATABASE_URL")
            .expect("INCIDENTMIND_TEST_BACKEND=postgres needs INCIDENTMIND_TEST_DATABASE_URL"),
    )
}

/// Creates an empty database with a unique name on the PostgreSQL `server` and gives its URL.
pub async fn fresh_postgres_database(server: &str) -> String {
    use sqlx::Connection as _;
    sqlx::any::install_default_drivers();
    let name = format!("im_test_{}", uuid::Uuid::now_v7().simple());
    let mut admin = sqlx::AnyConnection::connect(server)
        .await
        .expect("connect to the PostgreSQL test server");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("create a test database");
    admin.close().await.ok();
    let mut url = url::Url::parse(server).expect("server URL");
    url.set_path(&name);
    url.to_string()
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// The reviewer queue's proposals (`GET /api/v1/review`, `proposals_to_decide`), as the
    /// reviewer sees them.
    pub async fn proposals_to_decide(&self) -> Vec<Value> {
        let q: Value = self
            .get(&self.reviewer, "/api/v1/review")
            .await
            .json()
            .await
            .expect("review queue JSON");
        q["proposals_to_decide"]
            .as_array()
            .expect("proposals_to_decide is an array")
            .clone()
    }

    /// `POST /api/v1/proposals/{pid}/accept` as `token`, based on `version`.
    pub async fn accept_proposal(&self, token: &str, pid: i64, version: Value) -> Response {
        self.post_json(
            token,
            &format!("/api/v1/proposals/{pid}/accept"),
            json!({ "version": version }),
        )
        .await
    }

    pub async fn post_json(&self, token: &str, path: &str, body: Value) -> Response {
        self.client
            .post(self.url(path))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("request")
    }

    /// Writes a trigger into the post-mortem draft of `id` as the responder (`PUT
    /// /api/v1/incidents/{id}/postmortem`, asserting 200): a reviewer confirms only a draft that
    /// says what set the incident off.
    pub async fn write_trigger(&self, id: &str) {
        self.write_trigger_as(&self.responder, id).await;
    }

    /// [`TestApp::write_trigger`] as `token` (who becomes the draft's last editor).
    pub async fn write_trigger_as(&self, token: &str, id: &str) {
        let path = format!("/api/v1/incidents/{id}/postmortem");
        let stored: Value = self.get(token, &path).await.json().await.unwrap();
        let mut pm = stored["postmortem"].clone();
        pm["trigger"] = json!("A configuration push to every node at once");
        let res = self
            .client
            .put(self.url(&path))
            .bearer_auth(token)
            .json(&pm)
            .send()
            .await
            .expect("request");
        assert_eq!(
            res.status(),
            reqwest::StatusCode::OK,
            "{}",
            res.text().await.unwrap_or_default()
        );
    }

    pub async fn get(&self, token: &str, path: &str) -> Response {
        self.client
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("request")
    }

    /// Opens an incident as the responder, pastes `log` as log evidence (201) and investigates;
    /// returns the incident id and the investigation's JSON.
    pub async fn investigated(&self, title: &str, service: &str, log: &str) -> (String, Value) {
        let id = self.open_incident(title, service).await;
        let res = self
            .post_json(
                &self.responder,
                &format!("/api/v1/incidents/{id}/evidence"),
                serde_json::json!({"kind": "logs", "content": log}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
        let inv = self
            .post_json(
                &self.responder,
                &format!("/api/v1/incidents/{id}/investigate"),
                serde_json::json!({}),
            )
            .await
            .json::<Value>()
            .await
            .expect("json");
        (id, inv)
    }

    /// Opens an incident as the responder and returns its id.
    pub async fn open_incident(&self, title: &str, service: &str) -> String {
        let res = self
            .post_json(
                &self.responder,
                "/api/v1/incidents",
                serde_json::json!({"title": title, "service": service, "severity": "SEV2",
                                   "description": "customers see errors"}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::CREATED);
        res.json::<Value>().await.expect("json")["id"]
            .as_str()
            .expect("id")
            .to_string()
    }

    pub async fn resolve(&self, id: &str) -> Response {
        self.post_json(
            &self.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            serde_json::json!({"summary": "rolled back", "root_cause": "bad deploy"}),
        )
        .await
    }

    pub async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
            .fetch_one(&self.pool)
            .await
            .expect("count")
    }

    /// Posts `fields` as an urlencoded form to `path` from the signed-in client `b` (same
    /// origin); the status and the body (redirects are not followed).
    pub async fn post_form(
        &self,
        b: &Client,
        path: &str,
        fields: &[(&str, &str)],
    ) -> (StatusCode, String) {
        let res = b
            .post(self.url(path))
            .header("origin", &self.base)
            .form(fields)
            .send()
            .await
            .unwrap();
        let status = res.status();
        (status, res.text().await.unwrap())
    }

    /// The current version of incident `id`, read through the API.
    pub async fn version_of(&self, id: &str) -> i64 {
        let v: serde_json::Value = self
            .get(&self.responder, &format!("/api/v1/incidents/{id}"))
            .await
            .json()
            .await
            .unwrap();
        v["version"].as_i64().expect("version")
    }

    /// The HTML of `path` as the signed-in client `b` sees it; the answer must be 200. An
    /// incident page still waiting for its recall (computed in the background after a view,
    /// `incidentmind::web::incident::RECALL_PENDING`) is fetched again, as a person reloads,
    /// for up to 10 s.
    pub async fn page(&self, b: &Client, path: &str) -> String {
        for _ in 0..100 {
            let res = b.get(self.url(path)).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::OK, "{path}");
            let html = res.text().await.unwrap();
            if !html.contains(incidentmind::web::incident::RECALL_PENDING) {
                return html;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("{path}: the recall never arrived");
    }

    /// The HTML of `path` as the holder of `token` sees it once whole: as [`TestApp::page`]
    /// does, an incident page still waiting for its recall is fetched again, for up to 10 s.
    pub async fn whole_page(&self, token: &str, path: &str) -> String {
        for _ in 0..100 {
            let res = self.get(token, path).await;
            assert_eq!(res.status(), StatusCode::OK, "{path}");
            let html = res.text().await.unwrap();
            if !html.contains(incidentmind::web::incident::RECALL_PENDING) {
                return html;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("{path}: the recall never arrived");
    }

    /// A client with a cookie jar, signed in as `name` through the sign-in form.
    pub async fn browser(&self, name: &str) -> Client {
        let c = Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        let res = c
            .post(self.url("/signin"))
            .header("origin", &self.base)
            .form(&[
                ("name", name),
                ("password", PASSWORD),
                ("next", "/incidents"),
            ])
            .send()
            .await
            .expect("signin");
        assert_eq!(
            res.status(),
            StatusCode::SEE_OTHER,
            "sign-in should redirect"
        );
        c
    }
}

/// Reads the JSON error body `{"error": {"code", "message"}}`.
pub async fn error_of(res: Response) -> (StatusCode, String, String) {
    let status = res.status();
    let v: Value = res.json().await.expect("json error body");
    (
        status,
        v["error"]["code"].as_str().unwrap_or_default().to_string(),
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}
