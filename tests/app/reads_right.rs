//! Issue #49: what a new user tripped over — the strongest hypothesis first (and graded), weak
//! matches marked, old evidence kept out of the post-mortem's times, counts and verdicts that
//! read right.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

/// Memory pressure (a low-confidence play, listed first in the playbook) beside a full disk (a
/// high-confidence one), in the last minutes (old evidence is stale and caps confidence).
fn disk_and_memory() -> String {
    let at = |mins: i64| {
        (jiff::Timestamp::now() - jiff::SignedDuration::from_mins(mins))
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    };
    format!(
        "{} WARN node condition MemoryPressure is now: True\n\
         {} WARN High memory usage on worker 3\n\
         {} ERROR write /var/spool/q/7.dat: No space left on device\n\
         {} ERROR write /var/spool/q/8.dat: No space left on device\n",
        at(9),
        at(8),
        at(7),
        at(6)
    )
}

async fn confirm(app: &TestApp, id: &str, root_cause: &str) -> Value {
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "Spool cleaned", "root_cause": root_cause}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let pm: Value = res.json().await.unwrap();
    app.write_trigger(id).await;
    let res = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    pm
}

#[tokio::test]
async fn the_strongest_hypothesis_is_shown_first_and_is_the_one_graded() {
    let app = spawn_app().await;
    // With no memory at all every hypothesis is capped low: give it one unrelated rule.
    lesson(
        &app,
        "ALWAYS: rotate the signing keys before they expire\nBECAUSE: tokens failed\nSCOPE: auth-api\nSEVERITY: low",
        "auth-api",
        &[],
    )
    .await;
    let (id, inv) = app
        .investigated("Queue writer fails", "queue-writer", &disk_and_memory())
        .await;
    let hyps = inv["hypotheses"].as_array().unwrap();
    let order: Vec<&str> = hyps
        .iter()
        .map(|h| h["confidence"].as_str().unwrap())
        .collect();
    assert!(order.len() >= 2, "{inv}");
    assert_eq!(order[0], "high", "{inv:#}");
    assert!(
        hyps[0]["statement"]
            .as_str()
            .unwrap()
            .starts_with("A disk or volume is full"),
        "{inv}"
    );
    let rank = |c: &str| {
        ["low", "medium", "high"]
            .iter()
            .position(|x| *x == c)
            .unwrap()
    };
    assert!(
        order.windows(2).all(|w| rank(w[0]) >= rank(w[1])),
        "confidence never rises down the list: {order:?}"
    );
    // The page lists them in the same order.
    let browser = app.browser("rita").await;
    let html = app.page(&browser, &format!("/incidents/{id}")).await;
    let list = html.split("<ol class=\"hypotheses\">").nth(1).unwrap();
    let first = list.split("</li>").next().unwrap();
    assert!(first.contains("A disk or volume is full"), "{first}");

    // Learn grades the one shown first.
    confirm(
        &app,
        &id,
        "The spool partition filled up: no space left for the queue files",
    )
    .await;
    let preview: Value = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/learnings/preview"),
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        preview["grading"]["hypothesis_id"], hyps[0]["id"],
        "{preview}"
    );
    let html = app
        .page(&browser, &format!("/incidents/{id}/learnings"))
        .await;
    assert!(
        html.contains("<q id=\"grading-hypothesis\">A disk or volume is full"),
        "{html}"
    );
}

/// Writes a lesson of `service` (citing an observation of its own, as an inference must).
async fn lesson(app: &TestApp, text: &str, service: &str, tags: &[&str]) -> i64 {
    use incidentmind::domain::memory::NewRecord;
    use incidentmind::domain::{EpistemicType, MemoryKind};
    use incidentmind::services::memory as msvc;
    let mut r = NewRecord::new(MemoryKind::Lesson, text, "victor");
    r.services = vec![service.to_string()];
    r.failure_modes = tags.iter().map(|t| t.to_string()).collect();
    if r.epistemic_type == EpistemicType::Inference {
        let mut o = NewRecord::new(MemoryKind::Observation, format!("seen: {text}"), "victor");
        o.services = r.services.clone();
        r.cites = vec![msvc::write(&app.db, o).await.unwrap().id];
    }
    msvc::write(&app.db, r).await.unwrap().id
}

