//! `GET /api/v1/openapi.json` describes every `/api/v1` route of the route table, and nothing
//! else: the table is read from `src/web/mod.rs` with `syn`, the document from the running app.
//! Every documented request example is sent to the app and every answer validated against the
//! documented schema of its status with `jsonschema` (the document's components beside it).

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::Value;
use syn::visit::Visit;

use crate::helpers::spawn_app;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// `(method, path)` of every `.route("/api/v1…", get(…).post(…)…)` in a file.
#[derive(Default)]
struct Routes(BTreeSet<(String, String)>);

/// The method routers (`get(…)`, `.post(…)`) inside one route's handler expression.
#[derive(Default)]
struct Methods(Vec<String>);

impl<'a> Visit<'a> for Methods {
    fn visit_expr_call(&mut self, c: &'a syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func
            && let Some(id) = p.path.get_ident()
            && METHODS.contains(&id.to_string().as_str())
        {
            self.0.push(id.to_string());
        }
        syn::visit::visit_expr_call(self, c);
    }

    fn visit_expr_method_call(&mut self, c: &'a syn::ExprMethodCall) {
        if METHODS.contains(&c.method.to_string().as_str()) {
            self.0.push(c.method.to_string());
        }
        syn::visit::visit_expr_method_call(self, c);
    }
}

impl<'a> Visit<'a> for Routes {
    fn visit_expr_method_call(&mut self, c: &'a syn::ExprMethodCall) {
        if c.method == "route"
            && let Some(syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(path),
                ..
            })) = c.args.first()
            && path.value().starts_with("/api/v1")
        {
            let mut methods = Methods::default();
            methods.visit_expr(&c.args[1]);
            assert!(!methods.0.is_empty(), "no method for {}", path.value());
            for m in methods.0 {
                self.0.insert((m, path.value()));
            }
        }
        syn::visit::visit_expr_method_call(self, c);
    }
}

#[tokio::test]
async fn the_openapi_document_lists_every_api_route_of_the_route_table_and_no_other() {
    let source =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/web/mod.rs")).unwrap();
    let file = syn::parse_file(&source).expect("web/mod.rs parses");
    let mut table = Routes::default();
    table.visit_file(&file);
    assert!(table.0.len() > 30, "{:?}", table.0);
    assert!(
        table
            .0
            .contains(&("post".into(), "/api/v1/incidents/{id}/evidence".into()))
    );

    let app = spawn_app().await;
    let res = app
        .client
        .get(app.url("/api/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let doc: Value = res.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "IncidentMind API");
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.clone(), path.clone()));
        }
    }
    let missing: Vec<_> = table.0.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "routes missing from openapi.json: {missing:?}"
    );
    let extra: Vec<_> = documented.difference(&table.0).collect();
    assert!(
        extra.is_empty(),
        "openapi.json paths the router lacks: {extra:?}"
    );
    // Path parameters are declared.
    let approve = &doc["paths"]["/api/v1/incidents/{id}/recommendations/{rid}/approve"]["post"];
    let names: Vec<&str> = approve["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["id", "rid"]);
}

