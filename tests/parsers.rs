//! Property tests on every parser that reads what a user or a sender controls: log
//! lines, metrics (Prometheus text and JSON, CSV), alert bodies of each webhook source, Markdown,
//! time strings and the lesson grammar.
//!
//! Each property runs on random input and on real input mutated at random: the webhook bodies
//! and Loghub samples under `../shared/data` (a missing file fails under `CI=true`), and a few
//! metric texts written here. Nothing may panic; a webhook body is accepted or refused as bad
//! input, never answered as an internal error; Markdown never yields a script tag, a
//! `javascript:` URL or an event attribute; a time or a lesson written by the product reads back as it was.
//!
//! Cases per property: `PROPTEST_CASES` when set, else 10,000 (the floor for CI).

#[path = "support/skip.rs"]
mod skip;

use incidentmind::domain::memory::{Rule, RuleSeverity};
use incidentmind::error::AppError;
use incidentmind::evidence::{self, EvidenceKind, time};
use incidentmind::services::ingest::{Source, parse_delivery};
use incidentmind::web::view::render_markdown;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Cases per property (see the module doc).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

/// A file under `../shared/data`, or `None` (skipped) outside CI; under `CI=true` a missing
/// file fails the test.
fn shared(path: &str) -> Option<String> {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(path);
    match std::fs::read_to_string(&full) {
        Ok(s) => Some(s),
        Err(e) => {
            skip::skip(
                "a test over shared data",
                &format!(
                    "{} is missing ({e}): CI always has ../shared",
                    full.display()
                ),
                skip::Required::InCi(None),
            );
            None
        }
    }
}

/// One random edit of `text` (by characters, so the result stays UTF-8): delete a span,
/// duplicate one, insert random characters, swap in a character from a hostile set, or cut.
fn mutate(text: &str, ops: &[(u8, usize, usize, String)]) -> String {
    let mut cs: Vec<char> = text.chars().collect();
    for (op, a, b, ins) in ops {
        let n = cs.len();
        if n == 0 {
            cs.extend(ins.chars());
            continue;
        }
        let (i, j) = {
            let (x, y) = (a % n, b % n);
            (x.min(y), x.max(y))
        };
        match op % 5 {
            0 => {
                cs.drain(i..j);
            }
            1 => {
                let span: Vec<char> = cs[i..j].to_vec();
                cs.splice(j..j, span);
            }
            2 => {
                cs.splice(i..i, ins.chars());
            }
            3 => {
                const HOSTILE: [char; 12] = [
                    '"', '\\', '{', '}', '[', ']', ',', ':', '\n', '\0', '\u{FEFF}', 'é',
                ];
                cs[i] = HOSTILE[j % HOSTILE.len()];
            }
            _ => cs.truncate(j.max(1)),
        }
        cs.truncate(200_000);
    }
    cs.into_iter().collect()
}

/// Up to eight random edits for [`mutate`].
fn edits() -> impl Strategy<Value = Vec<(u8, usize, usize, String)>> {
    prop::collection::vec(
        (any::<u8>(), any::<usize>(), any::<usize>(), "\\PC{0,12}"),
        1..8,
    )
}

/// Replaces one JSON leaf, picked by `at`, with `with` (a value of any type): a sender that
/// puts a number where a string belongs, or an object where a list does.
fn swap_leaf(v: &mut serde_json::Value, at: &mut usize, with: &serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        Value::Object(m) => m.values_mut().any(|x| swap_leaf(x, at, with)),
        Value::Array(a) => a.iter_mut().any(|x| swap_leaf(x, at, with)),
        leaf => {
            if *at == 0 {
                *leaf = with.clone();
                true
            } else {
                *at -= 1;
                false
            }
        }
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|x| json!(x)),
        "\\PC{0,40}".prop_map(Value::String),
        Just(json!([])),
        Just(json!({})),
        Just(json!([{"labels": {}}])),
        Just(Value::String("x".repeat(70_000))),
    ]
}

/// What the extractor is fed per evidence kind: a random kind and text.
fn kind() -> impl Strategy<Value = EvidenceKind> {
    prop_oneof![
        Just(EvidenceKind::Logs),
        Just(EvidenceKind::Metrics),
        Just(EvidenceKind::Alert),
        Just(EvidenceKind::Note),
    ]
}

