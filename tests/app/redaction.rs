//! One redaction policy at every boundary: a corpus of fake secrets in
//! more than forty shapes goes in through every input path — incident title and description,
//! evidence as JSON, raw text, multipart upload and the page form, an Alertmanager webhook (with
//! the secrets inside escaped JSON strings), a note, a proposed action, a verdict, a rejection,
//! the resolution, the post-mortem draft and edit, Learn — with a model and an embeddings
//! endpoint on loopback. Then every table, every page, the Markdown export and every request the
//! model server received are searched: no secret anywhere, and the four-part versions in the
//! same corpus are still there, in the same form in every view.

use std::sync::Arc;
use std::time::Duration;

use incidentmind::analyst::llm::{LlmAnalyst, LlmConfig};
use incidentmind::memory::embeddings::{self, EmbeddingConfig, OpenAiEmbedder};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{CapturingModel, TestApp, dump_all_tables, spawn_app_with_models};

/// (line carrying the secret, the secret). All values are made up for this test.
const CORPUS: &[(&str, &str)] = &[
    (
        "db postgres://orders_app:Vx9G8m6mBwVeOB@db.orders.internal:5432/orders",
        "Vx9G8m6mBwVeOB",
    ),
    (
        "stats mongodb+srv://reporter:Qm4O64rB7HcUfK@cluster0.example.net/stats",
        "Qm4O64rB7HcUfK",
    ),
    (
        "cache url redis://:Hc7NDkKHhVDQtH@cache-1:6379/0",
        "Hc7NDkKHhVDQtH",
    ),
    (
        "queue amqp://queue:Zr51MrvJgzh9wx@mq:5672/vhost",
        "Zr51MrvJgzh9wx",
    ),
    (
        "jdbc:mysql://db:3306/app?user=app&password=Jt3Kb1I3lES2xB",
        "Jt3Kb1I3lES2xB",
    ),
    (
        "Server=tcp:sql1,1433;Database=pay;User Id=svc;Password=Kf6Pf3n1IP9QDh;",
        "Kf6Pf3n1IP9QDh",
    ),
    (
        "AKIA key AKIAMD7WLZWXX7PUSP3R used from ci",
        "AKIAMD7WLZWXX7PUSP3R",
    ),
    (
        "aws_secret_access_key = 6QBGex6vURLfhbzHAV57i8ZtPTNBHeQr1uBnq1ES",
        "6QBGex6vURLfhbzHAV57i8ZtPTNBHeQr1uBnq1ES",
    ),
    (
        "maps key AIzadOHDXjl4bZbFhPuXtAdCnJY8CRxhEmHTl1s",
        "AIzadOHDXjl4bZbFhPuXtAdCnJY8CRxhEmHTl1s",
    ),
    (
        "oauth ya29.Ec8UWMFKcJUJ3O9X6K8hnsm8oZA2kQ refreshed",
        "ya29.Ec8UWMFKcJUJ3O9X6K8hnsm8oZA2kQ",
    ),
    (
        "client secret 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",
        "LtaW4g3SExuRcEYcfW40QsKKrjip",
    ),
    (
        "slack xoxb-7985007765-098165749641-GsozwXqD3XNF1fln0WfQ2AAP posted",
        "GsozwXqD3XNF1fln0WfQ2AAP",
    ),
    (
        "hook https://hooks.slack.com/services/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",
        "8skoB9Mp38kfxBsbk1wbcInZ",
    ),
    (
        "pushed with ghp_nxs9O0VI2GYXv7Oq96AK18A6sMoAreGQyfSs",
        "nxs9O0VI2GYXv7Oq96AK18A6sMoAreGQyfSs",
    ),
    (
        "fine-grained 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",
        "wTkn9cA6vtWkIgoIBb91NHPpZJHepSkWb57DZwSDJ1LVdpL3ztxL8CoRdaN",
    ),
    (
        "app token ghs_nXwXXGH6lxf3826K85W2NthW0ZuwuwXqmMGc",
        "nXwXXGH6lxf3826K85W2NthW0ZuwuwXqmMGc",
    ),
    ("gitlab glpat-7ZwTBNzIkh3gm1ICBnIS", "7ZwTBNzIkh3gm1ICBnIS"),
    (
        "OPENAI sk-proj-EaWC9j6YCQpEToJ6U5zEcA78v1GSjyAcm6eEhrE8",
        "EaWC9j6YCQpEToJ6U5zEcA78v1GSjyAcm6eEhrE8",
    ),
    (
        "anthropic sk-ant-api03-8Wy0G5bBFRXf0PhHpN3Yb6clmDLpHvZUhWHCO2PW",
        "8Wy0G5bBFRXf0PhHpN3Yb6clmDLpHvZUhWHCO2PW",
    ),
    (
        "stripe sk_live_BSzKgdiiqsAdDq3rdvakEREA",
        "BSzKgdiiqsAdDq3rdvakEREA",
    ),
    (
        "stripe hook whsec_N4C67nMZdsBDuXRn5pr8mCVV",
        "N4C67nMZdsBDuXRn5pr8mCVV",
    ),
    (
        "sendgrid 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",
        "M7o49sguwMtiM3E555kvwc11SB5BpQNmRlioplqfdhg",
    ),
    (
        "npm token npm_tlLBQFCBP44v3UFKonTrf3b9lrQfVZHGuP2W",
        "tlLBQFCBP44v3UFKonTrf3b9lrQfVZHGuP2W",
    ),
    (
        "hf hf_a6eXBpXdivPpzYCL293I78fHBR7Pugcy4H",
        "a6eXBpXdivPpzYCL293I78fHBR7Pugcy4H",
    ),
    (
        "do dop_v1_c53c54be8b856fb27eb51274cc56f2dbee9f442b4d6b4124f5546fe61028bd88",
        "c53c54be8b856fb27eb51274cc56f2dbee9f442b4d6b4124f5546fe61028bd88",
    ),
    (
        "vault hvs.dc49fKuwecuf3LlvaGDXrHqV",
        "dc49fKuwecuf3LlvaGDXrHqV",
    ),
    (
        "databricks dapid3f3bd48c851f4c72a01713b491c7125",
        "d3f3bd48c851f4c72a01713b491c7125",
    ),
    (
        "Authorization: Basic c3ZjOjdtRUxFbEQ2V1NNWA==",
        "c3ZjOjdtRUxFbEQ2V1NNWA",
    ),
    (
        "Authorization: Bearer eUNC5uaCQR3ARhoOOw8VWXlaxb4H",
        "eUNC5uaCQR3ARhoOOw8VWXlaxb4H",
    ),
    (
        "Cookie: theme=light; session_id=Ul5oZ4EoZizhC2cbpLMyT4",
        "Ul5oZ4EoZizhC2cbpLMyT4",
    ),
    (
        "Set-Cookie: auth=fR7Rf3jf54nMrBqG5YgJ; Path=/; HttpOnly",
        "fR7Rf3jf54nMrBqG5YgJ",
    ),
    ("api_key=4MwWCCC6m3BvEWlDzk", "4MwWCCC6m3BvEWlDzk"),
    ("client_secret: 3Fog2JxJdDTa7qNb5I", "3Fog2JxJdDTa7qNb5I"),
    (
        r#"{"db_password": "c7J5Q8WaPl9djb9I", "user": "svc"}"#,
        "c7J5Q8WaPl9djb9I",
    ),
    (
        "session 4b42e48a5298c7c4b76b33289d6ff548 expired",
        "4b42e48a5298c7c4b76b33289d6ff548",
    ),
    (
        "encryption key: 80a35aad14b26b09c75ca64f23044942",
        "80a35aad14b26b09c75ca64f23044942",
    ),
    ("psql --password MD5wNHlTKt9LUg -h db", "MD5wNHlTKt9LUg"),
    (
        "GRANT ALL ON pay.* TO app IDENTIFIED BY '1n25R64Et6hQFj';",
        "1n25R64Et6hQFj",
    ),
    (
        "https://acct.blob.core.windows.net/c/f?sv=2024&sig=9Khx6qxwvC5AZpluYRHQBOZWVYB6vL%3D",
        "9Khx6qxwvC5AZpluYRHQBOZWVYB6vL",
    ),
    (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=aXNUQlBUdGp6Znc4bkNPOGV5VFBtc2xBVkFjSGZwTzJlQjdPWGVKeA==;",
        "aXNUQlBUdGp6Znc4bkNPOGV5VFBtc2xBVkFjSGZwTzJlQjdPWGVKeA",
    ),
    (
        "s3 https://b.s3.amazonaws.com/k?X-Amz-Signature=0ab9c231fbcf8bbbd8c45a264501752455b794823461191f67465a5f6e9e8edf",
        "0ab9c231fbcf8bbbd8c45a264501752455b794823461191f67465a5f6e9e8edf",
    ),
    (
        "paged oncall.lead.n3gxk@orders.example.com",
        "oncall.lead.n3gxk@orders.example.com",
    ),
    (
        "JWT eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJvcmRlcnMtNm1uQmdqIiwiZXhwIjoxOTAwMDAwMDAwfQ.Z-UfQhYccRjwmIpSiTZGECsChLw2j3VunCLd10jGcUR",
        "Z-UfQhYccRjwmIpSiTZGECsChLw2j3VunCLd10jGcUR",
    ),
    ("client 198.51.100.23 hammered the API", "198.51.100.23"),
    (
        r#"annotation {\"secret\":\"8qjwnKADcYLFQAHq\"}"#,
        "8qjwnKADcYLFQAHq",
    ),
];

