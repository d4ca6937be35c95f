//! The PromQL the source runs that it did not write itself: the expression an alert's
//! `generatorURL` carries (Prometheus's graph link or a Grafana Explore link) and the `$service`
//! templates of the request and error rates, filled with a label value escaped as a PromQL
//! string. Pure: no I/O.

/// The expression an alert's `generatorURL` carries, URL-decoded; `None` when it carries none.
///
/// Two shapes carry one:
/// - Prometheus's graph link, `…/graph?g0.expr=<PromQL>` (Prometheus and Mimir/Cortex rulers,
///   whether Alertmanager or Grafana delivers their alerts);
/// - a Grafana Explore link (a ruler set to link to Grafana, or a rule whose source is an Explore
///   view): `…/explore?schemaVersion=1&panes={"<pane>":{"queries":[{"expr":…}]…}}`, or the older
///   `…/explore?left={"queries":[{"expr":…}]…}` and `left=["now-1h","now","<source>",{"expr":…}]`.
///   The first query with an `expr` is taken, unless its data source names a type other than
///   Prometheus (a Loki query is LogQL, not PromQL).
///
/// A Grafana-managed rule's own link (`…/alerting/grafana/<uid>/view`) carries no query: Grafana
/// sends the rule's evaluated values, not its expression, so nothing is pulled for it.
pub fn expr_from_generator_url(generator_url: &str) -> Option<String> {
    let url = url::Url::parse(generator_url.trim()).ok()?;
    let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let param = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.trim());
    let expr = match param("g0.expr") {
        Some(e) => Some(e.to_string()),
        None if url.path().trim_end_matches('/').ends_with("/explore") => {
            let state = param("panes").or_else(|| param("left"))?;
            explore_expr(&serde_json::from_str(state).ok()?)
        }
        None => None,
    };
    expr.filter(|v| !v.is_empty())
}

/// The first PromQL `expr` of a Grafana Explore state: panes (`{"<pane>": {queries…}}`), one
/// pane (`{queries…}`) or the compact array (`[from, to, source, {expr…}, …]`).
fn explore_expr(state: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    let promql = |q: &Value| -> Option<String> {
        let kind = q
            .pointer("/datasource/type")
            .and_then(Value::as_str)
            .unwrap_or("prometheus");
        let expr = q.get("expr")?.as_str()?.trim();
        (kind == "prometheus" && !expr.is_empty()).then(|| expr.to_string())
    };
    let pane =
        |p: &Value| -> Option<String> { p.get("queries")?.as_array()?.iter().find_map(promql) };
    match state {
        Value::Array(items) => items.iter().filter(|i| i.is_object()).find_map(promql),
        Value::Object(map) if map.contains_key("queries") => pane(state),
        Value::Object(map) => map.values().find_map(pane),
        _ => None,
    }
}

/// `template` with `$service` (or `${service}`) replaced by `service` escaped for the inside of
/// a double-quoted PromQL string (`\\`, `\"`, control characters as `\n`, `\t`, `\xNN`), so a
/// label value cannot end the string or change the query: the template writes the quotes,
/// `{service="$service"}`. `None` when the template names `$service` and there is no service;
/// a template without `$service` is returned as written.
pub fn fill_service(template: &str, service: Option<&str>) -> Option<String> {
    let template = template.replace("${service}", "$service");
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template.as_str();
    while let Some(at) = rest.find("$service") {
        let after = &rest[at + "$service".len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            // `$services`, `$service_name`: not the placeholder.
            out.push_str("$service");
        } else {
            out.push_str(&promql_escape(service?));
        }
        rest = after;
    }
    out.push_str(rest);
    Some(out)
}

/// `s` escaped for the inside of a double-quoted PromQL string (Go's escapes, which PromQL
/// follows).
pub fn promql_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_url_expression_is_url_decoded() {
        let u = "http://prom:9090/graph?g0.expr=rate%28http_requests_total%7Bjob%3D%22api%22%7D%5B5m%5D%29+%3E+1&g0.tab=1";
        assert_eq!(
            expr_from_generator_url(u).as_deref(),
            Some(r#"rate(http_requests_total{job="api"}[5m]) > 1"#)
        );
        assert_eq!(
            expr_from_generator_url("http://prom:9090/graph?g0.tab=1"),
            None
        );
        assert_eq!(expr_from_generator_url("not a url"), None);
        assert_eq!(expr_from_generator_url("http://p/graph?g0.expr=+"), None);
    }

    #[test]
    fn a_grafana_explore_link_gives_its_promql_and_a_rule_link_gives_none() {
        let explore = |param: &str, state: serde_json::Value| {
            let mut u = url::Url::parse("https://grafana.example/explore").unwrap();
            u.query_pairs_mut()
                .append_pair("schemaVersion", "1")
                .append_pair(param, &state.to_string());
            u.to_string()
        };
        let q = r#"sum(rate(http_requests_total{service="checkout"}[5m]))"#;
        let panes = serde_json::json!({"x1": {"datasource": "prom-uid", "queries": [
            {"refId": "A", "expr": q, "datasource": {"type": "prometheus", "uid": "prom-uid"}}],
            "range": {"from": "now-1h", "to": "now"}}});
        assert_eq!(
            expr_from_generator_url(&explore("panes", panes)).as_deref(),
            Some(q)
        );
        let left =
            serde_json::json!({"datasource": "Prometheus", "queries": [{"refId": "A", "expr": q}]});
        assert_eq!(
            expr_from_generator_url(&explore("left", left)).as_deref(),
            Some(q)
        );
        let compact =
            serde_json::json!(["now-1h", "now", "Prometheus", {"expr": q}, {"ui": [true]}]);
        assert_eq!(
            expr_from_generator_url(&explore("left", compact)).as_deref(),
            Some(q)
        );
        let loki = serde_json::json!({"a": {"queries": [
            {"expr": "{app=\"checkout\"} |= \"error\"", "datasource": {"type": "loki"}}]}});
        assert_eq!(
            expr_from_generator_url(&explore("panes", loki)),
            None,
            "LogQL is not PromQL"
        );
        for none in [
            "https://play.grafana.org/alerting/1afz29v7z/edit",
            "https://grafana.example/alerting/grafana/abc123/view?orgId=1",
            "https://grafana.example/explore?panes=not-json",
            "https://grafana.example/d/uid/dash?panes=%7B%7D",
        ] {
            assert_eq!(expr_from_generator_url(none), None, "{none}");
        }
    }

    #[test]
    fn the_service_fills_a_template_as_an_escaped_promql_string() {
        let t = r#"sum(rate(http_requests_total{service="$service"}[5m]))"#;
        assert_eq!(
            fill_service(t, Some("checkout")).as_deref(),
            Some(r#"sum(rate(http_requests_total{service="checkout"}[5m]))"#)
        );
        assert_eq!(
            fill_service(t, Some("a\"}) or vector(1) or x{y=\"\\")).as_deref(),
            Some(r#"sum(rate(http_requests_total{service="a\"}) or vector(1) or x{y=\"\\"}[5m]))"#),
            "a label value cannot end the string"
        );
        assert_eq!(
            fill_service(r#"up{job="${service}",x="$services"}"#, Some("api\n")).as_deref(),
            Some(r#"up{job="api\n",x="$services"}"#)
        );
        assert_eq!(fill_service(t, None), None, "no service, no query");
        assert_eq!(fill_service("sum(up)", None).as_deref(), Some("sum(up)"));
        assert_eq!(promql_escape("\u{1}"), "\\x01");
    }
}
