//! Tests of hand-picked pastes, header layouts learned from the paste, odd bytes and the
//! caches, through the public log API.

use super::*;

#[test]
fn a_short_hand_picked_paste_keeps_every_line_without_a_level() {
    let paste = "partner API says HTTP 429 with Retry-After: 45\n\
                 we send ~140 calls/s to the geocoder, quota is 40/s\n\
                 importer threads bumped 2 -> 12 at 07:15 for the backlog\n";
    let e = extract(EvidenceKind::Logs, paste);
    assert_eq!(e.observations[0].salience, SUMMARY_SALIENCE);
    let lines: Vec<&str> = e.observations[1..]
        .iter()
        .filter_map(|o| o.example.as_deref())
        .collect();
    assert_eq!(lines.len(), 3, "{:#?}", e.observations);
    assert!(lines.contains(&"we send ~140 calls/s to the geocoder, quota is 40/s"));
    let throttled = e.observations[1..]
        .iter()
        .find(|o| o.example.as_deref().is_some_and(|x| x.contains("429")))
        .expect("the 429 line");
    assert_eq!(throttled.failure_modes, vec!["rate_limited".to_string()]);

    // The same lines in a long log are not all surfaced: only what matters is.
    let long: String = paste.to_string()
        + &(0..40)
            .map(|i| format!("routine line number {i} ok\n"))
            .collect::<String>();
    let e = extract(EvidenceKind::Logs, &long);
    assert!(
        e.observations.iter().all(|o| o
            .example
            .as_deref()
            .is_none_or(|x| !x.contains("calls/s to the geocoder"))),
        "{:#?}",
        e.observations
    );
}

/// (event ids, templates) of a `LineId,EventId,EventTemplate` file.
fn labels(csv_text: &str) -> (Vec<String>, Vec<String>) {
    let recs = csv::records(csv_text);
    let id = recs[0].1.iter().position(|h| h == "EventId").unwrap();
    let tpl = recs[0].1.iter().position(|h| h == "EventTemplate").unwrap();
    recs[1..]
        .iter()
        .map(|(_, f)| (f[id].clone(), f[tpl].clone()))
        .unzip()
}

#[test]
fn our_own_samples_without_a_known_layout_are_grouped_like_the_labels() {
    for name in [
        "nginx_error",
        "spring_boot",
        "go_zap",
        "openstack_nova",
        "spark_executor",
    ] {
        let log = own(&format!("{name}.log"));
        let (truth, _) = labels(&own(&format!("{name}.templates.csv")));
        assert!(truth.len() >= 300, "{name}: {} labelled lines", truth.len());
        let mut x = LogExtractor::new().record_template_ids(true);
        for l in log.lines() {
            x.push_line(l);
        }
        let ga = grouping_accuracy(&x.template_ids(), &truth);
        let e = x.finish();
        assert!(ga >= 0.95, "{name}: GA {ga} < 0.95");
        assert_ne!(e.format, "plain", "{name}");
    }
}

#[test]
fn an_unknown_header_is_learned_and_its_time_and_level_kept() {
    let mut text = String::new();
    for i in 0..60u32 {
        let level = if i % 10 == 7 { "ERROR" } else { "INFO" };
        let msg = if i % 10 == 7 {
            format!("flush of segment {} failed: disk quota exceeded", 900 + i)
        } else {
            format!("segment {} sealed after {} writes", 900 + i, 3 * i)
        };
        text.push_str(&format!(
            "- {} 2026.03.{:02} store-{}.rack{} {level} {msg}\n",
            1_773_000_000 + i * 60,
            1 + i / 30,
            i % 4,
            i % 2
        ));
    }
    let mut x = LogExtractor::new();
    for l in text.lines() {
        x.push_line(l);
    }
    let t: Vec<(String, u64)> = x.templates().into_iter().map(|(_, t, c)| (t, c)).collect();
    assert_eq!(
        t,
        vec![
            ("segment <*> sealed after <*> writes".to_string(), 54),
            (
                "flush of segment <*> failed: disk quota exceeded".to_string(),
                6
            ),
        ]
    );
    let e = x.finish();
    assert_eq!(e.format, "learned");
    let err = e
        .observations
        .iter()
        .find(|o| o.statement.contains("disk quota"))
        .expect("the error template");
    assert_eq!(err.level.as_deref(), Some("error"));
    // A full disk quota is a full disk, not a rate limit (issue #49).
    assert_eq!(err.failure_modes, ["disk_full"]);
    assert_eq!(
        err.first_seen,
        Some(jiff::Timestamp::from_second(1_773_000_000 + 7 * 60).unwrap())
    );
}

#[test]
fn two_interleaved_unknown_formats_are_both_learned() {
    let mut text = String::new();
    for i in 0..50u32 {
        text.push_str(&format!(
            "[03.{:02} 09:{:02}:11] sync-agent.exe - uploaded {} files to bucket-{}\n",
            1 + i % 28,
            i,
            i * 3,
            i % 5
        ));
        text.push_str(&format!(
            "20260317-09:{:02}:11:{:03}|Queue_Mgr|{}|drained queue after {} ms\n",
            i,
            i * 7,
            5000 + i,
            i * 11
        ));
    }
    let mut x = LogExtractor::new().record_template_ids(true);
    for l in text.lines() {
        x.push_line(l);
    }
    let ids = x.template_ids();
    let truth: Vec<String> = (0..ids.len()).map(|i| (i % 2).to_string()).collect();
    assert_eq!(grouping_accuracy(&ids, &truth), 1.0);
    let t: Vec<String> = x.templates().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(
        t,
        vec![
            "uploaded <*> files to <*>".to_string(),
            "drained queue after <*> ms".to_string()
        ]
    );
    assert_eq!(x.finish().format, "learned");
}