/// Multi-line shapes: PEM blocks, a Kubernetes Secret (JSON and YAML), a `.env` file.
const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\nhddn219nfwghOS6MarE7H6DpztPmEZXSpWXxPZkQUvldS5Lczh22dgugri/DCkdd\n-----END RSA PRIVATE KEY-----\n-----BEGIN OPENSSH PRIVATE KEY-----\nJxBTU3xtLS+hRrQcV7LY5p3s2X35o+hkMlYZZXa8gexWFGD64Z4d2VzP02xDE6lf\n-----END OPENSSH PRIVATE KEY-----\n-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nWfynMU3+KRHqi0A+/qVO0raOppWAgsmqPPXVWqMBcJ22Jm4CJn482iMojsHWLHc7\n-----END PGP PRIVATE KEY BLOCK-----\n";
const K8S_JSON: &str = r#"{"apiVersion":"v1","kind":"SecretList","items":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"orders-signing","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"blob\":\"azhzLVV1NWpDQkdXU3l5N1Zz\"},\"kind\":\"Secret\",\"metadata\":{\"name\":\"orders-signing\"}}\n"}},"data":{"blob":"azhzLVV1NWpDQkdXU3l5N1Zz","owner":"azhzLWFYNjBQYUNjdElhbUFR"},"type":"Opaque"}]}"#;
const K8S_YAML: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cache-auth\ndata:\n  first: azhzLVlOWFV0VjVtOXJrTkRQ\n  second: azhzLXF1d3dvcnprNXVwdWtJ\nstringData:\n  notes: |\n    rotate-me-2HPyxtLIfCL8FkkJ\ntype: Opaque\n";
const ENV: &str = "# orders service\nAPP_NAME=orders\nAPP_RELEASE=2.14.0.1\nORDERS_SIGNING=mdVxf7z1gp4Nt6zC\nPAYMENT_PROVIDER_HANDLE=jslBEMpIwI26tR8l\nexport LEDGER_PASSPHRASE=\"Fx9ufTIdBvf5P1Ts\"\nDEBUG=false\n";
const MULTI_SECRETS: &[&str] = &[
    "hddn219nfwghOS6MarE7H6DpztPmEZXSpWXxPZkQUvldS5Lczh22dgugri",
    "JxBTU3xtLS+hRrQcV7LY5p3s2X35o+hkMlYZZXa8gexWFGD64Z4d2VzP02xDE6lf",
    "WfynMU3+KRHqi0A+/qVO0raOppWAgsmqPPXVWqMBcJ22Jm4CJn482iMojsHWLHc7",
    "azhzLVV1NWpDQkdXU3l5N1Zz",
    "azhzLWFYNjBQYUNjdElhbUFR",
    "azhzLVlOWFV0VjVtOXJrTkRQ",
    "azhzLXF1d3dvcnprNXVwdWtJ",
    "2HPyxtLIfCL8FkkJ",
    "mdVxf7z1gp4Nt6zC",
    "jslBEMpIwI26tR8l",
    "Fx9ufTIdBvf5P1Ts",
];

