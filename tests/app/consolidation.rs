//! Consolidation: with the sample history loaded plus scripted follow-up incidents
//! whose lessons say the same thing in other words, `consolidate` (what the CLI and the schedule
//! run) proposes one merged rule; a reviewer accepts it through the review queue; recall then
//! ranks the merged rule first, the sources are marked and nothing is deleted.

use std::sync::Arc;

use incidentmind::memory::Embedder;
use incidentmind::memory::embeddings::EmbedError;
use incidentmind::services::sample::{PastIncident, history_users, replay};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with_embedder};

/// A deterministic stand-in for a sentence model: words of four letters or more, hashed into 256
/// buckets. Texts sharing most of their words have a high cosine, others a low one.
#[derive(Debug)]
struct WordBuckets;

#[async_trait::async_trait]
impl Embedder for WordBuckets {
    fn model(&self) -> &str {
        "test-word-buckets"
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; 256];
                v[255] = 0.01;
                for w in t
                    .to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() >= 4)
                {
                    let h = w.bytes().fold(2_166_136_261u32, |h, b| {
                        (h ^ u32::from(b)).wrapping_mul(16_777_619)
                    });
                    v[(h % 255) as usize] += 1.0;
                }
                v
            })
            .collect())
    }
}

/// A follow-up incident on `service`: adding consumers did not drain a lagging queue because one
/// partition kept retrying a record it could not decode; a fix that parks such records did.
fn follow_up(tag: &str, service: &str, always: &str, severity: &str) -> PastIncident {
    serde_json::from_value(json!({
        "id": tag,
        "service": service,
        "title": format!("{service} falls behind and postings stop arriving"),
        "description": format!(
            "Since 09:10 the {service} consumer group no longer keeps up; downstream totals are \
             stale and the backlog grows every minute."
        ),
        "evidence": [
            format!("2031-05-02T09:10:00Z WARN consumer group {service} lag is 48210 records"),
            "2031-05-02T09:11:00Z ERROR cannot decode record at offset 991233 on partition 3, will retry",
            "2031-05-02T09:12:00Z ERROR cannot decode record at offset 991233 on partition 3, will retry"
        ],
        "root_cause": "A producer release wrote records in a schema version the consumer could not decode, so partition 3 retried one record forever.",
        "failed_action": {"kind": "scale_out", "target": service,
                          "note": "Doubled the consumer replicas; every replica retried the same record and the lag kept climbing."},
        "worked_action": {"kind": "roll_forward_fix", "target": service,
                          "note": "Shipped a build that parks undecodable records on a dead-letter topic; the backlog drained."},
        "lesson": {"always": always,
                   "because": "more consumers cannot help while one partition is blocked by a single bad record",
                   "scope": format!("{service}, queue consumers"),
                   "severity": severity}
    }))
    .expect("a past incident")
}

const ALWAYS_LEDGER: &str = "check whether one partition is stuck retrying a record it cannot \
                             decode before adding consumers to a lagging queue";
const ALWAYS_INVOICE: &str = "check whether a single partition is stuck retrying a record it \
                              cannot decode before adding more consumers to a lagging queue";

/// Replays the two follow-ups through the normal workflow; returns their incident ids.
pub(crate) async fn replay_follow_ups(app: &TestApp) -> (String, String) {
    let (responder, reviewer) = history_users(&app.pool).await.expect("users");
    let ledger = follow_up("F1", "ledger-consumer", ALWAYS_LEDGER, "high");
    let invoice = follow_up("F2", "invoice-consumer", ALWAYS_INVOICE, "medium");
    let a = replay(&app.memory, &ledger, &responder, &reviewer)
        .await
        .expect("replay F1");
    let b = replay(&app.memory, &invoice, &responder, &reviewer)
        .await
        .expect("replay F2");
    (a.to_string(), b.to_string())
}

async fn lesson_of(app: &TestApp, incident: &str) -> i64 {
    sqlx::query_scalar("SELECT id FROM records WHERE kind = 'lesson' AND incident_id = $1")
        .bind(incident)
        .fetch_one(&app.pool)
        .await
        .expect("the incident's lesson")
}

async fn memory(app: &TestApp, id: i64) -> Value {
    app.get(&app.responder, &format!("/api/v1/memories/{id}"))
        .await
        .json()
        .await
        .unwrap()
}