#[test]
fn a_known_layout_mixed_with_an_unknown_one_keeps_both() {
    let mut text = String::new();
    for i in 0..40u32 {
        text.push_str(&format!(
            "Mar 17 09:{:02}:01 web-{} cron[{}]: job {} started\n",
            i % 60,
            i % 3,
            100 + i,
            i
        ));
        text.push_str(&format!(
            "17/03/26 09:{:02}:02 WARN pool.Monitor: pool {} has {} idle workers\n",
            i % 60,
            i % 4,
            i
        ));
    }
    let e = extract(EvidenceKind::Logs, &text);
    assert_eq!(e.templates, 2, "{:#?}", e.observations);
    assert_eq!(e.format, "mixed");
    let warn = e
        .observations
        .iter()
        .find(|o| o.statement.contains("idle workers"))
        .expect("the warn template");
    assert_eq!(warn.level.as_deref(), Some("warn"));
    assert!(
        warn.statement.ends_with(": pool <*> has <*> idle workers"),
        "{}",
        warn.statement
    );
}

#[test]
fn odd_bytes_in_headers_and_messages_never_panic() {
    let parts = [
        "[",
        "]",
        "\"",
        "'",
        "=\"",
        "é",
        "日本",
        "2026-11-29",
        "10:00:00",
        "|",
        "::",
        "[::1]:",
        "(",
        ")",
        "<*>",
        "Jun",
        "17",
        "2026.11.29",
        "17/11/29",
        "-",
        "ERROR",
        "x=",
        "\u{feff}",
        "\t",
        "{\"k\":",
        "0x1f",
        "/a/b/",
        "ü:",
        "I",
        "[ 1.000000]",
    ];
    let mut seed = 7u64;
    let mut next = || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) as usize
    };
    let mut text = String::new();
    for _ in 0..600 {
        let n = 1 + next() % 12;
        for k in 0..n {
            if k > 0 && next() % 3 > 0 {
                text.push(' ');
            }
            text.push_str(parts[next() % parts.len()]);
        }
        text.push('\n');
    }
    let e = extract(EvidenceKind::Logs, &text);
    assert_eq!(e.lines, 600);
    let lines: Vec<&str> = text.lines().collect();
    for l in header::learn(&lines, false) {
        for line in &lines {
            if let Some(a) = l.apply(line) {
                assert!(line.is_char_boundary(a.content));
            }
        }
    }
}

#[test]
fn observations_left_out_by_the_cap_are_counted_in_the_summary() {
    let mut text = String::new();
    for n in 1..=40 {
        let words: Vec<String> = (0..n).map(|i| format!("step{i}")).collect();
        text.push_str(&format!(
            "2026-12-01T10:00:00Z ERROR payment failed at {}\n",
            words.join(" ")
        ));
    }
    let x = extract(EvidenceKind::Logs, &text);
    assert_eq!(x.observations.len(), MAX_OBSERVATIONS);
    let summary = &x.observations[0].statement;
    assert!(
        summary.contains("16 more flagged templates not shown (the 24 most salient are kept)"),
        "{summary}"
    );
}

#[test]
fn the_shape_cache_changes_no_grouping() {
    // digits of other lengths, embedded dates, hex ids and ports: every grouping decision that
    // reads digits, with the shape cache on and off
    let mut text = String::new();
    for i in 0..300u32 {
        let line = match i % 5 {
            0 => format!(
                "1{} run-{} flushed {} pages to disk{}",
                i,
                i % 7,
                i * 13,
                i % 3
            ),
            1 => format!(
                "2026-03-{:02} 10:{:02}:00 lease {:x} renewed until Mar {} 2027",
                1 + i % 28,
                i % 60,
                i * 977,
                1 + i % 28
            ),
            2 => format!(
                "peer 10.{}.0.{}:{} closed after {} ms",
                i % 200,
                i % 250,
                1000 + i,
                i
            ),
            3 => format!("ssh{} session {} opened by uid={}", i % 3, i, i % 2),
            _ => format!(
                "task {} state {} at 1{}:{}:{}",
                i,
                ["queued", "running"][i as usize % 2],
                i % 10,
                10 + i % 50,
                10 + i % 49
            ),
        };
        text.push_str(&line);
        text.push('\n');
    }
    let ids = |on: bool| {
        let mut x = LogExtractor::with_year(2026)
            .shape_cache(on)
            .record_template_ids(true);
        for l in text.lines() {
            x.push_line(l);
        }
        let ids = x.template_ids();
        let names: std::collections::HashMap<u32, String> =
            x.templates().into_iter().map(|(i, t, _)| (i, t)).collect();
        ids.iter().map(|i| names[i].clone()).collect::<Vec<_>>()
    };
    assert_eq!(ids(true), ids(false));
}