#[test]
fn extraction_never_panics_on_random_text() {
    runner()
        .run(&(kind(), "\\PC{0,400}"), |(k, text)| {
            let x = evidence::extract(k, &text);
            prop_assert!(x.observations.len() <= evidence::MAX_OBSERVATIONS);
            Ok(())
        })
        .expect("extraction is total");
}

#[test]
fn log_extraction_never_panics_on_mutated_loghub_samples() {
    let mut seeds = Vec::new();
    for system in ["HDFS", "Apache", "Linux", "OpenSSH", "Zookeeper"] {
        let Some(text) = shared(&format!("loghub/{system}/{system}_2k.log")) else {
            return;
        };
        seeds.push(text.lines().take(40).collect::<Vec<_>>().join("\n"));
    }
    runner()
        .run(&(0..seeds.len(), edits()), |(i, ops)| {
            let text = mutate(&seeds[i], &ops);
            let x = evidence::extract(EvidenceKind::Logs, &text);
            prop_assert!(x.lines as usize <= text.lines().count() + 1);
            Ok(())
        })
        .expect("log extraction is total");
}

/// Metric texts written for this test, one per format the metrics parser reads.
const METRIC_SEEDS: [&str; 3] = [
    "# HELP queue_depth Jobs waiting.\n# TYPE queue_depth gauge\n\
     queue_depth{queue=\"mail\"} 12 1780390800000\nqueue_depth{queue=\"mail\"} 48 1780390860000\n\
     queue_depth{queue=\"mail\"} 97 1780390920000\n",
    r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"db_conn_in_use","pod":"a"},"values":[[1780390800,"10"],[1780390860,"40"],[1780390920,"40"]]}]}}"#,
    "time,latency_ms,error_rate\n2026-06-02T09:00:00Z,120,0.01\n2026-06-02T09:01:00Z,480,0.09\n\
     2026-06-02T09:02:00Z,900,0.2\n",
];

#[test]
fn metrics_parsing_never_panics_on_mutated_metric_texts() {
    runner()
        .run(&(0..METRIC_SEEDS.len(), edits()), |(i, ops)| {
            let text = mutate(METRIC_SEEDS[i], &ops);
            let _ = evidence::metrics::parse(&text);
            let _ = evidence::metrics::parse_csv(&text);
            let _ = evidence::extract(EvidenceKind::Metrics, &text);
            Ok(())
        })
        .expect("metrics parsing is total");
}

/// The real webhook bodies under `../shared/data/alerts`, with their source.
fn webhook_seeds() -> Option<Vec<(Source, String)>> {
    let mut out = Vec::new();
    for (source, file) in [
        (
            Source::Alertmanager,
            "alerts/alertmanager_v4_firing.captured.json",
        ),
        (
            Source::Alertmanager,
            "alerts/alertmanager_v4_resolved.captured.json",
        ),
        (
            Source::Grafana,
            "alerts/grafana_alerting_webhook.official.json",
        ),
        (
            Source::Opsgenie,
            "alerts/opsgenie_webhook_create.official.json",
        ),
        (
            Source::Pagerduty,
            "alerts/pagerduty_v3_incident_priority_updated.official.json",
        ),
        (
            Source::Pagerduty,
            "alerts/pagerduty_v3_service_updated.official.json",
        ),
    ] {
        out.push((source, shared(file)?));
    }
    Some(out)
}

/// A webhook body is accepted or refused as the sender's fault: never an internal error.
fn refused_as_bad_input(e: &AppError) -> bool {
    e.status().is_client_error()
}

#[test]
fn webhook_bodies_mutated_as_text_are_accepted_or_refused_as_bad_input() {
    let Some(seeds) = webhook_seeds() else { return };
    runner()
        .run(&(0..seeds.len(), edits()), |(i, ops)| {
            let (source, body) = &seeds[i];
            let body = mutate(body, &ops);
            if let Err(e) = parse_delivery(*source, body.as_bytes()) {
                prop_assert!(refused_as_bad_input(&e), "{source:?}: {e}");
            }
            // The same body as evidence (a pasted alert) is read too.
            let _ = evidence::extract(EvidenceKind::Alert, &body);
            Ok(())
        })
        .expect("webhook parsing is total");
}

