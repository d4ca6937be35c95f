//! `incidentmind demo`: the whole story against a temporary database through the app's own HTTP
//! API (a server on 127.0.0.1), printing each step — for machines without a browser.
//!
//! Story: load the sample history; incident A on payments-api (pool exhaustion) is investigated,
//! raising the pool limit is tried and does not resolve it, a rollback does; A is resolved,
//! post-mortem drafted, confirmed by a reviewer, previewed and learned. Incident B, written in
//! other words on the same service, recalls A, cites it, and warns on the dead end.

use serde_json::{Value, json};

use crate::app::{App, Config};

const LOG_A: &str = "2026-11-29T14:05:12Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.
2026-11-29T14:06:40Z ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.
2026-11-29T14:07:02Z WARN pool stats: active=50 idle=0 waiting=180
2026-11-29T14:07:30Z INFO request rate 290/s (flat)";

const LOG_B: &str = "2026-11-29T16:20:03Z ERROR checkout: timed out waiting for a database connection from the pool (30000 ms)
2026-11-29T16:21:10Z ERROR checkout: timed out waiting for a database connection from the pool (30000 ms)";

struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn call(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await?;
        let status = res.status();
        let v: Value = res.json().await.unwrap_or(Value::Null);
        anyhow::ensure!(status.is_success(), "{path} → {status}: {v}");
        Ok(v)
    }

    async fn post(&self, token: &str, path: &str, body: Value) -> anyhow::Result<Value> {
        self.call(token, reqwest::Method::POST, path, Some(body))
            .await
    }

    async fn get(&self, token: &str, path: &str) -> anyhow::Result<Value> {
        self.call(token, reqwest::Method::GET, path, None).await
    }

    async fn put(&self, token: &str, path: &str, body: Value) -> anyhow::Result<Value> {
        self.call(token, reqwest::Method::PUT, path, Some(body))
            .await
    }
}

fn step(n: u32, what: &str) {
    println!("\n[{n}] {what}");
}

/// The approve body for the recommendation of `kind`: one that carries the dead-end banner is
/// approved with what is different this time (the API refuses it without).
fn approve_body(inv: &Value, kind: &str, reason: &str) -> Value {
    let warned = inv["recommendations"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["kind"] == kind))
        .is_some_and(|r| !r["warning"].is_null());
    if warned {
        json!({"reason": reason})
    } else {
        json!({})
    }
}

fn rec_id(inv: &Value, kind: &str) -> anyhow::Result<i64> {
    inv["recommendations"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["kind"] == kind))
        .and_then(|r| r["id"].as_i64())
        .ok_or_else(|| anyhow::anyhow!("no {kind} recommendation in {inv}"))
}

/// Runs the demo. Returns an error (exit status 1) if the second incident does not recall and
/// warn about the first.
///
/// # Errors
/// Any failed step.
pub async fn run() -> anyhow::Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("incidentmind-demo-")
        .tempdir()?;
    let db = dir.path().join("demo.db");
    let result = story(
        db.to_str()
            .ok_or_else(|| anyhow::anyhow!("temp path is not UTF-8"))?,
    )
    .await;
    let _ = dir.close();
    result
}