/// Four-part versions: not addresses, kept everywhere.
const VERSIONS: &[&str] = &["svc-d 2.14.0.1", "checkout 3.1.0.12", "version 10.4.0.2"];

fn secrets() -> Vec<&'static str> {
    CORPUS
        .iter()
        .map(|(_, s)| *s)
        .chain(MULTI_SECRETS.iter().copied())
        .collect()
}

fn corpus_text() -> String {
    let mut t = String::from("2026-12-01T09:00:00Z ERROR orders timed out talking to the ledger\n");
    for (line, _) in CORPUS {
        t.push_str("2026-12-01T09:00:01Z WARN ");
        t.push_str(line);
        t.push('\n');
    }
    for v in VERSIONS {
        t.push_str(&format!("2026-12-01T09:00:02Z INFO deployed {v}\n"));
    }
    t
}

const ANALYSIS: &str = r#"{"hypotheses": [{"statement": "The ledger pool is exhausted", "confidence": "medium", "cites": ["OBS-1"], "prior_incidents": []}],
 "actions": [{"kind": "rollback_deploy", "target": "orders", "rationale": "the failures started with the deploy", "hypothesis": 0}]}"#;

fn assert_clean(place: &str, text: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(
            !text.contains(s),
            "secret {s} found in {place}:\n{}",
            context(text, s)
        );
    }
}

