//! Issue #49, item 4: a request or error rate pulled from Prometheus beside an alert's series
//! shows its own query and graph link, not the alert's expression.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::spawn_app_with;
use crate::prometheus::{deliver, delivery, evidence_of, pulled};
use crate::prometheus_stub::{start_stub, stub_settings};
use crate::webhooks::integration;

#[tokio::test]
async fn a_pulled_rate_shows_its_own_query_and_link() {
    let stub = start_stub().await;
    let mut settings = stub_settings(&stub);
    let rate = r#"sum(rate(http_requests_total{service="checkout"}[1m]))"#;
    let errors = r#"sum(rate(http_errors_total{service="checkout"}[1m]))"#;
    if let Some(p) = settings.prometheus.as_mut() {
        p.request_rate = Some(r#"sum(rate(http_requests_total{service="$service"}[1m]))"#.into());
        p.error_rate = Some(r#"sum(rate(http_errors_total{service="$service"}[1m]))"#.into());
    }
    let app = spawn_app_with(settings).await;
    let (_, secret) = integration(&app, "am", "alertmanager", json!({})).await;
    let body = delivery(
        "g-rates",
        "2026-12-04T10:00:00Z",
        &[("fp-1", "CheckoutSlow", "checkout_latency_seconds")],
    );
    let (id, _) = deliver(&app, &secret, &body).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let v = loop {
        let v = evidence_of(&app, &id).await;
        if !pulled(&v).is_empty() {
            break v;
        }
        assert!(Instant::now() < deadline, "the alert's series within 10 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let eid = pulled(&v)[0]["id"].as_i64().unwrap();
    let observations: Vec<&Value> = v["observations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["data"]["evidence_id"] == eid)
        .collect();
    let link_of = |prefix: &str| -> (String, String) {
        let o = observations
            .iter()
            .find(|o| o["text"].as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("an observation of {prefix}: {observations:#?}"));
        let l = &o["data"]["query_link"];
        (
            l["query"].as_str().unwrap().to_string(),
            l["url"].as_str().unwrap_or_default().to_string(),
        )
    };
    let expr_of = |url: &str| -> String {
        url::Url::parse(url)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == "g0.expr")
            .unwrap()
            .1
            .to_string()
    };
    for (prefix, query) in [("request_rate", rate), ("error_rate", errors)] {
        let (q, url) = link_of(prefix);
        assert_eq!(q, query, "{prefix}");
        assert_eq!(
            expr_of(&url),
            query,
            "{prefix}: the graph link runs its own query"
        );
    }
    let (q, url) = link_of("stub_total");
    assert_eq!(
        q, "checkout_latency_seconds",
        "the alert's series keeps the alert's"
    );
    assert_eq!(expr_of(&url), "checkout_latency_seconds");

    // The incident page shows each beside its observation.
    let browser = app.browser("rita").await;
    let html = app.page(&browser, &format!("/incidents/{id}")).await;
    let item = html
        .split("<li")
        .find(|li| li.contains("request_rate{"))
        .expect("the request rate's observation on the page");
    assert!(
        item.contains("sum(rate(http_requests_total{service=&quot;checkout&quot;}[1m]))")
            || item.contains("sum(rate(http_requests_total{service=&#34;checkout&#34;}[1m]))"),
        "{item}"
    );
    assert!(!item.contains("checkout_latency_seconds"), "{item}");
}