#[tokio::test]
async fn every_operation_lists_the_one_error_schema_and_real_errors_have_its_shape() {
    let app = spawn_app().await;
    let doc: Value = app
        .client
        .get(app.url("/api/v1/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let error_ref = "#/components/schemas/ErrorBody";
    for (path, item) in doc["paths"].as_object().unwrap() {
        if path == "/api/v1/openapi.json" {
            continue; // a static document: it has no error response
        }
        for (method, op) in item.as_object().unwrap() {
            for status in ["4XX", "5XX"] {
                assert_eq!(
                    op["responses"][status]["content"]["application/json"]["schema"]["$ref"],
                    error_ref,
                    "{method} {path} {status}"
                );
            }
        }
    }
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["ErrorBody"]["required"],
        serde_json::json!(["error"])
    );
    assert_eq!(
        schemas["ErrorBody"]["example"]["error"]["code"],
        "invalid_transition"
    );
    let codes: BTreeSet<String> = schemas["ErrorCode"]["enum"]
        .as_array()
        .expect("ErrorCode is an enum")
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert!(
        codes.contains("rate_limited") && codes.contains("not_found"),
        "{codes:?}"
    );
    // Errors the router really answers have that shape, with a documented code.
    let id = app.open_incident("Checkout 503s", "payments-api").await;
    let unknown = app
        .get(&app.responder, "/api/v1/incidents/INC-2026-9999")
        .await;
    let no_token = app.client.get(app.url("/api/v1/me")).send().await.unwrap();
    let too_early = app
        .post_json(
            &app.reviewer,
            &format!("/api/v1/incidents/{id}/learn"),
            serde_json::json!({}),
        )
        .await;
    for (res, status) in [
        (unknown, StatusCode::NOT_FOUND),
        (no_token, StatusCode::UNAUTHORIZED),
        (too_early, StatusCode::CONFLICT),
    ] {
        assert_eq!(res.status(), status);
        let body: Value = res.json().await.unwrap();
        let obj = body.as_object().unwrap();
        assert_eq!(obj.keys().collect::<Vec<_>>(), ["error"], "{body}");
        let error = body["error"].as_object().unwrap();
        assert_eq!(error.len(), 2, "{body}");
        assert!(codes.contains(error["code"].as_str().unwrap()), "{body}");
        assert!(!error["message"].as_str().unwrap().is_empty(), "{body}");
    }
}

/// The response schema the document gives `method path` for `status` (the exact code, else its
/// class such as `4XX`), for `content_type`.
fn response_schema(doc: &Value, method: &str, path: &str, status: u16) -> Option<Value> {
    let responses = &doc["paths"][path][method]["responses"];
    let class = format!("{}XX", status / 100);
    let response = [status.to_string(), class]
        .into_iter()
        .map(|s| &responses[s.as_str()])
        .find(|r| !r.is_null())?;
    response["content"]["application/json"]["schema"]
        .as_object()
        .map(|s| Value::Object(s.clone()))
}

/// `schema` compiled with the document's components beside it, so its
/// `#/components/schemas/…` references resolve; formats (`date-time`) are checked.
fn validator(doc: &Value, schema: &Value) -> jsonschema::Validator {
    let root = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"],
        "allOf": [schema],
    });
    jsonschema::options()
        .should_validate_formats(true)
        .build(&root)
        .expect("the schema compiles")
}

