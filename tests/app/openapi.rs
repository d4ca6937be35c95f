//! `GET /api/v1/openapi.json` describes every `/api/v1` route of the route table, and nothing
//! else: the table is read from `src/web/mod.rs` with `syn`, the document from the running app.

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