pub(crate) async fn consolidations(app: &TestApp) -> Vec<Value> {
    app.proposals_to_decide()
        .await
        .into_iter()
        .filter(|p| p["kind"] == "consolidation")
        .collect()
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn consolidate_proposes_a_merged_rule_that_once_accepted_ranks_first_and_marks_its_sources() {
    let app = spawn_app_with_embedder(Arc::new(WordBuckets)).await;
    incidentmind::services::sample::load_history(&app.memory)
        .await
        .expect("history");
    let (ledger, invoice) = replay_follow_ups(&app).await;
    let (l1, l2) = (
        lesson_of(&app, &ledger).await,
        lesson_of(&app, &invoice).await,
    );

    // What the CLI and the schedule run: it drafts proposals, never memory.
    let records_before = app.count("records").await;
    let report = incidentmind::services::consolidation::consolidate(&app.memory, 20)
        .await
        .expect("consolidate");
    assert!(report.by_vector, "{report}");
    assert!(!report.proposed.is_empty(), "{report}");
    assert_eq!(app.count("records").await, records_before, "proposals only");
    let found = consolidations(&app).await;
    let p = found
        .iter()
        .find(|p| p["draft"]["consolidation"]["sources"][0]["id"] == l1)
        .unwrap_or_else(|| panic!("no consolidation of MEM-{l1}: {found:?}"));
    let sources: Vec<i64> = p["draft"]["consolidation"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        sources,
        vec![l1, l2],
        "the two follow-ups' lessons, nothing of the history"
    );
    let rule = &p["draft"]["record"]["rule"];
    assert_eq!(
        rule["always"], ALWAYS_LEDGER,
        "the most severe source's imperative"
    );
    assert_eq!(rule["severity"], "high", "the highest severity");
    assert_eq!(
        rule["scope"], "ledger-consumer, queue consumers, invoice-consumer",
        "the union of the scopes"
    );
    let because = rule["because"].as_str().unwrap();
    assert!(
        because.starts_with(&format!("Learned in 2 incidents ({ledger}, {invoice}): ")),
        "{because}"
    );
    assert!(
        because.contains(&format!("{ledger} (MEM-{l1})")),
        "{because}"
    );
    assert!(
        because.contains(&format!("{invoice} (MEM-{l2})")),
        "{because}"
    );

    // The queue page previews exactly what accepting writes and what it marks.
    let pid = p["id"].as_i64().unwrap();
    let b = app.browser("victor").await;
    // Consolidations come last in the queue, which pages its proposals.
    let mut html = String::new();
    for page in 1..=5 {
        html = app.page(&b, &format!("/review?page={page}")).await;
        if html.contains(&format!("id=\"preview-{pid}\"")) {
            break;
        }
    }
    assert!(html.contains(&format!("id=\"preview-{pid}\"")), "{html}");
    assert!(
        html.contains(&format!("<a href=\"/memories/{l2}\">MEM-{l2}</a>")),
        "{html}"
    );

    // A reviewer accepts it.
    let max_before: i64 = sqlx::query_scalar("SELECT MAX(id) FROM records")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let res = app
        .accept_proposal(&app.reviewer, pid, json!(p["version"]))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let accepted: Value = res.json().await.unwrap();
    let merged = accepted["record_id"].as_i64().unwrap();
    assert_eq!(app.count("records").await, records_before + 1, "only grew");
    let kept: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM records WHERE id <= $1")
        .bind(max_before)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(kept, records_before, "nothing deleted");

    // The merged rule: confirmed, by the reviewer, citing its sources.
    let m = memory(&app, merged).await;
    assert_eq!(
        (&m["kind"], &m["validation"], &m["author"]),
        (&json!("lesson"), &json!("confirmed"), &json!("victor"))
    );
    let cited = m["sources"].as_array().unwrap();
    assert!(
        cited.contains(&json!(l1)) && cited.contains(&json!(l2)),
        "{m}"
    );
    // The sources: marked, still confirmed, linking to it.
    for s in [l1, l2] {
        let r = memory(&app, s).await;
        assert_eq!(r["data"]["consolidated_into"], merged, "{r}");
        assert_eq!(r["validation"], "confirmed");
        let html = app.page(&b, &format!("/memories/{s}")).await;
        assert!(
            html.contains(&format!(
                "Consolidated into <a href=\"/memories/{merged}\">MEM-{merged}</a>"
            )),
            "{html}"
        );
    }

    // Recall's ranking table follows the mark (migration 0013's triggers).
    let ranked: Vec<Option<i64>> =
        sqlx::query_scalar("SELECT consolidated_into FROM records_rank WHERE id IN ($1, $2)")
            .bind(l1)
            .bind(l2)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(ranked, vec![Some(merged), Some(merged)]);

    // Recall prefers the merged rule; the sources follow, marked. (The memory worker of `serve`
    // embeds the new rule right after the write; here the test does.)
    incidentmind::memory::embeddings::catch_up(&app.memory)
        .await
        .expect("embeddings");
    let recalled: Value = app
        .get(
            &app.responder,
            "/api/v1/recall?q=what+should+I+check+before+adding+consumers+to+a+lagging+queue\
             +when+one+partition+is+stuck+on+a+record+it+cannot+decode&service=ledger-consumer&k=100",
        )
        .await
        .json()
        .await
        .unwrap();
    let results = recalled["results"].as_array().unwrap();
    assert_eq!(results[0]["id"], merged, "{recalled}");
    let source = results
        .iter()
        .find(|r| r["id"] == l1)
        .unwrap_or_else(|| panic!("the source is still recalled: {recalled}"));
    let rank = |id: i64| results.iter().position(|r| r["id"] == id);
    assert!(rank(l1) > rank(merged) && rank(l2).is_none_or(|r| r > 0));
    assert!(
        source["marks"]
            .as_array()
            .unwrap()
            .contains(&json!("consolidated")),
        "{source}"
    );

    // The audit log has the draft, the write, both marks and the decision.
    let audit: Vec<String> =
        sqlx::query_scalar("SELECT action || ' ' || subject FROM audit_log ORDER BY seq")
            .fetch_all(&app.pool)
            .await
            .unwrap();
    for entry in [
        format!("proposal.draft PRO-{pid}"),
        format!("memory.write MEM-{merged}"),
        format!("memory.consolidate MEM-{l1}"),
        format!("memory.consolidate MEM-{l2}"),
        format!("proposal.accept PRO-{pid}"),
    ] {
        assert!(audit.contains(&entry), "{entry} in {audit:?}");
    }

    // Running it again proposes nothing new.
    let proposals = app.count("proposals").await;
    let again = incidentmind::services::consolidation::consolidate(&app.memory, 20)
        .await
        .expect("consolidate");
    assert!(again.proposed.is_empty(), "{again}");
    assert_eq!(app.count("proposals").await, proposals);
}

/// The command line runs the same function over a database file (here with word overlap: no
/// embeddings), says which services are over the rule cap, and proposes nothing the second time.
#[tokio::test]
async fn the_consolidate_command_proposes_once_and_names_services_over_the_cap() {
    let app = spawn_app().await;
    let (ledger, _) = replay_follow_ups(&app).await;
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_incidentmind"))
            .args([
                "consolidate",
                "--database-url",
                &app.database_url,
                "--embeddings",
                "off",
                "--rule-cap",
                "0",
            ])
            .env_remove("INCIDENTMIND_DATABASE_URL")
            .env_remove("INCIDENTMIND_RULE_CAP")
            .output()
            .expect("the binary runs")
    };
    let first = run();
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(out.contains("by word overlap"), "{out}");
    assert!(
        out.contains("ledger-consumer has 1 standing rules, over the cap of 0"),
        "{out}"
    );
    let q = consolidations(&app).await;
    let lesson = lesson_of(&app, &ledger).await;
    let p = q
        .iter()
        .find(|p| p["draft"]["consolidation"]["sources"][0]["id"] == lesson)
        .unwrap_or_else(|| panic!("{q:?}"));
    assert!(
        p["title"].as_str().unwrap().contains("over the cap of 0"),
        "{p}"
    );
    assert!(!p["draft"]["consolidation"]["over_cap"].is_null());

    let second = run();
    let out = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success());
    assert!(out.contains("proposed 0 merged rules"), "{out}");
    assert_eq!(consolidations(&app).await.len(), q.len());
}

/// `serve`'s schedule calls the same function on its interval and stops on shutdown.
#[tokio::test]
async fn the_schedule_proposes_on_its_interval_and_stops_on_shutdown() {
    let app = spawn_app().await;
    replay_follow_ups(&app).await;
    let records = app.count("records").await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let job = tokio::spawn(incidentmind::services::consolidation::run_schedule(
        app.memory.clone(),
        std::time::Duration::from_millis(50),
        20,
        stopped,
    ));
    let mut waited = 0;
    while consolidations(&app).await.is_empty() && waited < 100 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
    }
    assert!(
        !consolidations(&app).await.is_empty(),
        "the schedule proposed"
    );
    assert_eq!(
        app.count("records").await,
        records,
        "proposals only, no memory"
    );
    stop.send(true).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), job)
        .await
        .expect("the schedule stops")
        .unwrap();
}