#[test]
fn webhook_bodies_with_a_field_of_the_wrong_type_are_accepted_or_refused_as_bad_input() {
    let Some(seeds) = webhook_seeds() else { return };
    let parsed: Vec<(Source, serde_json::Value)> = seeds
        .iter()
        .map(|(s, b)| (*s, serde_json::from_str(b).expect("seed bodies are JSON")))
        .collect();
    runner()
        .run(
            &(0..parsed.len(), any::<usize>(), json_value()),
            |(i, at, with)| {
                let (source, body) = &parsed[i];
                let mut body = body.clone();
                let mut at = at % 400;
                swap_leaf(&mut body, &mut at, &with);
                let bytes = serde_json::to_vec(&body).expect("serializes");
                if let Err(e) = parse_delivery(*source, &bytes) {
                    prop_assert!(refused_as_bad_input(&e), "{source:?}: {e}");
                }
                Ok(())
            },
        )
        .expect("webhook parsing is total");
}

#[test]
fn markdown_never_yields_a_script_or_a_javascript_link() {
    let piece = prop_oneof![
        "\\PC{0,20}",
        Just("<script>alert(1)</script>".to_string()),
        Just("[x](javascript:alert(1))".to_string()),
        Just("<img src=x onerror=alert(1)>".to_string()),
        Just("<a href=\"JaVaScRiPt:alert(1)\">y</a>".to_string()),
        Just("```\ncode\n```".to_string()),
        Just("| a | b |\n|---|---|\n| 1 | 2 |".to_string()),
        Just("* <*> template".to_string()),
        Just("\n\n".to_string()),
    ];
    runner()
        .run(&prop::collection::vec(piece, 0..8), |pieces| {
            let md = pieces.concat();
            let html = render_markdown(&md).to_string().to_ascii_lowercase();
            // Text is escaped, so every `<` opens a real tag: look inside each one. (The words
            // may stay as text, e.g. inside a code block.)
            for tag in html
                .split('<')
                .skip(1)
                .map(|t| t.split('>').next().unwrap_or(""))
            {
                prop_assert!(!tag.starts_with("script"), "{html}");
                prop_assert!(!tag.contains("javascript:"), "{html}");
                prop_assert!(
                    !tag.split_whitespace()
                        .skip(1)
                        .any(|attr| attr.starts_with("on")),
                    "{html}"
                );
            }
            Ok(())
        })
        .expect("markdown is sanitized");
}

#[test]
fn time_strings_never_panic_and_written_instants_read_back() {
    runner()
        .run(&prop::collection::vec(any::<u8>(), 0..64), |bytes| {
            let _ = time::scan_stamp(&bytes);
            let _ = time::parse_iso(&bytes);
            let _ = time::parse_syslog(&bytes);
            let _ = time::parse_ctime(&bytes);
            let _ = time::parse_yymmdd(&bytes);
            let _ = time::parse_epoch_prefix(&bytes);
            Ok(())
        })
        .expect("time parsing is total");
    // 2001-09-09 to 2100-01-01, to the second: RFC 3339 as written reads back the same instant,
    // and a window written for a statement is found again with the same minutes.
    runner()
        .run(
            &(
                1_000_000_000i64..4_102_444_800,
                0i64..86_400 * 3,
                "\\PC{0,20}",
            ),
            |(secs, len, around)| {
                let ts = jiff::Timestamp::from_second(secs).expect("in range");
                let text = ts.to_string();
                let (ns, used) = time::parse_iso(text.as_bytes()).expect("RFC 3339 parses");
                prop_assert_eq!(ns, secs * time::NS);
                prop_assert_eq!(used, text.len());
                let first = secs / 60 * 60;
                let window =
                    time::fmt_window(first * time::NS, Some((first + len / 60 * 60) * time::NS));
                let clean = around.replace("UTC", "");
                let found = time::mentions(&format!("{clean} {window} {clean}"));
                prop_assert_eq!(found.len(), 1);
                prop_assert_eq!(found[0].start.as_second(), first);
                prop_assert_eq!(
                    found[0].end.map(|e| e.as_second()),
                    Some(first + len / 60 * 60)
                );
                Ok(())
            },
        )
        .expect("instants read back");
}

fn severity() -> impl Strategy<Value = RuleSeverity> {
    prop_oneof![
        Just(RuleSeverity::Low),
        Just(RuleSeverity::Medium),
        Just(RuleSeverity::High),
        Just(RuleSeverity::Critical),
    ]
}

