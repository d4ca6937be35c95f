//! Organizational memory: typed records, recall, supersede/retract, notes and runbooks, audit,
//! export/import.

use incidentmind::domain::memory::NewRecord;
use incidentmind::domain::{ActionKind, EpistemicType, MemoryKind, Validation};
use incidentmind::memory::recall::{RecallQuery, recall};
use incidentmind::services::memory as msvc;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{error_of, spawn_app};

fn rec(kind: MemoryKind, text: &str, service: &str, tags: &[&str]) -> NewRecord {
    let mut r = NewRecord::new(kind, text, "victor");
    r.services = vec![service.to_string()];
    r.failure_modes = tags.iter().map(|t| t.to_string()).collect();
    r
}

/// Writes `r`, first writing an observation for it to cite when it is an inference.
async fn write(
    pool: &incidentmind::store::Db,
    mut r: NewRecord,
) -> incidentmind::domain::memory::MemoryRecord {
    if r.epistemic_type == EpistemicType::Inference && r.cites.is_empty() {
        let obs = msvc::write(
            pool,
            NewRecord::new(MemoryKind::Observation, format!("seen: {}", r.text), "rita"),
        )
        .await
        .unwrap();
        r.cites = vec![obs.id];
    }
    msvc::write(pool, r).await.unwrap()
}

/// A small, varied memory so ranking has something to beat.
async fn seed_distractors(pool: &incidentmind::store::Db) {
    let items = [
        (
            MemoryKind::RootCause,
            "TLS certificate on the edge proxy expired at midnight",
            "edge-proxy",
            "tls_certificate_expired",
        ),
        (
            MemoryKind::RootCause,
            "Disk on the logging node filled up with debug logs",
            "log-shipper",
            "disk_full",
        ),
        (
            MemoryKind::Symptom,
            "Search results stale because the indexer consumer fell behind",
            "search",
            "consumer_lag",
        ),
        (
            MemoryKind::RootCause,
            "DNS resolver misconfiguration after a config push",
            "auth-api",
            "dns_resolution_failure",
        ),
        (
            MemoryKind::RemediationFailure,
            "Restarting the cache cluster did not clear the stampede",
            "catalog",
            "cache_failure",
        ),
        (
            MemoryKind::RootCause,
            "Replica fell 20 minutes behind during the bulk import",
            "orders-db",
            "replication_lag",
        ),
        (
            MemoryKind::Symptom,
            "Pods OOMKilled in a crash loop after the image upgrade",
            "recommendations",
            "oom_killed",
        ),
        (
            MemoryKind::RootCause,
            "Rate limiter misconfigured, clients got 429 responses",
            "public-api",
            "rate_limited",
        ),
    ];
    for (kind, text, svc, tag) in items {
        write(pool, rec(kind, text, svc, &[tag])).await;
    }
}

