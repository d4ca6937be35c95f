//! A real peer server the tests start on loopback (Prometheus, Alertmanager): its binary found
//! by an override variable or on `PATH`, started on a free port with its output in a log file,
//! waited for on its `/-/ready` endpoint, killed (and waited for) when dropped so a failed
//! assertion leaves no process behind.
//!
//! Included by each test binary that starts one with `#[path = "…/support/peer.rs"] mod peer;`
//! at its root.
#![allow(dead_code, reason = "each test binary uses the parts it needs")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;

/// The binary named by the variable `var` when it is a file, else the first of `names` on `PATH`.
pub fn find_binary(var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|p| p.is_file())
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// A running peer server.
pub struct Peer {
    name: &'static str,
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    log: PathBuf,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Peer {
    /// Starts `binary` with `args(port)` on a free port, its output in `dir/<name>.log`, and waits
    /// up to 30 s for `GET /-/ready` to answer 200.
    pub async fn start(
        name: &'static str,
        binary: &Path,
        dir: &Path,
        args: impl FnOnce(u16) -> Vec<String>,
        client: &reqwest::Client,
    ) -> Self {
        let port = free_port();
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = Command::new(binary)
            .args(args(port))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let peer = Self {
            name,
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        peer.eventually(&format!("{name} ready"), || async {
            client
                .get(format!("{}/-/ready", peer.base))
                .send()
                .await
                .ok()
                .filter(|r| r.status() == StatusCode::OK)
                .map(|_| ())
        })
        .await;
        peer
    }

    /// What the process wrote so far (stdout and stderr), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `probe` every 100 ms for up to 30 s until it returns `Some`; fails naming `what`,
    /// with the peer's log.
    pub async fn eventually<T, F, Fut>(&self, what: &str, mut probe: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(v) = probe().await {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{what} within 30 s; {} log:\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