/// Text for one rule field as a person types it: no line break, no surrounding white space,
/// not empty (a colon inside is kept: only the first one ends the key).
fn field() -> impl Strategy<Value = String> {
    "[^\\r\\n]{1,60}".prop_filter_map("trimmed and not empty", |s| {
        let t = s.trim().to_string();
        (!t.is_empty()).then_some(t)
    })
}

#[test]
fn lessons_read_back_as_written_and_random_text_never_panics() {
    let rule =
        (field(), field(), field(), severity()).prop_map(|(always, because, scope, severity)| {
            Rule {
                always,
                because,
                scope,
                severity,
            }
        });
    runner()
        .run(
            &(prop::collection::vec(rule, 1..5), any::<bool>()),
            |(rules, crlf)| {
                let mut text = Rule::blocks_text(&rules);
                if crlf {
                    text = text.replace('\n', "\r\n");
                }
                prop_assert_eq!(
                    Rule::parse_blocks(&text).expect("written lessons parse"),
                    rules
                );
                Ok(())
            },
        )
        .expect("lessons round-trip");
    runner()
        .run(&"\\PC{0,300}", |text| {
            let _ = Rule::parse_blocks(&text);
            Ok(())
        })
        .expect("lesson parsing is total");
}

/// Every string of a JSON value, depth first.
fn strings_of(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings_of(x, out)),
        _ => {}
    }
}

/// Secrets named in prose are redacted without eating ordinary prose (issue #57, 4): on the
/// texts under `../shared/data` that are prose about incidents (the retold post-mortems, the
/// recall sets' reports and questions) and on the OpenSSH log ("Failed password for …"), none
/// of which holds a secret, redaction leaves no `<secret-N>` next to a secret word. Prints
/// the figures measured.
#[test]
fn prose_about_passwords_and_tokens_is_not_redacted() {
    let words = regex::Regex::new(
        r"(?i)\b(?:password|passphrase|passwd|secret|token|api[ _\-]?key|access[ _\-]key|secret[ _\-]key|private[ _\-]key)\b",
    )
    .expect("words");
    let in_prose = regex::Regex::new(
        r#"(?i)\b(?:password|passphrase|passwd|secret|token|api[ _\-]?key|access[ _\-]key|secret[ _\-]key|private[ _\-]key)(?:[ \t]+(?:is|was|were|are|now|still|being|been|set|changed|reset|rotated|updated|to|as)\b){0,3}[ \t]+["'`]?<secret-"#,
    )
    .expect("in prose");
    let mut eaten = Vec::new();
    let mut mentions_in_all = 0;
    for file in [
        "postmortems.json",
        "recall-dev.json",
        "recall-dev-hard.json",
        "recall-dev-siblings.json",
        "recall-dev-prescriptive.json",
        "loghub/OpenSSH/OpenSSH_2k.log",
    ] {
        let Some(raw) = shared(file) else {
            return;
        };
        let mut texts = Vec::new();
        match serde_json::from_str::<serde_json::Value>(&raw) {
            Ok(v) => strings_of(&v, &mut texts),
            Err(_) => texts.extend(raw.lines().map(str::to_string)),
        }
        let with_word: Vec<&String> = texts.iter().filter(|t| words.is_match(t)).collect();
        let mentions: usize = with_word.iter().map(|t| words.find_iter(t).count()).sum();
        // A placeholder where prose put it: after a secret word and linking words, with no
        // `=` or `:` between (those are the key=value pass's, judged before this change).
        let redacted: Vec<(String, String)> = with_word
            .iter()
            .map(|t| ((*t).clone(), evidence::redact::Redactor::new().redact(t)))
            .filter(|(_, r)| in_prose.is_match(r))
            .collect();
        eprintln!(
            "prose secrets, {file}: {} texts, {} with a secret word ({mentions} mentions), {} redacted as a secret",
            texts.len(),
            with_word.len(),
            redacted.len()
        );
        mentions_in_all += mentions;
        if file == "postmortems.json" {
            assert!(redacted.is_empty(), "false positives: {redacted:#?}");
        }
        eaten.extend(redacted);
    }
    eprintln!(
        "prose secrets: {} false positives in {mentions_in_all} mentions of a secret word",
        eaten.len()
    );
    // Measured: one (an API key's id, `key_…`, named next to "api key"); a change that eats
    // more ordinary prose fails here.
    assert!(eaten.len() <= 1, "false positives: {eaten:#?}");
}
