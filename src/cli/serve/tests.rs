//! Tests of the serve command's flags: the sources they build and what `Debug` hides.

use clap::Parser as _;

use super::*;

fn args(flags: &[&str]) -> ServeArgs {
    let cli = Cli::try_parse_from([&["incidentmind"], flags].concat()).expect("valid flags");
    cli.serve
}

#[test]
fn prometheus_flags_build_the_source_and_debug_hides_its_secrets() {
    assert_eq!(args(&[]).prometheus.config(), None);
    let a = args(&[
        "--prometheus-url",
        "http://prometheus:9090",
        "--prometheus-token",
        "prom-tok-1",
        "--prometheus-max-points",
        "300",
        "--prometheus-responder-queries",
        "false",
    ]);
    let c = a.prometheus.config().expect("configured");
    assert_eq!(
        c.auth,
        crate::prometheus::PrometheusAuth::Bearer("prom-tok-1".into())
    );
    assert_eq!((c.max_points, c.responder_queries), (300, false));
    assert_eq!((c.request_rate, c.error_rate), (None, None));
    let t = args(&[
        "--prometheus-url",
        "http://prometheus:9090",
        "--prometheus-request-rate",
        r#"sum(rate(http_requests_total{service="$service"}[5m]))"#,
        "--prometheus-error-rate",
        " ",
    ]);
    let c = t.prometheus.config().expect("configured");
    assert_eq!(
        c.request_rate.as_deref(),
        Some(r#"sum(rate(http_requests_total{service="$service"}[5m]))"#)
    );
    assert_eq!(c.error_rate, None, "a blank template is unset");
    assert!(!format!("{a:?}").contains("prom-tok-1"));
    let b = args(&[
        "--prometheus-url",
        "http://prometheus:9090",
        "--prometheus-user",
        "ops",
        "--prometheus-password",
        "prom-pw-2",
    ]);
    assert!(matches!(
        b.prometheus.config().map(|c| c.auth),
        Some(crate::prometheus::PrometheusAuth::Basic { .. })
    ));
    let shown = format!("{b:?} {:?}", b.prometheus.config());
    assert!(!shown.contains("prom-pw-2"), "{shown}");
}

#[test]
fn the_model_key_goes_to_the_embeddings_endpoint_only_on_the_same_server() {
    let base = "https://api.openai.com/v1";
    let same = args(&[
        "--llm-base-url",
        "https://api.openai.com/v1/",
        "--llm-api-key",
        "sk-model",
    ]);
    assert_eq!(
        embeddings_api_key(&same.embeddings, &ModelServer::of(&same), base),
        "sk-model"
    );
    let other = args(&[
        "--llm-base-url",
        "https://llm.example/v1",
        "--llm-api-key",
        "sk-model",
    ]);
    assert_eq!(
        embeddings_api_key(&other.embeddings, &ModelServer::of(&other), base),
        ""
    );
    let own = args(&[
        "--llm-api-key",
        "sk-model",
        "--embeddings-api-key",
        "sk-embed",
    ]);
    assert_eq!(
        embeddings_api_key(&own.embeddings, &ModelServer::of(&own), base),
        "sk-embed"
    );
}