async fn story(db: &str) -> anyhow::Result<()> {
    // The built-in embedding model, as `serve` uses it (the story works without it too).
    let embedder =
        crate::memory::embeddings::BuiltinEmbedder::load(&crate::memory::minilm::default_dir())
            .ok()
            .map(|e| std::sync::Arc::new(e) as std::sync::Arc<dyn crate::memory::Embedder>);
    let app = App::build(Config {
        embedder,
        ..Config::new(db)
    })
    .await?;
    let (pool, memory) = (app.state.pool.clone(), app.state.memory.clone());
    step(
        1,
        &format!("temporary database {db}; users rita (responder) and victor (reviewer)"),
    );
    let rita = crate::services::users::add_user(&pool, "rita", "responder", None).await?;
    let victor = crate::services::users::add_user(&pool, "victor", "reviewer", None).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = app.router;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let api = Api {
        base: base.clone(),
        http: reqwest::Client::new(),
    };
    println!("    app serving on {base}");

    step(
        2,
        "load the sample history through the normal workflow (post-mortems confirmed, then learned)",
    );
    let loaded = crate::services::sample::load_history(&memory).await?;
    crate::memory::embeddings::catch_up(&memory).await?;
    println!(
        "    {} past incidents learned: {} … {}",
        loaded.len(),
        loaded.first().map(|x| x.1.to_string()).unwrap_or_default(),
        loaded.last().map(|x| x.1.to_string()).unwrap_or_default()
    );

    let (a_id, inv) = incident_a(&api, &rita).await?;
    try_actions(&api, &rita, &a_id, &inv).await?;
    learn_a(&api, &rita, &victor, &a_id).await?;

    // What `serve`'s memory worker does right after Learn: A's document and vectors.
    crate::memory::embeddings::catch_up(&memory).await?;

    incident_b(&api, &rita, &a_id).await
}