#[tokio::test]
async fn a_match_on_one_common_word_is_marked_weak_and_listed_after_the_strong_ones() {
    let app = spawn_app().await;
    let weak = lesson(
        &app,
        "ALWAYS: warm the thumbnail cache after each deploy\nBECAUSE: cold thumbnails stalls\nSCOPE: photo-resizer\nSEVERITY: low",
        "photo-resizer",
        &[],
    )
    .await;
    let strong = lesson(
        &app,
        "ALWAYS: keep the spool partition under 80 percent\nBECAUSE: the spool filled\nSCOPE: queue-writer\nSEVERITY: high",
        "queue-writer",
        &["disk_full"],
    )
    .await;
    let (id, _) = app
        .investigated("Queue writer stalls", "queue-writer", &disk_and_memory())
        .await;
    let browser = app.browser("rita").await;
    let html = app.page(&browser, &format!("/incidents/{id}")).await;
    let rules = html
        .split("<ul id=\"rules\">")
        .nth(1)
        .and_then(|s| s.split("</ul>").next())
        .expect("the rules list");
    let items: Vec<&str> = rules.split("<li").skip(1).collect();
    let at = |mem: i64| {
        items
            .iter()
            .position(|li| li.contains(&format!("MEM-{mem}<")))
            .unwrap_or_else(|| panic!("MEM-{mem} in {rules}"))
    };
    assert!(at(strong) < at(weak), "strong first: {rules}");
    assert!(
        !items[at(strong)].contains("weak match"),
        "{}",
        items[at(strong)]
    );
    assert!(
        items[at(weak)].contains("<span class=\"mark\">weak match</span>"),
        "{}",
        items[at(weak)]
    );
}

fn recommendation<'a>(inv: &'a Value, kind: &str) -> &'a Value {
    inv["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind)
        .unwrap_or_else(|| panic!("{kind} in {inv}"))
}

async fn act(app: &TestApp, id: &str, rid: &Value, step: &str, body: Value) {
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/recommendations/{rid}/{step}"),
            body,
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK, "{step}");
}

#[tokio::test]
async fn verdicts_the_next_step_and_the_age_read_right_once_an_action_resolved_it() {
    let app = spawn_app().await;
    let (id, inv) = app
        .investigated("Queue writer fails", "queue-writer", &disk_and_memory())
        .await;
    assert!(
        inv["recommendations"].as_array().unwrap().len() >= 3,
        "{inv}"
    );
    let restart = &recommendation(&inv, "restart_service")["id"];
    let free = &recommendation(&inv, "free_disk_space")["id"];
    act(&app, &id, restart, "approve", json!({})).await;
    act(
        &app,
        &id,
        restart,
        "verdict",
        json!({"verdict": "did_not_resolve"}),
    )
    .await;
    act(&app, &id, free, "approve", json!({})).await;
    act(
        &app,
        &id,
        free,
        "verdict",
        json!({"verdict": "resolved", "note": "writes resume"}),
    )
    .await;

    let browser = app.browser("rita").await;
    let html = app.page(&browser, &format!("/incidents/{id}")).await;
    // The two verdicts look different: their own class and sign.
    assert!(
        html.contains("<div class=\"verdict resolved\"><span class=\"sign\" aria-hidden=\"true\">✓</span>Verdict: resolved"),
        "{html}"
    );
    assert!(
        html.contains("<div class=\"verdict did_not_resolve\"><span class=\"sign\" aria-hidden=\"true\">✗</span>Verdict: did not resolve"),
        "{html}"
    );
    // Recommendations still proposed are not "waiting" once an action resolved it.
    assert!(!html.contains("recommendations are waiting"), "{html}");
    assert!(html.contains("An approved action resolved it"), "{html}");
    assert!(html.contains("<dt>Age</dt>"), "{html}");

    // Once resolved, the age stops: it reads how long it took.
    assert_eq!(app.resolve(&id).await.status(), StatusCode::OK);
    let html = app.page(&browser, &format!("/incidents/{id}")).await;
    assert!(html.contains("<dt>Resolved after</dt>"), "{html}");
    assert!(!html.contains("<dt>Age</dt>"), "{html}");
}