fn context(text: &str, s: &str) -> String {
    let i = text.find(s).unwrap_or(0);
    let mut a = i.saturating_sub(200);
    while !text.is_char_boundary(a) {
        a -= 1;
    }
    let mut b = (i + s.len() + 200).min(text.len());
    while !text.is_char_boundary(b) {
        b += 1;
    }
    text[a..b].to_string()
}

async fn ok(res: reqwest::Response, what: &str) -> Value {
    let status = res.status();
    let body = res.text().await.unwrap();
    assert!(status.is_success(), "{what}: {status} {body}");
    serde_json::from_str(&body).unwrap_or(Value::Null)
}

async fn page(app: &TestApp, path: &str) -> String {
    let res = app.get(&app.responder, path).await;
    let status = res.status();
    let body = res.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one secret corpus sent through every input path in turn, then every output searched for it"
)]
async fn a_secret_corpus_through_every_input_path_leaks_nowhere_and_versions_survive() {
    let model = CapturingModel::start(ANALYSIS).await;
    let llm = Arc::new(
        LlmAnalyst::new(LlmConfig {
            base_url: model.base.clone(),
            model: "stub-model".into(),
            api_key: String::new(),
            timeout: Duration::from_secs(10),
            token_budget: 20_000,
            context_tokens: None,
        })
        .unwrap(),
    );
    let embedder = Arc::new(
        OpenAiEmbedder::new(EmbeddingConfig {
            base_url: model.base.clone(),
            model: "stub-embed".into(),
            api_key: String::new(),
            timeout: Duration::from_secs(10),
        })
        .unwrap(),
    );
    let app = spawn_app_with_models(llm, embedder).await;
    assert!(secrets().len() >= 40 + 11);
    let corpus = corpus_text();

    // Open: title and description.
    let v = ok(
        app.post_json(
            &app.responder,
            "/api/v1/incidents",
            json!({"title": "Orders failing after ghp_nxs9O0VI2GYXv7Oq96AK18A6sMoAreGQyfSs leaked",
                   "service": "orders", "severity": "SEV2",
                   "description": format!("{corpus}\n{PEM}\n{K8S_YAML}\n{ENV}")}),
        )
        .await,
        "open",
    )
    .await;
    let id = v["id"].as_str().unwrap().to_string();
    let ev = format!("/api/v1/incidents/{id}/evidence");

    // Evidence: JSON, raw text, multipart upload, the page form.
    ok(
        app.post_json(
            &app.responder,
            &ev,
            json!({"kind": "logs", "content": corpus}),
        )
        .await,
        "json evidence",
    )
    .await;
    ok(
        app.client
            .post(app.url(&format!("{ev}?kind=note&source=kubectl")))
            .bearer_auth(&app.responder)
            .header("content-type", "text/plain")
            .body(K8S_JSON)
            .send()
            .await
            .unwrap(),
        "raw evidence",
    )
    .await;
    let form = reqwest::multipart::Form::new().text("kind", "logs").part(
        "file",
        reqwest::multipart::Part::bytes(format!("{ENV}{K8S_YAML}{PEM}").into_bytes())
            .file_name("orders.env"),
    );
    ok(
        app.client
            .post(app.url(&ev))
            .bearer_auth(&app.responder)
            .multipart(form)
            .send()
            .await
            .unwrap(),
        "multipart evidence",
    )
    .await;
    let browser = app.browser("rita").await;
    let res = browser
        .post(app.url(&format!("/incidents/{id}/evidence")))
        .header("origin", &app.base)
        .form(&[
            ("kind", "note"),
            ("content", corpus.as_str()),
            ("source", "typed"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);

    // A webhook whose annotations hold the corpus, a Secret and escaped JSON.
    let integ = ok(
        app.post_json(
            &app.admin,
            "/api/v1/integrations",
            json!({"name": "am", "source": "alertmanager", "default_service": "orders"}),
        )
        .await,
        "integration",
    )
    .await;
    let whk = integ["secret"].as_str().unwrap().to_string();
    let body = json!({
        "version": "4", "groupKey": "{}:{alertname=\"LedgerDown\"}", "status": "firing",
        "receiver": "im", "commonLabels": {"alertname": "LedgerDown", "service": "orders"},
        "commonAnnotations": {"summary": "Ledger down for orders"},
        "alerts": [{"status": "firing", "fingerprint": "f1",
            "labels": {"alertname": "LedgerDown", "service": "orders", "severity": "critical"},
            "annotations": {"summary": "Ledger down (api_key=4MwWCCC6m3BvEWlDzk)",
                "description": format!("{corpus}{PEM}{ENV}"),
                "payload": "{\"secret\":\"8qjwnKADcYLFQAHq\",\"note\":\"ok\"}",
                "manifest": K8S_JSON,
                "manifest_yaml": K8S_YAML},
            "startsAt": "2026-12-01T09:00:00Z", "endsAt": "0001-01-01T00:00:00Z"}]
    });
    let res = app
        .client
        .post(app.url("/api/v1/webhooks/alertmanager"))
        .bearer_auth(&whk)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .send()
        .await
        .unwrap();
    let hook = ok(res, "webhook").await;
    let alert_incident = hook["incidents"][0].as_str().unwrap().to_string();

    // A note, an investigation (through the model), a proposed action, a verdict, a rejection.
    ok(
        app.post_json(
            &app.responder,
            "/api/v1/memories",
            json!({"kind": "service_fact", "service": "orders",
                   "text": format!("orders reads its ledger DSN postgres://orders_app:Vx9G8m6mBwVeOB@db/orders; {}", CORPUS[33].0)}),
        )
        .await,
        "note",
    )
    .await;
    let inv = ok(
        app.post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/investigate"),
            json!({}),
        )
        .await,
        "investigate",
    )
    .await;
    let proposed = ok(
        app.post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/recommendations"),
            json!({"kind": "restart_service", "target": "orders",
                   "rationale": "token glpat-7ZwTBNzIkh3gm1ICBnIS was rotated, restart to pick it up"}),
        )
        .await,
        "propose",
    )
    .await;
    let rid = proposed["id"].as_i64().unwrap();
    ok(
        app.post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/recommendations/{rid}/approve"),
            json!({}),
        )
        .await,
        "approve",
    )
    .await;
    ok(
        app.post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/recommendations/{rid}/verdict"),
            json!({"verdict": "did_not_resolve",
                   "note": "still failing with Authorization: Bearer eUNC5uaCQR3ARhoOOw8VWXlaxb4H"}),
        )
        .await,
        "verdict",
    )
    .await;
    if let Some(other) = inv["recommendations"].as_array().and_then(|a| a.first()) {
        let oid = other["id"].as_i64().unwrap();
        ok(
            app.post_json(
                &app.responder,
                &format!("/api/v1/incidents/{id}/recommendations/{oid}/reject"),
                json!({"reason": "would expose psql --password MD5wNHlTKt9LUg -h db"}),
            )
            .await,
            "reject",
        )
        .await;
    }

    // Resolution, post-mortem draft (the model is asked and its answer fails validation) and edit.
    ok(
        app.post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/resolve"),
            json!({"summary": "Rolled back svc-d 2.14.0.1; client 198.51.100.23 hammered the API",
                   "root_cause": format!("The ledger DSN {} was baked into checkout 3.1.0.12", CORPUS[0].0)}),
        )
        .await,
        "resolve",
    )
    .await;
    let pm = ok(
        app.post_json(
            &app.responder,
            &format!("/api/v1/incidents/{id}/postmortem"),
            json!({}),
        )
        .await,
        "draft",
    )
    .await;
    let mut doc = pm["postmortem"].clone();
    doc["trigger"] = json!(format!(
        "version 10.4.0.2 shipped {} and {}",
        CORPUS[41].0, CORPUS[8].0
    ));
    doc["action_items"] = json!([format!("Rotate {}", CORPUS[29].0), ENV]);
    doc["version"] = pm["version"].clone();
    ok(
        app.client
            .put(app.url(&format!("/api/v1/incidents/{id}/postmortem")))
            .bearer_auth(&app.responder)
            .json(&doc)
            .send()
            .await
            .unwrap(),
        "edit",
    )
    .await;
    ok(
        app.post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/postmortem/confirm"),
            json!({}),
        )
        .await,
        "confirm",
    )
    .await;
    ok(
        app.post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            json!({}),
        )
        .await,
        "learn",
    )
    .await;
    // Records, documents and queries reach the embeddings endpoint too.
    embeddings::catch_up(&app.memory).await.unwrap();
    ok(
        app.get(
            &app.responder,
            "/api/v1/recall?q=ledger%20down%20api_key%3D4MwWCCC6m3BvEWlDzk&service=orders",
        )
        .await,
        "recall",
    )
    .await;

    let secrets = secrets();
    // Every table.
    let rows = dump_all_tables(&app.pool).await;
    assert!(rows.len() > 50, "{} rows", rows.len());
    for (table, row) in &rows {
        assert_clean(&format!("table {table}"), row, &secrets);
    }
    // Every page and API view of both incidents, and the Markdown export.
    let mut views = Vec::new();
    for inc in [&id, &alert_incident] {
        for path in [
            format!("/incidents/{inc}"),
            format!("/api/v1/incidents/{inc}"),
            format!("/api/v1/incidents/{inc}/evidence"),
            format!("/api/v1/incidents/{inc}/investigation"),
            format!("/api/v1/memories?incident={inc}"),
        ] {
            if path.ends_with("/investigation") && inc == &alert_incident {
                continue;
            }
            views.push((path.clone(), page(&app, &path).await));
        }
        let list: Value = app
            .get(&app.responder, &format!("/api/v1/incidents/{inc}/evidence"))
            .await
            .json()
            .await
            .unwrap();
        for e in list["evidence"].as_array().unwrap() {
            let path = format!("/incidents/{inc}/evidence/{}", e["id"]);
            views.push((path.clone(), page(&app, &path).await));
        }
    }
    for path in [
        format!("/incidents/{id}/postmortem"),
        format!("/api/v1/incidents/{id}/postmortem"),
        format!("/api/v1/incidents/{id}/postmortem.md"),
        "/incidents".to_string(),
        "/memories".to_string(),
        "/api/v1/memories".to_string(),
        format!("/api/v1/incidents/{alert_incident}/alerts"),
    ] {
        views.push((path.clone(), page(&app, &path).await));
    }
    for (path, body) in &views {
        assert_clean(path, body, &secrets);
    }
    // Every request the model and embeddings server received.
    let sent = model.texts();
    assert!(
        sent.iter().any(|b| b.contains("\"messages\""))
            && sent.iter().any(|b| b.contains("\"input\"")),
        "both chat and embeddings were called: {} bodies",
        sent.len()
    );
    for b in &sent {
        assert_clean("a model request", b, &secrets);
    }

    // Versions survive, in the same form in evidence, memory, the incident and the post-mortem.
    let evidence_rows: Vec<String> = sqlx::query_scalar("SELECT content FROM evidence")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    let all_evidence = evidence_rows.join("\n");
    for v in VERSIONS {
        assert!(all_evidence.contains(v), "{v} missing from evidence");
    }
    let md = &views.iter().find(|(p, _)| p.ends_with(".md")).unwrap().1;
    for v in ["svc-d 2.14.0.1", "checkout 3.1.0.12", "version 10.4.0.2"] {
        assert!(
            md.contains(v),
            "{v} missing from the Markdown export:\n{md}"
        );
    }
    assert!(
        md.contains("&lt;ip-ext-"),
        "the client address is masked in the post-mortem:\n{md}"
    );
    let records: Vec<String> = sqlx::query_scalar("SELECT text FROM records")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert!(
        records.iter().any(|r| r.contains("svc-d 2.14.0.1")),
        "the version is kept in memory"
    );
    assert!(all_evidence.contains("APP_RELEASE=2.14.0.1"));
}