/// Every way `instance` breaks `schema`, one line each (empty: it validates).
fn violations(doc: &Value, schema: &Value, instance: &Value) -> Vec<String> {
    validator(doc, schema)
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

/// Fields of `instance` its `schema` does not name, as JSON pointers: the generated schemas
/// leave objects open (`additionalProperties` unset), so a field a handler returns and the
/// document forgot would validate; this walks both (through `$ref`, `allOf`, `oneOf`, arrays) and
/// lists it. Maps (`additionalProperties: {…}`) and untyped values (`{}`) take any key.
fn undocumented(doc: &Value, schema: &Value, instance: &Value, at: &str) -> Vec<String> {
    let resolve = |s: &Value| -> Value {
        match s["$ref"].as_str() {
            Some(r) => doc["components"]["schemas"][r.rsplit('/').next().unwrap()].clone(),
            None => s.clone(),
        }
    };
    let schema = resolve(schema);
    if let Some(alternatives) = schema["oneOf"].as_array() {
        if instance.is_null() {
            return Vec::new();
        }
        let branch = alternatives
            .iter()
            .find(|b| b["type"] != "null")
            .cloned()
            .unwrap_or(Value::Null);
        return undocumented(doc, &branch, instance, at);
    }
    match instance {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .flat_map(|(i, item)| undocumented(doc, &schema["items"], item, &format!("{at}/{i}")))
            .collect(),
        Value::Object(fields) => {
            let parts: Vec<Value> = match schema["allOf"].as_array() {
                Some(parts) => parts.iter().map(resolve).collect(),
                None => vec![schema.clone()],
            };
            // A part may itself be a flattened type (allOf again): take its parts too.
            let parts: Vec<Value> = parts
                .into_iter()
                .flat_map(|p| match p["allOf"].as_array() {
                    Some(inner) => inner.iter().map(resolve).collect(),
                    None => vec![p],
                })
                .collect();
            if parts
                .iter()
                .any(|p| p["additionalProperties"].is_object() || p["properties"].is_null())
            {
                return Vec::new();
            }
            let mut out = Vec::new();
            for (name, value) in fields {
                let field = format!("{at}/{name}");
                match parts.iter().find_map(|p| p["properties"].get(name)) {
                    None => out.push(field),
                    Some(s) => out.extend(undocumented(doc, s, value, &field)),
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// Sends documented examples to the app, validates each answer against the documented schema of
/// its status and keeps every failure, so one run lists them all.
struct Exerciser<'a> {
    app: &'a crate::helpers::TestApp,
    doc: Value,
    /// `(method, path template)` of every operation sent.
    sent: BTreeSet<(String, String)>,
    failures: Vec<String>,
}

impl Exerciser<'_> {
    /// The documented request example of `method path` for `content_type`.
    fn example(&self, method: &str, path: &str, content_type: &str) -> Value {
        self.doc["paths"][path][method]["requestBody"]["content"][content_type]["example"].clone()
    }

    /// The JSON example with `version` set to the incident's current version (a version is a
    /// compare-and-set, so the documented number is only right for one incident at one time).
    async fn versioned(&self, method: &str, path: &str, id: &str) -> Value {
        let mut body = self.example(method, path, "application/json");
        assert!(body["version"].is_i64(), "{method} {path}: {body}");
        body["version"] = self.version(id).await.into();
        body
    }

    /// Sends the documented JSON example of `method template` to `concrete`, with `version`
    /// set to incident `id`'s current one (the compare-and-set the example cannot know).
    async fn send_versioned(
        &mut self,
        token: &str,
        method: &str,
        template: &str,
        concrete: &str,
        id: &str,
    ) -> (u16, Value) {
        let body = self.versioned(method, template, id).await;
        self.send(
            token,
            method,
            template,
            concrete,
            Some(("application/json", body)),
        )
        .await
    }

    async fn version(&self, id: &str) -> i64 {
        let res = self
            .app
            .get(&self.app.responder, &format!("/api/v1/incidents/{id}"))
            .await;
        res.json::<Value>().await.unwrap()["version"]
            .as_i64()
            .unwrap()
    }

    /// Sends `body` (JSON, or raw text when it is a string and `content_type` says so) to
    /// `concrete` as `token`, validates the answer against `method template`'s schema for its
    /// status and returns status and body. A non-2xx answer is a failure too.
    async fn send(
        &mut self,
        token: &str,
        method: &str,
        template: &str,
        concrete: &str,
        body: Option<(&str, Value)>,
    ) -> (u16, Value) {
        self.sent.insert((method.to_string(), template.to_string()));
        let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        let mut req = self
            .app
            .client
            .request(m, self.app.url(concrete))
            .bearer_auth(token);
        if let Some((content_type, body)) = body {
            req = match body {
                Value::String(text) if content_type != "application/json" => {
                    req.header("content-type", content_type).body(text)
                }
                json => req.json(&json),
            };
        }
        let res = req.send().await.expect("request");
        let status = res.status().as_u16();
        let content_type = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let text = res.text().await.unwrap();
        let op = format!("{} {template} ({status})", method.to_uppercase());
        if !(200..300).contains(&status) {
            self.failures.push(format!("{op}: not a success: {text}"));
            return (status, Value::Null);
        }
        if !content_type.starts_with("application/json") {
            let documented =
                &self.doc["paths"][template][method]["responses"][status.to_string()]["content"];
            let media = content_type.split(';').next().unwrap_or("");
            if documented.get(media).is_none() {
                self.failures.push(format!(
                    "{op}: answered {content_type}, documented {documented}"
                ));
            }
            return (status, Value::String(text));
        }
        let value: Value = serde_json::from_str(&text).expect("JSON body");
        match response_schema(&self.doc, method, template, status) {
            None => self.failures.push(format!("{op}: no documented schema")),
            Some(schema) => {
                for v in violations(&self.doc, &schema, &value) {
                    self.failures.push(format!("{op}: {v}"));
                }
                for field in undocumented(&self.doc, &schema, &value, "") {
                    self.failures
                        .push(format!("{op}: field {field} is not in the schema"));
                }
            }
        }
        (status, value)
    }

    /// Sends the documented JSON example of `method template`.
    async fn send_example(
        &mut self,
        token: &str,
        method: &str,
        template: &str,
        concrete: &str,
    ) -> (u16, Value) {
        let body = self.example(method, template, "application/json");
        if body.is_null() {
            self.failures
                .push(format!("{method} {template}: no JSON request example"));
        }
        self.send(
            token,
            method,
            template,
            concrete,
            Some(("application/json", body)),
        )
        .await
    }
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "walks every operation of the OpenAPI document against one app and lists what failed at the end"
)]
async fn every_documented_example_is_answered_as_its_schema_says() {
    let stub = crate::prometheus_stub::start_stub().await;
    let app = crate::helpers::spawn_app_with(crate::prometheus_stub::stub_settings(&stub)).await;
    let doc: Value = app
        .get(&app.responder, "/api/v1/openapi.json")
        .await
        .json()
        .await
        .unwrap();

    // The document itself: every request body has an example for each media type, and every
    // example (request and response) validates against its own schema.
    let mut failures = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let name = format!("{} {path}", method.to_uppercase());
            if let Some(content) = op["requestBody"]["content"].as_object() {
                for (media, body) in content {
                    match body.get("example") {
                        None => failures.push(format!("{name}: no {media} request example")),
                        Some(example) => {
                            for v in violations(&doc, &body["schema"], example) {
                                failures.push(format!("{name}: request example: {v}"));
                            }
                            for f in undocumented(&doc, &body["schema"], example, "") {
                                failures.push(format!("{name}: request example field {f}"));
                            }
                        }
                    }
                }
            }
            for (status, response) in op["responses"].as_object().unwrap() {
                let Some(content) = response["content"].as_object() else {
                    continue;
                };
                for (media, body) in content {
                    let example = body
                        .get("example")
                        .or_else(|| doc["components"]["schemas"]["ErrorBody"].get("example"));
                    match example {
                        None => failures.push(format!("{name} {status}: no {media} example")),
                        Some(example) => {
                            for v in violations(&doc, &body["schema"], example) {
                                failures.push(format!("{name} {status}: example: {v}"));
                            }
                            for f in undocumented(&doc, &body["schema"], example, "") {
                                failures.push(format!("{name} {status}: example field {f}"));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "examples the document gets wrong:\n{}",
        failures.join("\n")
    );

    let mut x = Exerciser {
        app: &app,
        doc,
        sent: BTreeSet::new(),
        failures: Vec::new(),
    };
    let (r, a, v) = (
        app.responder.clone(),
        app.admin.clone(),
        app.reviewer.clone(),
    );
    let meta = "/api/v1/openapi.json";
    x.send(&r, "get", meta, meta, None).await;
    x.send(&r, "get", "/api/v1/me", "/api/v1/me", None).await;

    // An incident, its evidence and an investigation.
    let incidents = "/api/v1/incidents";
    let (_, opened) = x.send_example(&r, "post", incidents, incidents).await;
    let id = opened["id"].as_str().expect("an incident id").to_string();
    assert_eq!(opened["title"], "Checkout p99 latency above 2 s");
    // The field check is not a no-op: a field the schema lacks is named, nested ones too.
    let incident = serde_json::json!({"$ref": "#/components/schemas/Incident"});
    let mut extra = opened.clone();
    extra["owner"] = "rita".into();
    assert_eq!(undocumented(&x.doc, &incident, &extra, ""), ["/owner"]);
    let list = serde_json::json!({"$ref": "#/components/schemas/IncidentList"});
    let nested = serde_json::json!({"incidents": [extra]});
    assert_eq!(
        undocumented(&x.doc, &list, &nested, ""),
        ["/incidents/0/owner"]
    );
    x.send(
        &r,
        "get",
        incidents,
        "/api/v1/incidents?state=investigating",
        None,
    )
    .await;
    let one = format!("/api/v1/incidents/{id}");
    x.send(&r, "get", "/api/v1/incidents/{id}", &one, None)
        .await;
    let evidence_t = "/api/v1/incidents/{id}/evidence";
    let evidence = format!("{one}/evidence");
    let (status, added) = x.send_example(&r, "post", evidence_t, &evidence).await;
    assert_eq!((status, &added["created"]), (201, &Value::Bool(true)));
    let raw = x.example("post", evidence_t, "text/plain");
    x.send(
        &r,
        "post",
        evidence_t,
        &format!("{evidence}?kind=logs&source=checkout-7f9c.log"),
        Some(("text/plain", raw)),
    )
    .await;
    let (status, again) = x.send_example(&r, "post", evidence_t, &evidence).await;
    assert_eq!(status, 200, "the same paste again: {again}");
    assert!(
        again["notice"]
            .as_str()
            .unwrap()
            .contains("already evidence")
    );
    x.send(&r, "get", evidence_t, &evidence, None).await;
    // The query, against the stand-in Prometheus of tests/app/prometheus.rs.
    let prometheus_t = "/api/v1/incidents/{id}/evidence/prometheus";
    let (status, stored) = x
        .send_example(&r, "post", prometheus_t, &format!("{evidence}/prometheus"))
        .await;
    assert_eq!(status, 201, "{stored}");
    let investigate_t = "/api/v1/incidents/{id}/investigate";
    x.send_versioned(
        &r,
        "post",
        investigate_t,
        &format!("{one}/investigate"),
        &id,
    )
    .await;
    x.send(
        &r,
        "get",
        "/api/v1/incidents/{id}/investigation",
        &format!("{one}/investigation"),
        None,
    )
    .await;

    // Recommendations: propose, approve, verdict; propose another and reject it.
    let propose_t = "/api/v1/incidents/{id}/recommendations";
    let propose = format!("{one}/recommendations");
    let (_, proposed) = x.send_example(&r, "post", propose_t, &propose).await;
    let rid = proposed["id"].as_i64().expect("a recommendation id");
    assert_eq!(proposed["kind"], "rollback_deploy");
    let approve_t = "/api/v1/incidents/{id}/recommendations/{rid}/approve";
    let (_, approved) = x
        .send_versioned(
            &r,
            "post",
            approve_t,
            &format!("{propose}/{rid}/approve"),
            &id,
        )
        .await;
    assert_eq!(approved["status"], "approved");
    let verdict_t = "/api/v1/incidents/{id}/recommendations/{rid}/verdict";
    let (_, judged) = x
        .send_example(&r, "post", verdict_t, &format!("{propose}/{rid}/verdict"))
        .await;
    assert_eq!(judged["verdict"], "resolved");
    let (_, other) = x
        .send(
            &r,
            "post",
            propose_t,
            &propose,
            Some((
                "application/json",
                serde_json::json!({"kind": "flush_cache", "target": "checkout",
                                   "rationale": "stale carts after the deploy"}),
            )),
        )
        .await;
    let other = other["id"].as_i64().expect("a second recommendation");
    let reject_t = "/api/v1/incidents/{id}/recommendations/{rid}/reject";
    let (_, rejected) = x
        .send_example(&r, "post", reject_t, &format!("{propose}/{other}/reject"))
        .await;
    assert_eq!(rejected["status"], "rejected");

    // Resolve, reopen, resolve again; the post-mortem from draft to Learn.
    let resolve_t = "/api/v1/incidents/{id}/resolve";
    let (_, resolved) = x
        .send_example(&r, "post", resolve_t, &format!("{one}/resolve"))
        .await;
    assert_eq!(resolved["state"], "resolved");
    let reopen_t = "/api/v1/incidents/{id}/reopen";
    let (_, reopened) = x
        .send_versioned(&r, "post", reopen_t, &format!("{one}/reopen"), &id)
        .await;
    assert_eq!(reopened["state"], "investigating");
    x.send_example(&r, "post", resolve_t, &format!("{one}/resolve"))
        .await;
    let pm_t = "/api/v1/incidents/{id}/postmortem";
    let pm = format!("{one}/postmortem");
    x.send_versioned(&r, "post", pm_t, &pm, &id).await;
    x.send(&r, "get", pm_t, &pm, None).await;
    let (_, edited) = x.send_example(&r, "put", pm_t, &pm).await;
    assert_eq!(edited["edited_by"], "rita");
    let (_, md) = x
        .send(
            &r,
            "get",
            "/api/v1/incidents/{id}/postmortem.md",
            &format!("{one}/postmortem.md"),
            None,
        )
        .await;
    assert!(
        md.as_str()
            .unwrap()
            .contains("Checkout p99 latency above 2 s"),
        "{md}"
    );
    let confirm_t = "/api/v1/incidents/{id}/postmortem/confirm";
    let (_, confirmed) = x
        .send_versioned(&v, "post", confirm_t, &format!("{pm}/confirm"), &id)
        .await;
    assert_eq!(confirmed["confirmed_by"], "victor");
    x.send(
        &r,
        "get",
        "/api/v1/incidents/{id}/learnings/preview",
        &format!("{one}/learnings/preview"),
        None,
    )
    .await;
    let learn_t = "/api/v1/incidents/{id}/learn";
    let (_, learned) = x
        .send_versioned(&v, "post", learn_t, &format!("{one}/learn"), &id)
        .await;
    assert_eq!(learned["incident_id"], id.as_str());
    x.send(&v, "get", "/api/v1/review", "/api/v1/review", None)
        .await;
    // The queue's proposals: reject the runbook drafted when the incident was resolved by the
    // rollback; accept the reflection a failed action on a second incident drafts.
    let queue: Value = app.get(&v, "/api/v1/review").await.json().await.unwrap();
    let runbook = queue["proposals_to_decide"][0]["id"]
        .as_i64()
        .expect("a runbook proposal");
    let (_, rejected) = x
        .send_example(
            &v,
            "post",
            "/api/v1/proposals/{id}/reject",
            &format!("/api/v1/proposals/{runbook}/reject"),
        )
        .await;
    assert_eq!(rejected["status"], "rejected");
    let two = app
        .open_incident("Checkout errors after the flag flip", "checkout")
        .await;
    let (_, tried) = x
        .send_example(
            &r,
            "post",
            propose_t,
            &format!("/api/v1/incidents/{two}/recommendations"),
        )
        .await;
    let tried = tried["id"].as_i64().expect("a recommendation");
    let base = format!("/api/v1/incidents/{two}/recommendations/{tried}");
    let ok = app
        .post_json(&r, &format!("{base}/approve"), serde_json::json!({}))
        .await;
    assert_eq!(ok.status(), 200);
    let ok = app
        .post_json(
            &r,
            &format!("{base}/verdict"),
            serde_json::json!({"verdict": "did_not_resolve", "note": "errors continued"}),
        )
        .await;
    assert_eq!(ok.status(), 200);
    let queue: Value = app.get(&v, "/api/v1/review").await.json().await.unwrap();
    let reflection = queue["proposals_to_decide"][0]["id"]
        .as_i64()
        .expect("a reflection");
    let (_, accepted) = x
        .send_example(
            &v,
            "post",
            "/api/v1/proposals/{id}/accept",
            &format!("/api/v1/proposals/{reflection}/accept"),
        )
        .await;
    assert_eq!(accepted["status"], "accepted");
    // Insights over the incident just learned.
    x.send(
        &r,
        "get",
        "/api/v1/insights",
        "/api/v1/insights?days=30",
        None,
    )
    .await;

    // Memory: a note, a newer one superseding it, a retraction, recall.
    let memories = "/api/v1/memories";
    let (_, note) = x.send_example(&r, "post", memories, memories).await;
    let first = note["id"].as_i64().expect("a record id");
    let (_, newer) = x
        .send(
            &r,
            "post",
            memories,
            memories,
            Some((
                "application/json",
                serde_json::json!({"kind": "service_fact", "service": "checkout",
                                   "text": "checkout-db allows 300 connections since the resize."}),
            )),
        )
        .await;
    let newer = newer["id"].as_i64().expect("a second record");
    x.send(
        &r,
        "get",
        memories,
        "/api/v1/memories?service=checkout",
        None,
    )
    .await;
    let show_t = "/api/v1/memories/{id}";
    x.send(
        &r,
        "get",
        show_t,
        &format!("/api/v1/memories/MEM-{first}"),
        None,
    )
    .await;
    let supersede_t = "/api/v1/memories/{id}/supersede";
    let mut body = x.example("post", supersede_t, "application/json");
    body["by"] = newer.into(); // the documented id is of another database
    let (_, superseded) = x
        .send(
            &v,
            "post",
            supersede_t,
            &format!("/api/v1/memories/{first}/supersede"),
            Some(("application/json", body)),
        )
        .await;
    assert_eq!(superseded["superseded_by"], newer);
    let (_, retracted) = x
        .send_example(
            &v,
            "post",
            "/api/v1/memories/{id}/retract",
            &format!("/api/v1/memories/{newer}/retract"),
        )
        .await;
    assert_eq!(retracted["validation"], "retracted");
    x.send(
        &r,
        "get",
        "/api/v1/recall",
        "/api/v1/recall?q=checkout+connection+pool+exhausted",
        None,
    )
    .await;

    // Integrations and a delivery from each sender.
    let integrations = "/api/v1/integrations";
    let (_, created) = x.send_example(&a, "post", integrations, integrations).await;
    let integration = created["id"].as_i64().expect("an integration id");
    let mut secrets = vec![(
        "alertmanager",
        created["secret"].as_str().unwrap().to_string(),
    )];
    x.send(&a, "get", integrations, integrations, None).await;
    let one_t = "/api/v1/integrations/{id}";
    let concrete = format!("/api/v1/integrations/{integration}");
    x.send(&a, "get", one_t, &concrete, None).await;
    let (_, updated) = x.send_example(&a, "patch", one_t, &concrete).await;
    assert_eq!(updated["default_service"], "payments-api");
    for source in ["pagerduty", "grafana", "opsgenie"] {
        let (_, c) = x
            .send(
                &a,
                "post",
                integrations,
                integrations,
                Some((
                    "application/json",
                    serde_json::json!({"name": format!("prod-{source}"), "source": source}),
                )),
            )
            .await;
        secrets.push((source, c["secret"].as_str().unwrap().to_string()));
    }
    // Chat channels; the test message goes to a closed loopback port (never the internet).
    let channels = "/api/v1/chat/channels";
    let (_, ch) = x.send_example(&a, "post", channels, channels).await;
    let channel_id = ch["id"].as_i64().expect("a channel id");
    x.send(&a, "get", channels, channels, None).await;
    let ch_t = "/api/v1/chat/channels/{id}";
    let ch_concrete = format!("/api/v1/chat/channels/{channel_id}");
    x.send(&a, "get", ch_t, &ch_concrete, None).await;
    x.send_example(&a, "patch", ch_t, &ch_concrete).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let (_, local) = x
        .send(
            &a,
            "post",
            channels,
            channels,
            Some((
                "application/json",
                serde_json::json!({"name": "local", "kind": "slack_webhook",
                                   "url": format!("http://{closed}/hook"), "services": ["nowhere"]}),
            )),
        )
        .await;
    let (_, outcome) = x
        .send(
            &a,
            "post",
            "/api/v1/chat/channels/{id}/test",
            &format!("/api/v1/chat/channels/{}/test", local["id"]),
            None,
        )
        .await;
    assert_eq!(outcome["delivered"], false, "{outcome}");
    let mut alerted = Vec::new();
    for (source, secret) in &secrets {
        let path = format!("/api/v1/webhooks/{source}");
        let (status, accepted) = x.send_example(secret, "post", &path, &path).await;
        assert_eq!(status, 202, "{source}: {accepted}");
        assert_eq!(
            accepted["opened"].as_array().map(Vec::len),
            Some(1),
            "{source}: {accepted}"
        );
        alerted.push(accepted["opened"][0].as_str().unwrap().to_string());
    }
    x.send(
        &r,
        "get",
        "/api/v1/incidents/{id}/alerts",
        &format!("/api/v1/incidents/{}/alerts", alerted[0]),
        None,
    )
    .await;

    // Every operation of the document was sent.
    let mut documented = BTreeSet::new();
    for (path, item) in x.doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.clone(), path.clone()));
        }
    }
    let unsent: Vec<_> = documented.difference(&x.sent).collect();
    assert!(
        unsent.is_empty(),
        "operations this test never sent: {unsent:?}"
    );

    // Errors have the documented error shape.
    let bad = x.example("post", incidents, "application/json");
    let mut bad = bad.clone();
    bad["severity"] = "SEV9".into();
    for (res, status) in [
        (app.post_json(&r, incidents, bad).await, 422),
        (app.get(&r, "/api/v1/incidents/INC-2026-9999").await, 404),
        (
            app.client.get(app.url("/api/v1/me")).send().await.unwrap(),
            401,
        ),
        (app.get(&r, "/api/v1/integrations").await, 403),
    ] {
        let url = res.url().path().to_string();
        assert_eq!(res.status().as_u16(), status, "{url}");
        let body: Value = res.json().await.unwrap();
        let template = if url.starts_with("/api/v1/incidents/") {
            "/api/v1/incidents/{id}"
        } else {
            url.as_str()
        };
        let method = if status == 422 { "post" } else { "get" };
        let schema = response_schema(&x.doc, method, template, status).expect("4XX documented");
        assert_eq!(schema["$ref"], "#/components/schemas/ErrorBody");
        let errors = violations(&x.doc, &schema, &body);
        assert!(errors.is_empty(), "{url} {status}: {errors:?} in {body}");
        // …and a body that breaks it does not validate.
        assert!(!violations(&x.doc, &schema, &serde_json::json!({"error": "nope"})).is_empty());
    }

    assert!(
        x.failures.is_empty(),
        "operations whose answer does not match the document:\n{}",
        x.failures.join("\n")
    );
}

#[tokio::test]
async fn the_api_reference_page_lists_every_operation_of_the_document() {
    let app = spawn_app().await;
    let doc: Value = app
        .client
        .get(app.url("/api/v1/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Read without signing in, like the JSON document.
    let res = app.client.get(app.url("/api/docs")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = res.text().await.unwrap();
    let mut ids = BTreeSet::new();
    let mut missing = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            assert!(ids.insert(id.to_string()), "operationId {id} twice");
            let summary = op["summary"].as_str().unwrap_or_default();
            assert!(!summary.is_empty(), "{method} {path} has no summary");
            let heading = format!(
                "<h3 id=\"{id}-h\"><span class=\"method {method}\">{}</span> <code class=\"api-path\">{path}</code></h3>",
                method.to_uppercase()
            );
            if !html.contains(&heading) || !html.contains(&format!("<p>{}</p>", escape(summary))) {
                missing.push(format!("{method} {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "operations /api/docs lacks: {missing:?}"
    );
    assert_eq!(ids.len(), 47);
    // Every schema has its section, and the examples are on the page.
    for name in doc["components"]["schemas"].as_object().unwrap().keys() {
        assert!(html.contains(&format!("id=\"schema-{name}\"")), "{name}");
    }
    assert!(html.contains("Checkout p99 latency above 2 s"));
    assert!(
        html.contains(&escape(r#""severity": "SEV2""#)),
        "the JSON examples"
    );
    // Scripts and styles are the app's own embedded assets (no CDN), and nothing else loads.
    let assets: Vec<&str> = html
        .split("<script src=\"")
        .skip(1)
        .chain(html.split("<link rel=\"stylesheet\" href=\"").skip(1))
        .map(|rest| rest.split('"').next().unwrap())
        .collect();
    assert_eq!(assets.len(), 3, "{assets:?}");
    assert!(
        assets.iter().all(|a| a.starts_with("/static/")),
        "{assets:?}"
    );
    for tag in ["<img", "<iframe", "<object", "<embed", "@import"] {
        assert!(!html.contains(tag), "{tag}");
    }
    // Signed in, the navigation is there.
    let browser = app.browser("rita").await;
    let signed_in = browser
        .get(app.url("/api/docs"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(signed_in.contains("href=\"/incidents/new\""));
    assert!(!html.contains("href=\"/incidents/new\""));
}

/// HTML-escapes text as askama does.
fn escape(s: &str) -> String {
    s.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}
