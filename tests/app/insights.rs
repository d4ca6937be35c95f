//! Insights: incidents scripted through the real API, their instants then moved to
//! known values in the database (the app has no clock to control), and the JSON and the page
//! checked against a hand count.

use jiff::{SignedDuration, Timestamp};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, error_of, spawn_app};

/// Opens an incident with a severity and a description of our own; returns its id.
async fn open(app: &TestApp, title: &str, service: &str, severity: &str) -> String {
    let res = app
        .post_json(
            &app.responder,
            "/api/v1/incidents",
            json!({"title": title, "service": service, "severity": severity,
                   "description": "reported by the on-call engineer"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Connection-pool log lines, every one stamped `at`.
async fn pool_log(app: &TestApp, id: &str, at: Timestamp) {
    let t = at.strftime("%Y-%m-%dT%H:%M:%SZ");
    let content = format!(
        "{t} ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n\
         {t} ERROR HikariPool-1 - Connection is not available, request timed out after 30000ms.\n"
    );
    let res = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/evidence"),
            json!({"kind": "logs", "content": content}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
}

/// Proposes `kind`, approves it and gives `verdict`; returns the recommendation id.
async fn try_action(app: &TestApp, id: &str, kind: &str, verdict: &str) -> i64 {
    let base = format!("/api/v1/incidents/{id}/recommendations");
    let res = app
        .post_json(
            &app.responder,
            &base,
            json!({"kind": kind, "rationale": "worth a try"}),
        )
        .await;
    assert!(res.status().is_success(), "propose: {}", res.status());
    let rid = res.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let res = app
        .post_json(
            &app.responder,
            &format!("{base}/{rid}/approve"),
            json!({"reason": "a new limit this time"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .post_json(
            &app.responder,
            &format!("{base}/{rid}/verdict"),
            json!({"verdict": verdict, "note": "no change after ten minutes"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    rid
}

async fn set_incident(app: &TestApp, id: &str, opened: Timestamp, resolved: Option<Timestamp>) {
    sqlx::query("UPDATE incidents SET opened_at = $1, resolved_at = $2 WHERE id = $3")
        .bind(incidentmind::store::db_time(opened))
        .bind(resolved.map(incidentmind::store::db_time))
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
}

async fn set_action(app: &TestApp, rid: i64, approved: Timestamp, verdict: Timestamp) {
    sqlx::query("UPDATE recommendations SET decided_at = $1, verdict_at = $2 WHERE id = $3")
        .bind(incidentmind::store::db_time(approved))
        .bind(incidentmind::store::db_time(verdict))
        .bind(rid)
        .execute(&app.pool)
        .await
        .unwrap();
}

fn mins(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

async fn insights(app: &TestApp, query: &str) -> Value {
    let res = app
        .get(&app.responder, &format!("/api/v1/insights{query}"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

fn find(list: &Value, pred: impl Fn(&Value) -> bool) -> &Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|v| pred(v))
        .unwrap_or_else(|| panic!("not in {list}"))
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario: each step acts on what the steps before it left, so it reads top to bottom"
)]
async fn insights_count_failure_modes_dead_ends_response_times_and_thin_memory_by_hand() {
    let app = spawn_app().await;
    let now = Timestamp::from_second(Timestamp::now().as_second() / 60 * 60).unwrap();
    let day = SignedDuration::from_hours(24);
    let (t0, t1, t2, t3) = (now - day * 40, now - day * 3, now - day * 10, now - day);

    // I0: payments-api, 40 days ago: only in the 90-day window.
    let i0 = open(&app, "Payments API errors", "payments-api", "SEV2").await;
    pool_log(&app, &i0, t0 - mins(5)).await;
    app.resolve(&i0).await;
    // I1: payments-api SEV2; raise_pool_limit did not resolve (12 min lost); resolved.
    let i1 = open(&app, "Payments API errors", "payments-api", "SEV2").await;
    pool_log(&app, &i1, t1 - mins(8)).await;
    let r1 = try_action(&app, &i1, "raise_pool_limit", "did_not_resolve").await;
    assert_eq!(app.resolve(&i1).await.status(), StatusCode::OK);
    // I2: ledger SEV1; raise_pool_limit did not resolve (29 min lost), a restart resolved it;
    // learned with the lessons of its draft.
    let i2 = open(&app, "Ledger writes fail", "ledger", "SEV1").await;
    pool_log(&app, &i2, t2 - mins(4)).await;
    let r2 = try_action(&app, &i2, "raise_pool_limit", "did_not_resolve").await;
    let r2b = try_action(&app, &i2, "restart_service", "resolved").await;
    assert_eq!(app.resolve(&i2).await.status(), StatusCode::OK);
    let drafted = app
        .post_json(
            &app.responder,
            &format!("/api/v1/incidents/{i2}/postmortem"),
            json!({}),
        )
        .await;
    assert_eq!(drafted.status(), StatusCode::CREATED);
    app.write_trigger(&i2).await;
    for step in ["postmortem/confirm", "learn"] {
        let res = app
            .post_json(
                &app.reviewer,
                &format!("/api/v1/incidents/{i2}/{step}"),
                json!({}),
            )
            .await;
        assert_eq!(res.status(), StatusCode::OK, "{step}");
    }
    let lessons: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM records WHERE kind = 'lesson' AND incident_id = $1",
    )
    .bind(&i2)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(lessons >= 1, "the draft's lessons were learned");
    // I3: payments-api SEV3, still investigating, no evidence.
    let i3 = open(&app, "Receipts arrive late", "payments-api", "SEV3").await;

    set_incident(&app, &i0, t0, Some(t0 + mins(60))).await;
    set_incident(&app, &i1, t1, Some(t1 + mins(90))).await;
    set_action(&app, r1, t1 + mins(10), t1 + mins(22)).await;
    set_incident(&app, &i2, t2, Some(t2 + mins(45))).await;
    set_action(&app, r2, t2 + mins(5), t2 + mins(34)).await;
    set_action(&app, r2b, t2 + mins(35), t2 + mins(40)).await;
    set_incident(&app, &i3, t3, None).await;

    let v = insights(&app, "").await;
    assert_eq!(v["days"], 30);
    assert_eq!(v["incidents"], 3);

    // 1. Failure mode × service.
    let pool_mode = "connection_pool_exhausted";
    let row = |service: &str| {
        find(&v["failure_modes"], |f| {
            f["failure_mode"] == pool_mode && f["service"] == service
        })
        .clone()
    };
    assert_eq!(row("payments-api")["incidents"], 1);
    assert_eq!(row("payments-api")["incident_ids"], json!([i1]));
    assert_eq!(row("ledger")["incident_ids"], json!([i2]));

    // 2. Dead ends: 12 + 29 = 41 minutes over two incidents on two services; recurring.
    let dead = find(&v["dead_ends"], |d| {
        d["action_kind"] == "raise_pool_limit" && d["failure_mode"] == pool_mode
    });
    assert_eq!(dead["failures"], 2);
    assert_eq!(dead["incidents"], 2);
    assert_eq!(dead["services"], 2);
    assert_eq!(dead["seconds_lost"], 41 * 60);
    assert_eq!(dead["time_lost"], "41 min");
    assert_eq!(dead["recurring"], true);
    assert_eq!(
        dead["summary"],
        "raise_pool_limit on connection_pool_exhausted: 2 incidents, 2 services, 41 min lost"
    );
    assert!(
        v["dead_ends"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["action_kind"] != "restart_service"),
        "a resolving action is no dead end"
    );

    // 3. MTTR (opened → resolved) and time to detect (first log line → opened).
    let pay = find(&v["response_times"], |s| s["service"] == "payments-api");
    assert_eq!(pay["overall"]["incidents"], 2);
    assert_eq!(pay["overall"]["resolved"], 1);
    assert_eq!(pay["overall"]["mttr_seconds"], 90 * 60);
    assert_eq!(pay["overall"]["mttr"], "1 h 30 min");
    assert_eq!(pay["overall"]["ttd_seconds"], 8 * 60);
    assert_eq!(pay["overall"]["ttd"], "8 min");
    let sev = |s: &Value, sev: &str| find(&s["by_severity"], |r| r["severity"] == sev).clone();
    assert_eq!(sev(pay, "SEV2")["mttr_seconds"], 90 * 60);
    assert_eq!(sev(pay, "SEV3")["resolved"], 0);
    assert_eq!(sev(pay, "SEV3")["mttr"], "no resolved incident");
    assert_eq!(sev(pay, "SEV3")["ttd"], "not recorded");
    let weekly = pay["weekly_mttr"].as_array().unwrap();
    assert_eq!(weekly.len(), 5);
    // I1 was opened 27 days into the window: the fourth week.
    let by_week: Vec<Value> = weekly.iter().map(|w| w["mttr_seconds"].clone()).collect();
    assert_eq!(
        by_week,
        vec![
            json!(null),
            json!(null),
            json!(null),
            json!(5400),
            json!(null)
        ]
    );
    let ledger = find(&v["response_times"], |s| s["service"] == "ledger");
    assert_eq!(sev(ledger, "SEV1")["mttr_seconds"], 45 * 60);
    assert_eq!(sev(ledger, "SEV1")["ttd_seconds"], 4 * 60);

    // 4. Thin memory: I1 is resolved without a lesson; I2 has its lessons, I3 is open.
    let thin: Vec<&str> = v["thin_memory"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(thin, vec![i1.as_str()]);
    assert_eq!(v["thin_memory"][0]["href"], format!("/incidents/{i1}"));

    // 90 days reach I0 too.
    let v90 = insights(&app, "?days=90").await;
    assert_eq!(v90["incidents"], 4);
    assert_eq!(
        find(&v90["failure_modes"], |f| f["failure_mode"] == pool_mode
            && f["service"] == "payments-api")["incident_ids"],
        json!([i0, i1])
    );
    assert_eq!(
        v90["response_times"][1]["weekly_mttr"]
            .as_array()
            .unwrap()
            .len(),
        13
    );

    // The page shows the same figures.
    let browser = app.browser("rita").await;
    let html = app.page(&browser, "/insights").await;
    assert!(html.contains(r#"href="/insights""#), "linked from the nav");
    assert!(html.contains(
        "raise_pool_limit on connection_pool_exhausted: 2 incidents, 2 services, 41 min lost"
    ));
    assert!(html.contains("Recurring dead end"));
    assert!(html.contains("1 h 30 min") && html.contains("8 min"));
    assert!(html.contains("<svg") && html.contains("<title>MTTR per week for payments-api"));
    assert!(html.contains(&format!(
        r#"<a href="/incidents/{i1}">{i1}</a> Payments API errors"#
    )));
}

#[tokio::test]
async fn insights_with_nothing_recorded_say_what_to_do() {
    let app = spawn_app().await;
    let v = insights(&app, "").await;
    assert_eq!(v["incidents"], 0);
    assert_eq!(v["dead_ends"], json!([]));
    let html = app
        .page(&app.browser("rita").await, "/insights?days=90")
        .await;
    assert!(
        html.contains("No incidents opened in the last 90 days."),
        "{html}"
    );
    assert!(html.contains("No failed actions in the last 90 days."));
}

#[tokio::test]
async fn insights_refuse_a_window_other_than_30_or_90_days() {
    let app = spawn_app().await;
    let (status, code, message) =
        error_of(app.get(&app.responder, "/api/v1/insights?days=7").await).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(code, "validation");
    assert!(message.contains("days=30 or days=90"), "{message}");
    let page = app
        .browser("rita")
        .await
        .get(app.url("/insights?days=abc"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.text().await.unwrap().contains("days=30 or days=90"));
    let anonymous = app
        .client
        .get(app.url("/api/v1/insights"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_stale_paste_is_flagged_not_counted_and_the_page_answers_with_charts() {
    let app = spawn_app().await;
    let now = Timestamp::from_second(Timestamp::now().as_second() / 60 * 60).unwrap();
    let day = SignedDuration::from_hours(24);
    // Logs of 2008 pasted into an incident of this week.
    let old = open(&app, "Payments API errors", "payments-api", "SEV2").await;
    pool_log(&app, &old, "2008-11-09T20:55:00Z".parse().unwrap()).await;
    set_incident(&app, &old, now - day * 2, Some(now - day * 2 + mins(50))).await;
    // A fresh one detected eight minutes late.
    let fresh = open(&app, "Payments API slow", "payments-api", "SEV2").await;
    pool_log(&app, &fresh, now - day - mins(8)).await;
    set_incident(&app, &fresh, now - day, Some(now - day + mins(30))).await;
    let v = insights(&app, "").await;
    let t = &find(&v["response_times"], |t| t["service"] == "payments-api")["overall"];
    assert_eq!(
        t["ttd"], "8 min",
        "the 2008 paste is not a detection delay: {t}"
    );
    assert_eq!(
        (t["detected"].as_i64(), t["stale"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(v["stale_signals"][0]["id"], old.as_str());
    assert!(
        v["stale_signals"][0]["distance"]
            .as_str()
            .unwrap()
            .ends_with("before it was opened")
    );
    assert_eq!(v["weekly_mttr"].as_array().unwrap().len(), 5);
    assert_eq!(v["recurring_modes"][0]["incidents"], 2);

    let html = app.page(&app.browser("rita").await, "/insights").await;
    for id in [
        "chart-mttr-trend",
        "chart-failure-modes",
        "chart-services",
        "stale-signals",
    ] {
        assert!(html.contains(&format!(r#"id="{id}""#)), "{id}: {html}");
    }
    assert!(html.contains(r#"<svg class="chart""#));
    assert!(!html.contains(" d 18 h"), "no figure from the 2008 paste");
    assert!(html.contains(&format!(r#"<a href="/incidents/{old}">{old}</a>"#)));
    // One table left (folded), not one per service.
    assert_eq!(html.matches("<table").count(), 2, "{html}");
}

#[tokio::test]
async fn the_sample_history_keeps_its_incidents_durations() {
    let app = spawn_app().await;
    incidentmind::services::sample::load_history(&app.memory)
        .await
        .expect("history");
    let v = insights(&app, "").await;
    let times = v["response_times"].as_array().unwrap();
    assert_eq!(times.len(), 14, "{v}");
    for t in times {
        assert_ne!(t["overall"]["mttr"], "under 1 min", "{t}");
    }
    let h01 = find(&v["response_times"], |t| t["service"] == "payments-api");
    assert_eq!(h01["overall"]["mttr"], "55 min");
    let roblox = find(&v["response_times"], |t| {
        t["service"] == "service-discovery"
    });
    assert_eq!(roblox["overall"]["mttr"], "3 d 1 h");
    // Their evidence carries the original dates: outside the window, never a detection delay
    // of months.
    assert!(
        times.iter().all(|t| t["overall"]["ttd_seconds"]
            .as_i64()
            .is_none_or(|s| s <= 7 * 86_400)),
        "{times:?}"
    );
    assert!(!v["stale_signals"].as_array().unwrap().is_empty());
}
