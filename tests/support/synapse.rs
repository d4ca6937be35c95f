//! A real Matrix homeserver (Synapse) for the chat tests: found in the virtualenv `.ci/run`
//! makes (`INCIDENTMIND_SYNAPSE_PYTHON`, else `${XDG_CACHE_HOME:-~/.cache}/incidentmind-ci/
//! synapse-venv/bin/python`), started on a free loopback port with a generated configuration
//! (SQLite, no federation, rate limits raised), users registered through its shared-secret admin
//! API. It can be stopped and started again on the same port and database. Killed when dropped.
#![allow(dead_code, reason = "each test binary uses the parts it needs")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};

/// The shared secret of the generated configuration.
const SHARED_SECRET: &str = "incidentmind-test-shared-secret";

/// The Python of Synapse's virtualenv, when there is one.
pub fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("INCIDENTMIND_SYNAPSE_PYTHON") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("incidentmind-ci/synapse-venv/bin/python")).filter(|p| p.is_file())
}

/// A running (or stopped) Synapse.
pub struct Synapse {
    python: PathBuf,
    dir: PathBuf,
    child: Option<Child>,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    client: reqwest::Client,
}

impl Drop for Synapse {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A registered user: its id and access token.
#[derive(Debug, Clone)]
pub struct MatrixUser {
    /// `@name:localhost`.
    pub user_id: String,
    /// Its access token.
    pub token: String,
}

impl Synapse {
    /// Writes a configuration under `dir`, starts Synapse on a free port and waits until it
    /// answers (prints how long that took).
    pub async fn start(python: &Path, dir: &Path) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let d = dir.display();
        let seed: [u8; 32] = rand::random();
        std::fs::write(
            dir.join("signing.key"),
            format!("ed25519 a_test {}\n", base64_unpadded(&seed)),
        )
        .expect("key");
        std::fs::write(
            dir.join("log.yaml"),
            format!(
                "version: 1\nformatters:\n  precise:\n    format: '%(asctime)s %(name)s %(levelname)s %(message)s'\n\
                 handlers:\n  file:\n    class: logging.FileHandler\n    formatter: precise\n    filename: {d}/homeserver.log\n\
                 root:\n  level: WARNING\n  handlers: [file]\ndisable_existing_loggers: false\n"
            ),
        )
        .expect("log config");
        let limit = "{per_second: 1000, burst_count: 1000}";
        std::fs::write(
            dir.join("hs.yaml"),
            format!(
                "server_name: localhost\npid_file: {d}/homeserver.pid\n\
                 listeners:\n  - bind_addresses: ['127.0.0.1']\n    port: {port}\n    type: http\n    tls: false\n    x_forwarded: false\n    resources:\n      - names: [client]\n        compress: false\n\
                 database:\n  name: sqlite3\n  args:\n    database: {d}/homeserver.db\n\
                 log_config: {d}/log.yaml\nmedia_store_path: {d}/media\n\
                 registration_shared_secret: \"{SHARED_SECRET}\"\nreport_stats: false\n\
                 macaroon_secret_key: \"test-macaroon\"\nform_secret: \"test-form\"\n\
                 signing_key_path: {d}/signing.key\ntrusted_key_servers: []\nsuppress_key_server_warning: true\n\
                 rc_message: {limit}\nrc_registration: {limit}\nrc_joins:\n  local: {limit}\n\
                 rc_login:\n  address: {limit}\n  account: {limit}\n  failed_attempts: {limit}\n"
            ),
        )
        .expect("config");
        let mut s = Self {
            python: python.to_path_buf(),
            dir: dir.to_path_buf(),
            child: None,
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
        };
        s.start_again().await;
        s
    }

    /// Starts the stopped server again (same port, same database) and waits until it answers.
    pub async fn start_again(&mut self) {
        let started = Instant::now();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stdout.log"))
            .expect("log");
        let err = log.try_clone().expect("log");
        let child = Command::new(&self.python)
            .args(["-m", "synapse.app.homeserver", "--config-path"])
            .arg(self.dir.join("hs.yaml"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .expect("start synapse");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let up = self
                .client
                .get(format!("{}/_matrix/client/versions", self.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if up {
                break;
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                panic!("synapse exited ({status}): {}", self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "synapse not ready in 120 s: {}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!(
            "synapse ready in {:.1} s on {}",
            started.elapsed().as_secs_f64(),
            self.base
        );
    }

    /// Stops the server (SIGKILL, as a crash) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Its log files, for a failure message.
    pub fn logs(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        format!("{}\n{}", read("stdout.log"), read("homeserver.log"))
    }

    /// Registers `name` through the shared-secret admin API (`/_synapse/admin/v1/register`: a
    /// nonce, then an HMAC-SHA1 of nonce, user, password and admin flag under the secret).
    pub async fn register(&self, name: &str) -> MatrixUser {
        let url = format!("{}/_synapse/admin/v1/register", self.base);
        let nonce: Value = self
            .client
            .get(&url)
            .send()
            .await
            .expect("nonce")
            .json()
            .await
            .expect("nonce json");
        let nonce = nonce["nonce"].as_str().expect("nonce").to_string();
        let password = format!("{name}-password-1234");
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(SHARED_SECRET.as_bytes()).expect("hmac");
        mac.update(format!("{nonce}\0{name}\0{password}\0notadmin").as_bytes());
        let digest = hex::encode(mac.finalize().into_bytes());
        let res: Value = self
            .client
            .post(&url)
            .json(
                &json!({"nonce": nonce, "username": name, "password": password,
                          "admin": false, "mac": digest}),
            )
            .send()
            .await
            .expect("register")
            .json()
            .await
            .expect("register json");
        MatrixUser {
            user_id: res["user_id"].as_str().expect("user_id").to_string(),
            token: res["access_token"].as_str().expect("token").to_string(),
        }
    }

    /// A client-server API call as `user`: `method path` with `body`; the JSON answer.
    pub async fn call(
        &self,
        user: &MatrixUser,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&user.token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("matrix call");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Creates a private room as `owner` inviting `invite`; returns its id.
    pub async fn create_room(&self, owner: &MatrixUser, invite: &[&MatrixUser]) -> String {
        let invites: Vec<&str> = invite.iter().map(|u| u.user_id.as_str()).collect();
        let (status, v) = self
            .call(
                owner,
                reqwest::Method::POST,
                "/_matrix/client/v3/createRoom",
                Some(json!({"preset": "private_chat", "name": "on-call", "invite": invites})),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        v["room_id"].as_str().expect("room_id").to_string()
    }

    /// `user` joins `room`.
    pub async fn join(&self, user: &MatrixUser, room: &str) {
        let (status, v) = self
            .call(
                user,
                reqwest::Method::POST,
                &format!("/_matrix/client/v3/join/{}", encode(room)),
                Some(json!({})),
            )
            .await;
        assert_eq!(status, 200, "{v}");
    }

    /// The `m.room.message` events of `room` as `reader` sees them, oldest first.
    pub async fn messages(&self, reader: &MatrixUser, room: &str) -> Vec<Value> {
        let (status, v) = self
            .call(
                reader,
                reqwest::Method::GET,
                &format!(
                    "/_matrix/client/v3/rooms/{}/messages?dir=b&limit=1000",
                    encode(room)
                ),
                None,
            )
            .await;
        assert_eq!(status, 200, "{v}");
        let mut out: Vec<Value> = v["chunk"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["type"] == "m.room.message")
            .collect();
        out.reverse();
        out
    }
}

/// Percent-encodes a path segment.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn base64_unpadded(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}