#[tokio::test]
async fn a_paraphrased_query_finds_the_dead_end_in_the_top_3() {
    let app = spawn_app().await;
    seed_distractors(&app.db).await;
    let mut failure = rec(
        MemoryKind::RemediationFailure,
        "Connection pool exhausted on payments-db, raising max pool size did not help",
        "payments-db",
        &[],
    );
    failure.action_kind = Some(ActionKind::RaisePoolLimit);
    let written = msvc::write(&app.db, failure).await.unwrap();
    let res = recall(
        &app.memory,
        &RecallQuery {
            text: "checkout API timing out waiting for database connections".into(),
            k: 10,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let ids: Vec<i64> = res.results.iter().map(|r| r.memory.id).collect();
    let pos = ids.iter().position(|i| *i == written.id).expect("found");
    assert!(pos < 3, "rank {pos} in {ids:?}");
    // Found by its words (no embedder here), and "why" says which.
    let why = &res.results[pos].why;
    assert_eq!(why.lists, ["text"], "{why:?}");
    assert_eq!(why.matched_terms, ["connections"], "{why:?}");
    assert!(res.notice.is_none());
}

#[tokio::test]
async fn nothing_relevant_says_so_instead_of_returning_noise() {
    let app = spawn_app().await;
    let res = recall(
        &app.memory,
        &RecallQuery {
            text: "quarterly budget spreadsheet".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(res.results.is_empty());
    assert_eq!(
        res.notice.as_deref(),
        Some(
            "No relevant organizational memory found: organizational memory is empty (nothing learned yet)"
        )
    );
}

#[tokio::test]
async fn an_empty_or_thin_recall_says_which_kind_of_nothing_it_is() {
    let app = spawn_app().await;
    let mut r = NewRecord::new(
        MemoryKind::Symptom,
        "Ledger writer stalled on fsync while the journal volume was saturated",
        "rita",
    );
    r.services = vec!["ledger-writer".into()];
    write(&app.db, r).await;
    let ask = |text: &str, service: Option<&str>| RecallQuery {
        text: text.into(),
        service: service.map(str::to_string),
        ..Default::default()
    };
    // Another service, nothing in common: nothing stored for it.
    let res = recall(&app.memory, &ask("marzipan inventory", Some("bakery-api")))
        .await
        .unwrap();
    assert!(res.results.is_empty());
    assert!(
        res.notice
            .as_deref()
            .unwrap()
            .ends_with("nothing is stored for bakery-api, and nothing stored elsewhere matched"),
        "{:?}",
        res.notice
    );
    // No service, nothing in common: nothing matched.
    let res = recall(&app.memory, &ask("marzipan inventory", None))
        .await
        .unwrap();
    assert!(
        res.notice.as_deref().unwrap().ends_with(
            "no stored record shares words, failure modes or action kinds with this text"
        ),
        "{:?}",
        res.notice
    );
    // The same service, nothing in common: the record comes only through the service.
    let res = recall(
        &app.memory,
        &ask("marzipan inventory", Some("ledger-writer")),
    )
    .await
    .unwrap();
    assert_eq!(res.results.len(), 1);
    assert_eq!(
        res.notice.as_deref(),
        Some(
            "Matches exist only through the service (ledger-writer): no stored record shares words, failure modes or action kinds with this text"
        )
    );
}

#[tokio::test]
async fn a_superseded_record_ranks_below_its_successor_and_is_marked() {
    let app = spawn_app().await;
    let old = write(
        &app.db,
        rec(
            MemoryKind::RootCause,
            "Checkout latency caused by connection pool exhaustion on payments-db",
            "payments-api",
            &["connection_pool_exhausted"],
        ),
    )
    .await;
    let new = write(
        &app.db,
        rec(
            MemoryKind::RootCause,
            "Checkout latency caused by a connection leak exhausting the pool on payments-db",
            "payments-api",
            &["connection_pool_exhausted", "connection_leak"],
        ),
    )
    .await;
    // Before: the older one is found too.
    msvc::supersede(&app.pool, "victor", old.id, new.id, "leak found")
        .await
        .unwrap();
    let res = recall(
        &app.memory,
        &RecallQuery {
            text: "checkout latency connection pool exhaustion".into(),
            service: Some("payments-api".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let ids: Vec<i64> = res.results.iter().map(|r| r.memory.id).collect();
    let (pn, po) = (
        ids.iter().position(|i| *i == new.id).unwrap(),
        ids.iter().position(|i| *i == old.id).unwrap(),
    );
    assert!(pn < po, "successor first: {ids:?}");
    assert!(res.results[po].marks.contains(&"superseded"));
    let o = incidentmind::store::memory::record(&app.pool, old.id)
        .await
        .unwrap();
    assert_eq!(
        (o.validation, o.superseded_by),
        (Validation::Superseded, Some(new.id))
    );
}

#[tokio::test]
async fn a_retracted_record_never_comes_back_on_any_path() {
    let app = spawn_app().await;
    let mut r = rec(
        MemoryKind::RemediationFailure,
        "Raising the pool limit on payments-db did not help",
        "payments-db",
        &["connection_pool_exhausted"],
    );
    r.action_kind = Some(ActionKind::RaisePoolLimit);
    let m = msvc::write(&app.db, r).await.unwrap();
    msvc::retract(&app.pool, "victor", m.id, "wrong incident")
        .await
        .unwrap();
    for q in [
        RecallQuery {
            text: "raising the pool limit payments-db".into(),
            ..Default::default()
        },
        RecallQuery {
            service: Some("payments-db".into()),
            ..Default::default()
        },
        RecallQuery {
            failure_modes: vec!["connection_pool_exhausted".into()],
            ..Default::default()
        },
        RecallQuery {
            action_kinds: vec![ActionKind::RaisePoolLimit],
            ..Default::default()
        },
    ] {
        let res = recall(&app.memory, &q).await.unwrap();
        assert!(res.results.iter().all(|x| x.memory.id != m.id), "{q:?}");
    }
    let dead_ends = incidentmind::store::memory::dead_ends_for(
        &app.pool,
        ActionKind::RaisePoolLimit,
        "payments-db",
        &["connection_pool_exhausted".to_string()],
        &[],
        12,
    )
    .await
    .unwrap();
    assert!(dead_ends.is_empty());
    // Still readable for audit.
    let v: Value = app
        .get(&app.responder, &format!("/api/v1/memories/{}", m.id))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["validation"], "retracted");
    assert_eq!(v["history"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn inferences_need_sources_and_decisions_cannot_rest_on_decisions_only() {
    let app = spawn_app().await;
    let mut r = NewRecord::new(MemoryKind::Hypothesis, "the pool is too small", "rita");
    r.epistemic_type = EpistemicType::Inference;
    let e = msvc::write(&app.db, r.clone()).await.unwrap_err();
    assert!(e.to_string().contains("must cite"), "{e}");
    r.cites = vec![9999];
    assert!(
        msvc::write(&app.db, r.clone())
            .await
            .unwrap_err()
            .to_string()
            .contains("does not exist")
    );
    let obs = msvc::write(
        &app.db,
        NewRecord::new(MemoryKind::Observation, "pool wait p99 4s", "rita"),
    )
    .await
    .unwrap();
    r.cites = vec![obs.id];
    let inf = msvc::write(&app.db, r).await.unwrap();
    assert_eq!(inf.sources, vec![obs.id], "retrieval returns the sources");
    let mut d1 = NewRecord::new(MemoryKind::Recommendation, "raise the pool", "rita");
    d1.cites = vec![inf.id];
    let d1 = msvc::write(&app.db, d1).await.unwrap();
    let mut d2 = NewRecord::new(MemoryKind::Recommendation, "approve it", "rita");
    d2.cites = vec![d1.id];
    assert!(
        msvc::write(&app.db, d2)
            .await
            .unwrap_err()
            .to_string()
            .contains("only decisions")
    );
}

#[tokio::test]
async fn secrets_are_redacted_before_they_are_stored() {
    let app = spawn_app().await;
    let text = "pool exhausted; DSN postgres://app:hunter2secret@10.0.0.5/pay, paged jane.doe@example.com, token Bearer abcdef1234567890abcdef";
    let m = write(
        &app.db,
        rec(MemoryKind::ServiceFact, text, "payments-db", &[]),
    )
    .await;
    for secret in [
        "hunter2secret",
        "jane.doe@example.com",
        "abcdef1234567890abcdef",
    ] {
        assert!(!m.text.contains(secret), "{} leaked: {}", secret, m.text);
    }
    assert!(
        m.text.contains("10.0.0.5"),
        "private addresses kept: {}",
        m.text
    );
    let rows: Vec<String> = sqlx::query_scalar("SELECT text FROM records")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert!(rows.iter().all(|t| !t.contains("hunter2secret")));
}

#[tokio::test]
async fn notes_and_runbooks_are_written_versioned_and_recalled_by_scope() {
    let app = spawn_app().await;
    let res = app
        .post_json(&app.responder, "/api/v1/memories", json!({
            "kind": "runbook", "service": "payments-api", "title": "Pool exhaustion on payments",
            "steps": "Check pool wait vs request rate\nLook for a leak in the last deploy\nRestart only as a stopgap",
            "common_causes": "connection leak\nslow queries", "failure_modes": ["connection_pool_exhausted"]
        }))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let v1: Value = res.json().await.unwrap();
    assert_eq!(v1["data"]["version"], 1);
    let res = app
        .post_json(&app.responder, "/api/v1/memories", json!({
            "kind": "runbook", "service": "payments-api", "title": "Pool exhaustion on payments",
            "steps": "Compare pool wait with request rate\nBisect the last deploy for a leak", "replaces": v1["id"]
        }))
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    let v2: Value = res.json().await.unwrap();
    assert_eq!(v2["data"]["version"], 2);
    let old: Value = app
        .get(&app.responder, &format!("/api/v1/memories/{}", v1["id"]))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(old["validation"], "superseded");
    assert_eq!(old["superseded_by"], v2["id"]);

    let res = app
        .post_json(
            &app.responder,
            "/api/v1/memories",
            json!({"kind": "dependency", "service": "checkout", "depends_on": "payments-api"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    // Scope recall through the graph: checkout → payments-api's runbook.
    let v: Value = app
        .get(&app.responder, "/api/v1/recall?service=checkout&k=5")
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<i64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert!(ids.contains(&v2["id"].as_i64().unwrap()), "{v}");
    let first = &v["results"][0];
    for field in [
        "id",
        "kind",
        "epistemic_type",
        "text",
        "incident_id",
        "validation",
        "score",
        "why",
    ] {
        assert!(first.get(field).is_some(), "{field} in {first}");
    }
    // Bad kinds are refused with a message.
    let (status, _, message) = error_of(
        app.post_json(
            &app.responder,
            "/api/v1/memories",
            json!({"kind": "lesson", "service": "x", "text": "t"}),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(message.contains("incident workflow"), "{message}");
}

#[tokio::test]
async fn only_reviewers_retract_and_every_change_is_audited() {
    let app = spawn_app().await;
    let m = write(
        &app.db,
        rec(
            MemoryKind::ServiceFact,
            "payments-api runs 12 pods",
            "payments-api",
            &[],
        ),
    )
    .await;
    let path = format!("/api/v1/memories/{}/retract", m.id);
    let res = app
        .post_json(&app.responder, &path, json!({"reason": "outdated"}))
        .await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = app
        .post_json(&app.reviewer, &path, json!({"reason": ""}))
        .await;
    assert_eq!(res.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let res = app
        .post_json(&app.reviewer, &path, json!({"reason": "outdated"}))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let res = app
        .post_json(&app.reviewer, &path, json!({"reason": "again"}))
        .await;
    assert_eq!(res.status(), StatusCode::CONFLICT);
    let actions: Vec<String> = sqlx::query_scalar(
        "SELECT action FROM audit_log WHERE action LIKE 'memory.%' ORDER BY seq",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(actions, ["memory.write", "memory.retract"]);
    let listed: Value = app
        .get(&app.responder, "/api/v1/memories?validation=retracted")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["memories"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_audit_chain_holds_after_1000_operations() {
    use incidentmind::store::audit::{Verification, verify};
    let app = spawn_app().await;
    // The test users' first API tokens are audited already.
    let Verification::Intact { entries: base } = verify(&app.pool).await.unwrap() else {
        panic!("a fresh chain is intact");
    };
    for i in 0..1000 {
        write(
            &app.db,
            rec(
                MemoryKind::ServiceFact,
                &format!("fact number {i}"),
                "svc",
                &[],
            ),
        )
        .await;
    }
    assert_eq!(
        verify(&app.pool).await.unwrap(),
        Verification::Intact {
            entries: base + 1000
        }
    );
    crate::helpers::drop_audit_update_guard(&app.pool).await;
    sqlx::query("UPDATE audit_log SET detail = '{}' WHERE seq = 500")
        .execute(&app.pool)
        .await
        .unwrap();
    assert!(matches!(
        verify(&app.pool).await.unwrap(),
        Verification::Broken { seq: 500, .. }
    ));
}

#[tokio::test]
async fn export_then_import_into_an_empty_database_round_trips_exactly() {
    let app = spawn_app().await;
    seed_distractors(&app.db).await;
    let obs = msvc::write(
        &app.db,
        NewRecord::new(MemoryKind::Observation, "pool wait climbing", "rita"),
    )
    .await
    .unwrap();
    let mut inf = NewRecord::new(MemoryKind::RootCause, "a leak", "rita");
    inf.cites = vec![obs.id];
    let inf = msvc::write(&app.db, inf).await.unwrap();
    msvc::retract(&app.pool, "victor", 1, "test").await.unwrap();
    let first = msvc::export(&app.pool).await.unwrap();
    assert_eq!(first.lines().count(), 15);

    let other = spawn_app().await;
    let done = msvc::import(&other.pool, "test", &first, false)
        .await
        .unwrap();
    assert_eq!(done.imported, 15);
    let second = msvc::export(&other.pool).await.unwrap();
    assert_eq!(first, second);
    let back = incidentmind::store::memory::record(&other.pool, inf.id)
        .await
        .unwrap();
    assert_eq!(back.sources, vec![obs.id]);
    // Retracted stays out of recall after import.
    let res = recall(
        &other.memory,
        &RecallQuery {
            text: "TLS certificate edge proxy expired".into(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(res.results.iter().all(|r| r.memory.id != 1));
    // Recall ranks on records_rank, kept by triggers: after writes, a retraction and an import
    // that restores ids, it mirrors records row for row.
    for a in [&app, &other] {
        assert_eq!(rank_mismatches(&a.pool).await, 0);
        assert_eq!(a.count("records").await, a.count("records_rank").await);
    }
}

#[tokio::test]
async fn a_memory_holding_a_supersession_exports_and_imports_whole() {
    // Export writes records in id order, so the superseded (older) record comes before the one
    // that superseded it: the import must not need the newer one to exist yet.
    let app = spawn_app().await;
    let old = write(
        &app.db,
        rec(
            MemoryKind::ServiceFact,
            "ledger-api reads from replica db-2",
            "ledger-api",
            &[],
        ),
    )
    .await;
    let new = write(
        &app.db,
        rec(
            MemoryKind::ServiceFact,
            "ledger-api reads from replica db-5 since the storage move",
            "ledger-api",
            &[],
        ),
    )
    .await;
    msvc::supersede(&app.pool, "victor", old.id, new.id, "replica moved")
        .await
        .unwrap();
    let first = msvc::export(&app.pool).await.unwrap();

    let other = spawn_app().await;
    let done = msvc::import(&other.pool, "test", &first, false)
        .await
        .expect("an export with a supersession imports");
    assert_eq!(done.imported, first.lines().count());
    let back = incidentmind::store::memory::record(&other.pool, old.id)
        .await
        .unwrap();
    assert_eq!(back.superseded_by, Some(new.id));
    assert_eq!(back.validation, Validation::Superseded);
    assert_eq!(msvc::export(&other.pool).await.unwrap(), first);
}

/// Rows where `records_rank` differs from `records` (or is missing on either side).
async fn rank_mismatches(pool: &sqlx::AnyPool) -> i64 {
    sqlx::query_scalar(
        "WITH r AS (SELECT id, kind, validation, incident_id, created_at, importance,
                           evidence_count,
                           CAST(json_extract(data, '$.consolidated_into') AS BIGINT)
                      FROM records),
              k AS (SELECT * FROM records_rank)
         SELECT (SELECT count(*) FROM (SELECT * FROM r EXCEPT SELECT * FROM k) AS a)
              + (SELECT count(*) FROM (SELECT * FROM k EXCEPT SELECT * FROM r) AS b)",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_bad_import_line_is_reported_by_number_and_nothing_is_imported() {
    let app = spawn_app().await;
    seed_distractors(&app.db).await;
    let mut lines: Vec<String> = msvc::export(&app.pool)
        .await
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines[3] = lines[3].replace("\"root_cause\"", "\"gossip\"");
    lines.insert(5, "{not json".into());
    let other = spawn_app().await;
    let Err(msvc::ImportError::BadLines(bad)) =
        msvc::import(&other.pool, "test", &lines.join("\n"), false).await
    else {
        panic!("bad lines are reported");
    };
    let numbers: Vec<usize> = bad.iter().map(|b| b.line).collect();
    assert_eq!(numbers, vec![4, 6]);
    assert_eq!(other.count("records").await, 0);
}

#[tokio::test]
async fn an_incidents_own_observations_never_crowd_the_structured_keys() {
    let app = spawn_app().await;
    let past = app.open_incident("Ledger lag", "ledger-writer").await;
    let open = app.open_incident("Ledger lag again", "ledger-writer").await;
    // The past lesson, keyed by service and failure mode, words that share nothing with the query.
    let mut lesson = rec(
        MemoryKind::Lesson,
        "ALWAYS: cap batch bytes\nBECAUSE: it happened\nSCOPE: writers\nSEVERITY: high",
        "ledger-writer",
        &["queue_lag"],
    );
    lesson.incident_id = Some(past.clone());
    let lesson = write(&app.db, lesson).await;
    // A busy open incident: 400 newer observations on the same keys.
    for i in 0..400 {
        let mut o = rec(
            MemoryKind::Observation,
            &format!("partition {i} behind"),
            "ledger-writer",
            &["queue_lag"],
        );
        o.incident_id = Some(open.clone());
        msvc::write(&app.db, o).await.unwrap();
    }
    let res = recall(
        &app.memory,
        &RecallQuery {
            text: "zzz".into(),
            service: Some("ledger-writer".into()),
            failure_modes: vec!["queue_lag".into()],
            exclude_incident: Some(open.clone()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let ids: Vec<i64> = res.results.iter().map(|r| r.memory.id).collect();
    assert_eq!(ids, vec![lesson.id], "{:?}", res.notice);
    assert!(
        res.results[0].why.lists.contains(&"scope"),
        "found by the structured keys: {:?}",
        res.results[0].why.lists
    );
}

/// The value of the database's recall generation counter (migration 0006).
async fn generation(pool: &sqlx::AnyPool) -> i64 {
    sqlx::query_scalar("SELECT value FROM recall_generation")
        .fetch_one(pool)
        .await
        .unwrap()
}

fn ids_of(res: &incidentmind::memory::recall::RecallResult) -> Vec<i64> {
    res.results.iter().map(|r| r.memory.id).collect()
}

#[tokio::test]
async fn recall_sees_every_change_of_memory_made_by_another_process_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let path = path.to_str().unwrap();
    let a = incidentmind::store::Db::from(incidentmind::store::connect(path).await.unwrap());
    let ma = incidentmind::memory::Memory::new(a.clone(), None);
    let b = incidentmind::store::Db::from(incidentmind::store::connect(path).await.unwrap());
    let by_text = RecallQuery {
        text: "ledger writer batch bytes".into(),
        ..Default::default()
    };
    let by_scope = RecallQuery {
        service: Some("ledger-writer".into()),
        failure_modes: vec!["consumer_lag".into()],
        ..Default::default()
    };
    let first = write(
        &a,
        rec(
            MemoryKind::RootCause,
            "Ledger writer batch bytes exceeded the broker limit",
            "ledger-writer",
            &["consumer_lag"],
        ),
    )
    .await;
    // Loads (and caches) the index of this generation.
    assert_eq!(
        ids_of(&recall(&ma, &by_text).await.unwrap()),
        vec![first.id]
    );

    // Working records do not move the generation; durable ones do.
    let before = generation(&a).await;
    msvc::write(
        &b,
        NewRecord::new(MemoryKind::Observation, "ledger writer batch bytes", "rita"),
    )
    .await
    .unwrap();
    assert_eq!(generation(&a).await, before);
    let second = msvc::write(
        &b,
        rec(
            MemoryKind::Lesson,
            "ALWAYS: cap ledger writer batch bytes\nBECAUSE: it happened\nSCOPE: ledger-writer\nSEVERITY: high",
            "ledger-writer",
            &["consumer_lag"],
        ),
    )
    .await
    .unwrap();
    assert!(generation(&a).await > before);

    // Written through the other pool: found through this one, by text and by scope.
    for q in [&by_text, &by_scope] {
        let mut ids = ids_of(&recall(&ma, q).await.unwrap());
        ids.sort();
        assert_eq!(ids, vec![first.id, second.id], "{q:?}");
    }
    // Retracted through the other pool: gone from this one on every path.
    msvc::retract(&b, "victor", first.id, "wrong service")
        .await
        .unwrap();
    for q in [&by_text, &by_scope] {
        assert_eq!(
            ids_of(&recall(&ma, q).await.unwrap()),
            vec![second.id],
            "{q:?}"
        );
    }
}

#[tokio::test]
async fn a_database_recreated_at_the_same_path_is_not_served_from_the_old_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("again.db");
    let path_str = path.to_str().unwrap();
    let scope = |s: &str| RecallQuery {
        service: Some(s.into()),
        ..Default::default()
    };
    let pool = incidentmind::store::Db::from(incidentmind::store::connect(path_str).await.unwrap());
    let old = msvc::write(
        &pool,
        rec(
            MemoryKind::Symptom,
            "disk full",
            "log-shipper",
            &["disk_full"],
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        ids_of(
            &recall(
                &incidentmind::memory::Memory::new(pool.clone(), None),
                &scope("log-shipper")
            )
            .await
            .unwrap()
        ),
        vec![old.id]
    );
    pool.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path_str}{suffix}"));
    }
    // Same path, same number of writes, so the same generation value: a new epoch tells them
    // apart.
    let pool = incidentmind::store::Db::from(incidentmind::store::connect(path_str).await.unwrap());
    let new = msvc::write(
        &pool,
        rec(
            MemoryKind::Lesson,
            "ALWAYS: rotate",
            "edge-proxy",
            &["tls_certificate_expired"],
        ),
    )
    .await
    .unwrap();
    assert_eq!(new.id, old.id);
    assert!(
        recall(
            &incidentmind::memory::Memory::new(pool.clone(), None),
            &scope("log-shipper")
        )
        .await
        .unwrap()
        .results
        .is_empty()
    );
    let found = recall(
        &incidentmind::memory::Memory::new(pool.clone(), None),
        &scope("edge-proxy"),
    )
    .await
    .unwrap();
    assert_eq!(ids_of(&found), vec![new.id]);
    assert_eq!(found.results[0].memory.kind, MemoryKind::Lesson);
}

#[tokio::test]
async fn a_word_in_more_records_than_the_term_budget_searches_only_its_newest_matches() {
    let app = spawn_app().await;
    // 1,300 symptoms that all say "checkout latency", oldest first.
    let at = jiff::Timestamp::now();
    let rows: Vec<(NewRecord, jiff::Timestamp)> = (0..1_300)
        .map(|i| {
            let r = rec(
                MemoryKind::Symptom,
                &format!("checkout latency reading {i}"),
                "checkout-api",
                &[],
            );
            (r, at)
        })
        .collect();
    let mut tx = incidentmind::store::begin_write(&app.pool).await.unwrap();
    let ids = incidentmind::store::memory::insert_bulk(&mut tx, &rows)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let q = RecallQuery {
        text: "checkout latency".into(),
        k: 100,
        ..Default::default()
    };
    // Both words are in every record: the search keeps one (and the synonyms found nowhere)
    // and looks at its 1,000 newest matches (the term budget) only.
    let search = incidentmind::memory::recall::fts_search(&app.memory, &q)
        .await
        .unwrap();
    assert!(search.expr.contains("\"checkout\""), "{}", search.expr);
    assert_eq!(search.min_rowid, ids[300]);
    let res = recall(&app.memory, &q).await.unwrap();
    assert_eq!(res.results.len(), 60);
    assert!(res.results.iter().all(|r| r.memory.id >= ids[300]));
}

#[tokio::test]
async fn recall_over_the_api_is_a_read_and_writes_no_row() {
    let app = spawn_app().await;
    let res = app
        .post_json(
            &app.reviewer,
            "/api/v1/memories",
            json!({"kind": "service_fact", "service": "checkout",
                   "text": "checkout keeps its sessions in redis"}),
        )
        .await;
    assert_eq!(res.status(), StatusCode::CREATED);
    // A token's first use in a minute records its last use (issue #54): done before.
    assert_eq!(
        app.get(&app.responder, "/api/v1/me").await.status(),
        StatusCode::OK
    );
    for _ in 0..100 {
        let used: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM api_tokens WHERE last_used_at IS NOT NULL")
                .fetch_one(&app.pool)
                .await
                .unwrap();
        if used == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let before = crate::helpers::dump_all_tables(&app.pool).await;
    let res = app
        .get(&app.responder, "/api/v1/recall?q=checkout%20sessions&k=5")
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let after = crate::helpers::dump_all_tables(&app.pool).await;
    assert_eq!(before, after, "GET /api/v1/recall changed the database");
}

/// A dead-end warning cites at most `limit` past failures of the action: those of the similar
/// incidents first, however old, then the newest that share the service or a failure mode;
/// failures that share nothing, and other actions' failures, are never read.
#[tokio::test]
async fn dead_ends_are_capped_similar_incidents_first_then_the_newest() {
    let app = spawn_app().await;
    let past = app.open_incident("Ledger writes stall", "ledger-db").await;
    let failure = |text: String, service: &str, tags: &[&str], incident: Option<&str>| {
        let mut r = rec(MemoryKind::RemediationFailure, &text, service, tags);
        r.action_kind = Some(ActionKind::RestartService);
        r.incident_id = incident.map(str::to_string);
        r
    };
    let similar = msvc::write(
        &app.db,
        failure(
            "restarting ledger-db changed nothing".into(),
            "ledger-db",
            &[],
            Some(past.as_str()),
        ),
    )
    .await
    .unwrap();
    let unrelated = msvc::write(
        &app.db,
        failure(
            "restarting mail-relay changed nothing".into(),
            "mail-relay",
            &[],
            None,
        ),
    )
    .await
    .unwrap();
    let by_mode = msvc::write(
        &app.db,
        failure(
            "restarting the cache did not help".into(),
            "edge-cache",
            &["memory_leak"],
            None,
        ),
    )
    .await
    .unwrap();
    let mut same_service = Vec::new();
    for n in 0..14 {
        let r = failure(
            format!("restart number {n} of search-api did not help"),
            "search-api",
            &[],
            None,
        );
        same_service.push(msvc::write(&app.db, r).await.unwrap().id);
    }
    let mut other_action = rec(
        MemoryKind::RemediationFailure,
        "rolling back search-api did not help",
        "search-api",
        &[],
    );
    other_action.action_kind = Some(ActionKind::RollbackDeploy);
    let other_action = msvc::write(&app.db, other_action).await.unwrap();

    let got = incidentmind::store::memory::dead_ends_for(
        &app.pool,
        ActionKind::RestartService,
        "search-api",
        &["memory_leak".to_string()],
        std::slice::from_ref(&past),
        12,
    )
    .await
    .unwrap();
    let ids: Vec<i64> = got.iter().map(|r| r.id).collect();
    let mut want = vec![similar.id];
    want.extend(same_service[3..].iter().copied());
    assert_eq!(
        ids, want,
        "the similar incident's, then the 11 newest, oldest first"
    );
    assert!(!ids.contains(&unrelated.id) && !ids.contains(&other_action.id));
    assert!(!ids.contains(&by_mode.id), "older than the newest eleven");

    let few = incidentmind::store::memory::dead_ends_for(
        &app.pool,
        ActionKind::RestartService,
        "nothing-shared",
        &["memory_leak".to_string()],
        &[],
        12,
    )
    .await
    .unwrap();
    assert_eq!(
        few.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![by_mode.id]
    );
}

#[tokio::test]
async fn a_contradicted_lesson_is_marked_and_ranked_below_the_one_that_replaced_it() {
    let app = spawn_app().await;
    let old = write(
        &app.db,
        rec(
            MemoryKind::Lesson,
            "When the ledger replica falls behind, restart the ledger replica to clear the lag",
            "ledger-db",
            &[],
        ),
    )
    .await;
    let new = write(
        &app.db,
        rec(
            MemoryKind::Lesson,
            "A restart only hides it: throttle the batch writers until the replica catches up",
            "ledger-db",
            &[],
        ),
    )
    .await;
    let mut tx = incidentmind::store::begin_write(&app.pool).await.unwrap();
    incidentmind::store::memory::mark_contradicted(&mut tx, old.id, new.id, "rita", "later")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let v: Value = app
        .get(
            &app.responder,
            "/api/v1/recall?q=ledger%20replica%20falls%20behind%20restart&k=5",
        )
        .await
        .json()
        .await
        .unwrap();
    let results = v["results"].as_array().unwrap();
    let position = |id: i64| {
        results
            .iter()
            .position(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("MEM-{id} recalled in {v}"))
    };
    assert!(position(new.id) < position(old.id), "{v}");
    let marks = &results[position(old.id)]["marks"];
    assert!(
        marks
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "contradicted"),
        "{marks}"
    );
}

/// Where a note about the service on call ranks in recall (1-based), with the `service_notes`
/// mechanism on and off: the note matches the question by its own words while every learned
/// incident of the sample history competes with it.
#[tokio::test]
async fn a_fact_about_the_service_on_call_is_not_buried_under_other_services_incidents() {
    let app = spawn_app().await;
    incidentmind::services::sample::load_history(&app.memory)
        .await
        .expect("history");
    let fact = app
        .post_json(
            &app.reviewer,
            "/api/v1/memories",
            json!({"kind": "service_fact", "service": "payments-api",
                   "text": "payments-api reads card balances from the replica pgr-7, not the primary, since the storage move"}),
        )
        .await;
    assert_eq!(fact.status(), StatusCode::CREATED);
    let fact: Value = fact.json().await.unwrap();
    let fact_id = fact["id"].as_i64().unwrap();
    let question = "payments-api balance lookups time out; replica pgr-7 lags the primary by minutes after a database failover";
    let v: Value = app
        .get(
            &app.responder,
            &format!(
                "/api/v1/recall?q={}&service=payments-api&k=10",
                url::form_urlencoded::byte_serialize(question.as_bytes()).collect::<String>()
            ),
        )
        .await
        .json()
        .await
        .unwrap();
    let results = v["results"].as_array().unwrap();
    let on = results
        .iter()
        .position(|r| r["id"] == fact_id)
        .map(|p| p + 1)
        .unwrap_or_else(|| panic!("the fact is not recalled: {v}"));
    assert!(on <= 3, "the fact ranks {on}: {}", results[on - 1]);
    assert!(
        results[on - 1]["why"]["lists"]
            .as_array()
            .unwrap()
            .contains(&json!("service_note")),
        "{v}"
    );
    // The ablation: the same question without the mechanism.
    let without = incidentmind::memory::Memory::with_tuning(
        app.pool.clone(),
        None,
        incidentmind::memory::RecallTuning::parse_off("service_notes").unwrap(),
    );
    let res = recall(
        &without,
        &RecallQuery {
            text: question.into(),
            service: Some("payments-api".into()),
            k: 50,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let off = res
        .results
        .iter()
        .position(|r| r.memory.id == fact_id)
        .map_or(51, |p| p + 1);
    println!("service fact rank: {on} with service_notes, {off} without (51: not in the first 50)");
    assert!(
        off > on,
        "without the mechanism it ranks {off}, with it {on}"
    );
}