/// Steps 3 and 4: incident A opened with logs, then investigated. Returns its id and the
/// investigation.
async fn incident_a(api: &Api, rita: &str) -> anyhow::Result<(String, Value)> {
    step(3, "incident A: open, paste logs, see observations");
    let a = api.post(rita, "/api/v1/incidents", json!({"title": "Checkout API returns 503s", "service": "payments-api", "severity": "SEV2", "description": "Checkout failing since 14:05; database looks idle."})).await?;
    let a_id = a["id"].as_str().unwrap_or_default().to_string();
    let ev = api
        .post(
            rita,
            &format!("/api/v1/incidents/{a_id}/evidence"),
            json!({"kind": "logs", "content": LOG_A, "source": "kubectl logs payments-api"}),
        )
        .await?;
    println!(
        "    {a_id}: {} observations",
        ev["observations"].as_array().map_or(0, Vec::len)
    );
    for o in ev["observations"].as_array().into_iter().flatten().take(3) {
        println!(
            "      - {} [{}]",
            o["text"].as_str().unwrap_or_default(),
            o["failure_modes"]
                .as_array()
                .map(|t| t
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        );
    }

    step(4, "investigate A");
    let inv = api
        .post(
            rita,
            &format!("/api/v1/incidents/{a_id}/investigate"),
            json!({}),
        )
        .await?;
    for h in inv["hypotheses"].as_array().into_iter().flatten().take(3) {
        println!(
            "    hypothesis ({}): {}",
            h["confidence"].as_str().unwrap_or_default(),
            h["statement"].as_str().unwrap_or_default()
        );
    }
    for r in inv["recommendations"].as_array().into_iter().flatten() {
        println!(
            "    action {}{}",
            r["kind"].as_str().unwrap_or_default(),
            if r["warning"].is_null() {
                String::new()
            } else {
                format!(
                    "  ⚠ {}",
                    r["warning"]["message"].as_str().unwrap_or_default()
                )
            }
        );
    }
    Ok((a_id, inv))
}

/// Step 5: raise_pool_limit approved and judged "did not resolve", rollback_deploy approved and
/// judged "resolved".
async fn try_actions(api: &Api, rita: &str, a_id: &str, inv: &Value) -> anyhow::Result<()> {
    step(
        5,
        "approve raise_pool_limit (simulated) → verdict: did not resolve; approve rollback_deploy → resolved",
    );
    let raise = rec_id(inv, "raise_pool_limit")?;
    let t = api
        .post(
            rita,
            &format!("/api/v1/incidents/{a_id}/recommendations/{raise}/approve"),
            approve_body(
                inv,
                "raise_pool_limit",
                "this pool is smaller than the one that filled before",
            ),
        )
        .await?;
    println!(
        "    {}",
        t["transcript"]
            .as_str()
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or_default()
    );
    api.post(
        rita,
        &format!("/api/v1/incidents/{a_id}/recommendations/{raise}/verdict"),
        json!({"verdict": "did_not_resolve", "note": "pool filled again within minutes"}),
    )
    .await?;
    let rollback = rec_id(inv, "rollback_deploy")?;
    api.post(
        rita,
        &format!("/api/v1/incidents/{a_id}/recommendations/{rollback}/approve"),
        approve_body(inv, "rollback_deploy", "the leak started with this release"),
    )
    .await?;
    api.post(
        rita,
        &format!("/api/v1/incidents/{a_id}/recommendations/{rollback}/verdict"),
        json!({"verdict": "resolved", "note": "pool usage back to normal"}),
    )
    .await?;
    Ok(())
}

/// Step 6: A resolved, its post-mortem drafted, confirmed by a reviewer, previewed and learned.
async fn learn_a(api: &Api, rita: &str, victor: &str, a_id: &str) -> anyhow::Result<()> {
    step(
        6,
        "resolve A, draft the post-mortem, a reviewer confirms, preview, learn",
    );
    api.post(rita, &format!("/api/v1/incidents/{a_id}/resolve"), json!({"summary": "Rolled back payments-api 2.15.0.", "root_cause": "A connection leak in the new refund path."})).await?;
    let drafted = api
        .post(
            rita,
            &format!("/api/v1/incidents/{a_id}/postmortem"),
            json!({}),
        )
        .await?;
    // The responder writes what set it off; a reviewer confirms only a draft that says.
    let mut pm = drafted["postmortem"].clone();
    pm["trigger"] = json!("The payments-api 2.15.0 deploy that added the refund path");
    api.put(rita, &format!("/api/v1/incidents/{a_id}/postmortem"), pm)
        .await?;
    api.post(
        victor,
        &format!("/api/v1/incidents/{a_id}/postmortem/confirm"),
        json!({}),
    )
    .await?;
    let preview = api
        .get(rita, &format!("/api/v1/incidents/{a_id}/learnings/preview"))
        .await?;
    println!(
        "    preview: {}",
        preview["message"].as_str().unwrap_or_default()
    );
    let learned = api
        .post(
            victor,
            &format!("/api/v1/incidents/{a_id}/learn"),
            json!({}),
        )
        .await?;
    println!(
        "    learn: {}",
        learned["message"].as_str().unwrap_or_default()
    );
    anyhow::ensure!(
        preview["memories"].as_array().map(Vec::len) == learned["written"].as_array().map(Vec::len),
        "preview and learn disagree"
    );
    Ok(())
}

/// Step 7: incident B, in other words on the same service, recalls A and warns on its dead end.
async fn incident_b(api: &Api, rita: &str, a_id: &str) -> anyhow::Result<()> {
    step(7, "incident B, other words, same service: investigate");
    let b = api.post(rita, "/api/v1/incidents", json!({"title": "Card payments hang at the last step", "service": "payments-api", "severity": "SEV2", "description": "Customers wait forever on pay; requests time out waiting on the db."})).await?;
    let b_id = b["id"].as_str().unwrap_or_default().to_string();
    api.post(
        rita,
        &format!("/api/v1/incidents/{b_id}/evidence"),
        json!({"kind": "logs", "content": LOG_B}),
    )
    .await?;
    let inv_b = api
        .post(
            rita,
            &format!("/api/v1/incidents/{b_id}/investigate"),
            json!({}),
        )
        .await?;
    let recalled_a = inv_b["recalled"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|m| m["incident_id"] == a_id);
    let cited_a = inv_b["hypotheses"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|h| {
            h["prior_incidents"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["id"] == a_id)
        });
    println!("    recalled prior incident {a_id}: {recalled_a}; cited by a hypothesis: {cited_a}");
    let raise_b = inv_b["recommendations"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["kind"] == "raise_pool_limit"))
        .cloned()
        .unwrap_or(Value::Null);
    let warning = raise_b["warning"]["message"].as_str().unwrap_or_default();
    println!("    warning on raise_pool_limit: {warning}");
    let warns_a = raise_b["warning"]["incident_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|i| i == a_id);
    anyhow::ensure!(
        recalled_a && warns_a,
        "incident B did not recall {a_id} and warn on its dead end"
    );
    println!("\ndemo OK: {b_id} recalled {a_id} and warned before repeating its dead end");
    Ok(())
}
