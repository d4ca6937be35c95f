//! Unit tests of the bounds: every string and array of both schemas bounded, the reply budget,
//! the timeout cap, `/props`, rejected parameters.

use std::time::Duration;

use serde_json::{Value, json};

use super::client::*;
use super::parse::*;
use super::prompt::*;
use super::reply::*;
use super::schema::*;
use crate::domain::RuleSeverity;

/// Every array of `schema` and below, as JSON pointers, with its `maxItems` if any.
fn arrays(schema: &Value, at: String, out: &mut Vec<(String, Option<u64>)>) {
    match schema {
        Value::Object(m) => {
            if m.get("type").and_then(Value::as_str) == Some("array") {
                out.push((at.clone(), m.get("maxItems").and_then(Value::as_u64)));
            }
            for (k, v) in m {
                arrays(v, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                arrays(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_array_of_both_schemas_is_bounded() {
    for schema in [investigation_schema(), postmortem_schema()] {
        let mut found = Vec::new();
        arrays(&schema, String::new(), &mut found);
        assert!(found.len() >= 4, "{found:?}");
        for (at, max) in found {
            assert!(max.is_some_and(|m| (1..=8).contains(&m)), "{at}: {max:?}");
        }
    }
}

#[test]
fn a_timeout_above_the_cap_is_capped() {
    let config = |secs| LlmConfig {
        base_url: "http://127.0.0.1:9/v1".into(),
        model: "m".into(),
        api_key: String::new(),
        timeout: Duration::from_secs(secs),
        token_budget: 1000,
        context_tokens: None,
    };
    assert_eq!(
        LlmAnalyst::new(config(600)).unwrap().config.timeout,
        MAX_TIMEOUT
    );
    assert_eq!(
        LlmAnalyst::new(config(20)).unwrap().config.timeout,
        Duration::from_secs(20)
    );
}

/// Every string of `schema` and below, as JSON pointers, with its `maxLength` (or, for an
/// `enum`, its longest value) if any.
fn strings(schema: &Value, at: String, out: &mut Vec<(String, Option<u64>)>) {
    match schema {
        Value::Object(m) => {
            if m.get("type").and_then(Value::as_str) == Some("string") {
                let bound = m.get("maxLength").and_then(Value::as_u64).or_else(|| {
                    m.get("enum")?
                        .as_array()?
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|x| x.chars().count() as u64)
                        .max()
                });
                out.push((at.clone(), bound));
            }
            for (k, v) in m {
                strings(v, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                strings(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_string_of_both_schemas_is_bounded() {
    for schema in [investigation_schema(), postmortem_schema()] {
        let mut found = Vec::new();
        strings(&schema, String::new(), &mut found);
        assert!(found.len() >= 5, "{found:?}");
        for (at, max) in found {
            assert!(max.is_some_and(|m| (1..=600).contains(&m)), "{at}: {max:?}");
        }
    }
    let s = investigation_schema();
    let hyp = &s["properties"]["hypotheses"]["items"]["properties"];
    assert_eq!(hyp["statement"]["maxLength"], limits::STATEMENT);
    let act = &s["properties"]["actions"]["items"]["properties"];
    assert_eq!(act["rationale"]["maxLength"], limits::RATIONALE);
    let p = postmortem_schema();
    let lesson = &p["properties"]["lessons"]["items"]["properties"];
    assert_eq!(lesson["always"]["maxLength"], limits::LESSON_PART);
    assert_eq!(lesson["because"]["maxLength"], limits::LESSON_PART);
}

#[test]
fn without_max_length_the_schema_loses_only_its_max_lengths() {
    for schema in [investigation_schema(), postmortem_schema()] {
        let bare = without_max_length_keyword(&schema);
        assert!(!bare.to_string().contains("maxLength"));
        let mut a = Vec::new();
        arrays(&bare, String::new(), &mut a);
        let mut b = Vec::new();
        arrays(&schema, String::new(), &mut b);
        assert_eq!(a, b, "maxItems stay");
        assert_eq!(bare["required"], schema["required"]);
        assert_eq!(reply_token_bound(&bare), None, "unbounded strings");
    }
}

#[test]
fn the_reply_bound_counts_every_string_and_item_and_fits_a_small_context() {
    let tiny = json!({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 30},
        "b": {"type": "array", "maxItems": 2, "items": {"type": "string", "enum": ["low", "medium"]}}
    }});
    // object 2; "a": key 1 + 3 + 2 + (2 + 10); "b": key 1 + 3 + 2 + (2 + 2 × ((2 + 2) + 2)).
    assert_eq!(
        reply_token_bound(&tiny),
        Some(2 + 18 + 20 + REPLY_SLACK_TOKENS as u32)
    );
    assert_eq!(
        reply_token_bound(&json!({"type": "string"})),
        None,
        "no maxLength"
    );
    assert_eq!(
        reply_token_bound(&json!({"type": "array", "items": {"type": "integer"}})),
        None,
        "no maxItems"
    );
    // At least the strings' characters at 3 per token (investigation ≈ 4,900 characters of
    // strings, post-mortem ≈ 1,700); small enough that a 4096-token context (the local test
    // server's) keeps room for the prompt.
    for (schema, least) in [(investigation_schema(), 1600), (postmortem_schema(), 560)] {
        let bound = reply_token_bound(&schema).expect("bounded");
        assert!((least..=2600).contains(&bound), "{bound}");
    }
}

#[test]
fn a_known_context_holds_prompt_and_reply_and_an_unknown_one_keeps_the_configuration() {
    let unknown = fit_budget(None, 5000, 2000, 2000, 6000);
    assert_eq!(
        unknown,
        Budget {
            reply_tokens: 2000,
            user_prompt_chars: 24_000
        }
    );
    for (ctx, fixed, bound, configured) in [
        (4096, 900, 2200, 1200),
        (4096, 3000, 2200, 1200),
        (2048, 900, 2200, 6000),
        (1024, 2000, 2200, 6000),
        (131_072, 900, 2200, 6000),
    ] {
        let b = fit_budget(Some(ctx), fixed, bound, bound, configured);
        let prompt =
            estimate_tokens(fixed) + TEMPLATE_TOKENS + estimate_tokens(b.user_prompt_chars);
        assert!(
            prompt + b.reply_tokens <= ctx,
            "{ctx}: {prompt} + {} > context",
            b.reply_tokens
        );
        assert!(b.reply_tokens <= bound && b.reply_tokens >= 1, "{b:?}");
        assert!(
            b.user_prompt_chars <= configured * FIT_CHARS_PER_TOKEN,
            "{b:?}"
        );
    }
    // Room enough: the reply gets its whole bound and the prompt the configured budget.
    let b = fit_budget(Some(131_072), 900, 2200, 2200, 6000);
    assert_eq!(b.reply_tokens, 2200);
    assert_eq!(b.user_prompt_chars, 6000 * FIT_CHARS_PER_TOKEN);
    // Tight: the reply gives way so the prompt keeps its floor.
    let b = fit_budget(Some(2048), 900, 2200, 2200, 6000);
    assert!(b.reply_tokens < 2200);
    assert!(b.user_prompt_chars >= MIN_USER_PROMPT_TOKENS as usize * FIT_CHARS_PER_TOKEN);
}

#[test]
fn room_the_prompt_does_not_need_goes_to_the_reply_up_to_one_token_per_character() {
    // 4096 tokens, a 900-character system message (300 tokens), the template (48) and the
    // margin (204) leave 3,544; the prompt's budget is 1,200, so 2,344 are spare.
    let b = fit_budget(Some(4096), 900, 1000, 2000, 1200);
    assert_eq!(b.reply_tokens, 2000, "the worst case fits: all of it");
    assert_eq!(b.user_prompt_chars, 1200 * FIT_CHARS_PER_TOKEN);
    let b = fit_budget(Some(4096), 900, 1000, 5000, 1200);
    assert_eq!(b.reply_tokens, 2344, "only what the prompt does not need");
    assert_eq!(b.user_prompt_chars, 1200 * FIT_CHARS_PER_TOKEN);
    // Never less than the usual bound: a prompt budget larger than the room changes nothing.
    assert_eq!(
        fit_budget(Some(4096), 900, 1000, 5000, 6000).reply_tokens,
        1000
    );
    // The post-mortem schema: every string at one token per character still fits a 4096-token
    // context beside the configured 1,200-token prompt.
    let worst = reply_token_worst(&postmortem_schema()).expect("bounded");
    let usual = reply_token_bound(&postmortem_schema()).expect("bounded");
    assert!(usual < worst && worst <= 2300, "{usual} / {worst}");
}

#[test]
fn props_live_at_the_server_root_and_say_n_ctx() {
    assert_eq!(
        props_url("http://127.0.0.1:8089/v1"),
        "http://127.0.0.1:8089/props"
    );
    assert_eq!(
        props_url("http://127.0.0.1:8089/v1/"),
        "http://127.0.0.1:8089/props"
    );
    assert_eq!(props_url("http://h/llm/v1"), "http://h/llm/props");
    assert_eq!(props_url("http://h:8080"), "http://h:8080/props");
    assert_eq!(
        n_ctx_of(&json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1})),
        Some(4096)
    );
    assert_eq!(n_ctx_of(&json!({"n_ctx": 2048})), Some(2048));
    assert_eq!(
        n_ctx_of(&json!({"default_generation_settings": {"n_ctx": 0}})),
        None
    );
    assert_eq!(n_ctx_of(&json!({"n_ctx": -1})), None);
    assert_eq!(n_ctx_of(&json!({"n_ctx": "4096"})), None);
    assert_eq!(n_ctx_of(&json!({"object": "list"})), None);
}

#[test]
fn rejected_parameters_are_named_as_words() {
    assert!(names_word(
        "unrecognized request argument supplied: seed",
        "seed"
    ));
    assert!(names_word("'seed' is not supported", "seed"));
    assert!(!names_word("the request proceeds", "seed"));
    assert!(names_word(
        "in context=('properties', 'statement'), 'maxlength' is not permitted.",
        "maxlength"
    ));
}

#[test]
fn overlong_strings_are_cut_on_parse_at_a_character_boundary() {
    let long = "é".repeat(1000);
    let v = json!({
        "hypotheses": [{"statement": long, "confidence": "high", "cites": [],
                        "prior_incidents": [{"id": long, "why": long}]}],
        "actions": [{"kind": "restart", "target": long, "rationale": long, "hypothesis": 0}]
    });
    let out = output_from_json(&v).unwrap();
    let h = &out.hypotheses[0];
    assert_eq!(h.statement.chars().count(), limits::STATEMENT);
    assert!(long.starts_with(&h.statement));
    assert_eq!(h.prior_incidents[0].id.chars().count(), limits::INCIDENT_ID);
    assert_eq!(h.prior_incidents[0].why.chars().count(), limits::WHY);
    let a = &out.actions[0];
    assert_eq!(a.target.chars().count(), limits::TARGET);
    assert_eq!(a.rationale.chars().count(), limits::RATIONALE);
    // Trimmed after the cut: no trailing blank left by a cut between words.
    let words = format!("{} tail", "word ".repeat(100));
    let v = json!({"hypotheses": [{"statement": words}], "actions": []});
    let s = &output_from_json(&v).unwrap().hypotheses[0].statement;
    assert!(
        s.chars().count() <= limits::STATEMENT && !s.ends_with(' '),
        "{s:?}"
    );
    // A lesson given as one text is cut per part.
    let rule = lesson_from_json(
        &json!(format!(
            "ALWAYS: {long} BECAUSE: {long} SCOPE: {long} SEVERITY: high"
        )),
        RuleSeverity::Low,
        "x",
    );
    assert_eq!(rule.always.chars().count(), limits::LESSON_PART);
    assert_eq!(rule.because.chars().count(), limits::LESSON_PART);
    assert_eq!(rule.scope.chars().count(), limits::SCOPE);
    assert_eq!(rule.severity, RuleSeverity::High);
}
