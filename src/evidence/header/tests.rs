use super::*;

fn content<'a>(layouts: &[Layout], line: &'a str) -> &'a str {
    for l in layouts {
        if let Some(a) = l.apply(line) {
            return &line[a.content..];
        }
    }
    line
}

#[test]
fn a_node_and_epoch_header_is_learned_from_the_lines() {
    let lines: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "{} rack{}-n{} 17000{:05} {} worker {} finished batch {}",
                1000 + i,
                i % 3,
                i % 7,
                i * 37,
                if i % 5 == 0 { "WARN" } else { "INFO" },
                i,
                i * 2
            )
        })
        .collect();
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    let ls = learn(&refs, false);
    assert_eq!(ls.len(), 1, "{ls:?}");
    assert_eq!(ls[0].cols, vec![Col::Var, Col::Var, Col::Time, Col::Level]);
    let a = ls[0].apply(&lines[5]).unwrap();
    assert_eq!(a.level, Some(Level::Warn));
    assert_eq!(&lines[5][a.content..], "worker 5 finished batch 10");
}

#[test]
fn two_interleaved_layouts_each_get_learned() {
    let mut lines = Vec::new();
    for i in 0..30 {
        lines.push(format!(
            "[{:02}.17 10:{:02}:00] agent.exe - uploaded chunk {i}",
            (i % 12) + 1,
            i
        ));
        lines.push(format!(
            "20240317-10:{:02}:00:123|Sync_Svc|{}|queue drained after {i} ms",
            i,
            4000 + i
        ));
    }
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    let ls = learn(&refs, false);
    assert_eq!(ls.len(), 2, "{ls:?}");
    assert_eq!(content(&ls, &lines[0]), "uploaded chunk 0");
    assert_eq!(content(&ls, &lines[1]), "queue drained after 0 ms");
    assert_eq!(content(&ls, "just a message"), "just a message");
}

fn learned_content(lines: &[String]) -> Vec<String> {
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    let ls = learn(&refs, false);
    lines.iter().map(|l| content(&ls, l).to_string()).collect()
}

#[test]
fn headers_of_several_shapes_are_learned() {
    let words = ["opened", "closed", "renewed", "dropped"];
    // month-day clock, pid, tid, one-letter level, tag
    let a: Vec<String> = (0..30)
        .map(|i| {
            format!(
                "11-{:02} 08:{:02}:{:02}.{:03}  {}  {} {} Radio{}: link {} on slot {i}",
                1 + i % 28,
                i,
                i,
                i * 3,
                900 + i,
                1200 + i * 7,
                ["I", "W", "D"][i % 3],
                ["Mgr", "Svc"][i % 2],
                words[i % 4]
            )
        })
        .collect();
    assert!(
        learned_content(&a)
            .iter()
            .zip(0..)
            .all(|(c, i)| *c == format!("link {} on slot {i}", words[i % 4])),
        "{:?}",
        learned_content(&a)
    );
    // rotated file name, ISO time, pid, level, component, bracketed request ids
    let b: Vec<String> = (0..30)
            .map(|i| {
                format!(
                    "api.log.{}.2026-11-0{}_10:00:00 2026-11-29 10:{:02}:00.{:03} {} INFO svc.api.wsgi [req-{:08x} {:016x} - -] {}",
                    i % 3,
                    1 + i % 5,
                    i,
                    i,
                    3000 + i,
                    i * 7919,
                    i * 104_729,
                    if i % 2 == 0 {
                        format!("10.0.0.{} GET /v1/item/{i} status: 200", i + 1)
                    } else {
                        format!("image {i} cached on host-{}", i % 4)
                    }
                )
            })
            .collect();
    assert_eq!(
        learned_content(&b)[4],
        "10.0.0.5 GET /v1/item/4 status: 200"
    );
    // kernel ring buffer: seconds since boot, no level
    let c: Vec<String> = (0..30)
        .map(|i| {
            format!(
                "[{:>5}.{:06}] usb {i}-1: device {} attached",
                i * 3,
                i * 11,
                words[i % 4]
            )
        })
        .collect();
    assert_eq!(learned_content(&c)[2], "usb 2-1: device renewed attached");
    // sequence number, node, two category words, epoch seconds, flag
    let d: Vec<String> = (0..30)
        .map(|i| {
            format!(
                "{} node-{} net.link state.{} {} {} interface eth{} changed state",
                77_000 + i,
                i % 9,
                ["up", "down"][i % 2],
                1_780_000_000 + i * 13,
                i % 2,
                i % 4
            )
        })
        .collect();
    assert_eq!(learned_content(&d)[3], "interface eth3 changed state");
}

#[test]
fn plain_messages_learn_no_header() {
    let lines: Vec<String> = (0..40)
        .map(|i| format!("request served path=/cart in {i} ms"))
        .collect();
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    assert!(learn(&refs, false).is_empty());
}

#[test]
fn a_bracketed_request_context_of_several_words_is_one_header_column() {
    let message = |i: usize| {
        if i.is_multiple_of(2) {
            format!("10.0.3.{i} \"GET /v1/racks/{i} HTTP/1.1\" status: 200")
        } else {
            format!("[rack: r-{i}] Rack sealed")
        }
    };
    let lines: Vec<String> = (0..40usize)
        .map(|i| {
            let ctx = if i.is_multiple_of(3) {
                "[-]".to_string()
            } else {
                format!("[req-{i:08x}-77aa-4c1d-9e0f-12ab34cd56ef 5e{i:030x} 9c{i:030x} - - -]")
            };
            format!(
                "2026-03-02 11:{:02}:{:02}.{:03} 4410 INFO shelf.api.wsgi {ctx} {}",
                i / 60,
                i % 60,
                i * 7,
                message(i)
            )
        })
        .collect();
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    let ls = learn(&refs, false);
    assert!(!ls.is_empty(), "{ls:?}");
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(content(&ls, l), message(i), "{ls:?}");
    }
}