#[tokio::test]
async fn evidence_from_long_before_the_incident_is_left_out_of_the_post_mortem_times() {
    let app = spawn_app().await;
    let recent = (jiff::Timestamp::now() - jiff::SignedDuration::from_mins(10))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let log = format!(
        "2008-05-14T10:00:00Z WARN High memory usage on worker 3\n\
         2008-05-14T10:00:05Z WARN High memory usage on worker 4\n\
         {recent} ERROR write /var/spool/q/7.dat: No space left on device\n"
    );
    let (id, _) = app
        .investigated("Queue writer fails", "queue-writer", &log)
        .await;
    let pm = confirm(&app, &id, "The spool partition filled up").await;
    let impact = &pm["postmortem"]["impact"];
    assert_eq!(
        impact["started_at"].as_str().unwrap().get(..16),
        Some(&recent[..16]),
        "{impact}"
    );
    let detect = impact["time_to_detect_secs"].as_i64().unwrap();
    assert!((0..3600).contains(&detect), "{impact}");
    assert_eq!(pm["postmortem"]["detection_gaps"], json!([]), "{pm}");
    let left_out = impact["left_out"]
        .as_array()
        .expect("the evidence left out");
    assert!(
        left_out.iter().any(|l| {
            let l = l.as_str().unwrap();
            l.starts_with("OBS-")
                && l.contains("first line 2008-05-14 10:00 UTC")
                && l.contains("before the incident was opened")
        }),
        "{left_out:?}"
    );
    let md = app
        .get(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem.md"),
        )
        .await
        .text()
        .await
        .unwrap();
    assert!(md.contains("Evidence left out of these times"), "{md}");
    assert!(!md.contains("Time to detect: 6"), "{md}");
}

#[tokio::test]
async fn a_past_incident_is_named_once_where_its_id_is_shown() {
    let app = spawn_app().await;
    let (a, _) = app
        .investigated("Queue writer fails", "queue-writer", &disk_and_memory())
        .await;
    confirm(&app, &a, "The spool partition filled up with rotated files").await;
    let res = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{a}/learn"),
            json!({}),
        )
        .await;
    assert!(res.status().is_success());
    let (b, inv) = app
        .investigated(
            "Queue writer fails again",
            "queue-writer",
            &disk_and_memory(),
        )
        .await;
    let doubled = format!("{a} {a}");
    let same = inv["hypotheses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| {
            h["statement"]
                .as_str()
                .unwrap()
                .starts_with("Same cause as")
        })
        .unwrap_or_else(|| panic!("a same-cause hypothesis in {inv}"));
    assert_eq!(
        same["statement"],
        format!("Same cause as {a}: The spool partition filled up with rotated files"),
        "{same}"
    );
    let browser = app.browser("rita").await;
    let html = app.page(&browser, &format!("/incidents/{b}")).await;
    let similar = html
        .split("<ul id=\"similar\">")
        .nth(1)
        .and_then(|s| s.split("</ul>").next())
        .unwrap();
    assert!(similar.contains(&format!(">{a}</a>")), "{similar}");
    assert!(!similar.contains(&format!("{a}</a> {a}")), "{similar}");
    assert!(!html.contains(&doubled), "{html}");
}
