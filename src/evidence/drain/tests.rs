//! Tests of the Drain tree, its matching rules and the masks, through whole lines.

use super::*;

fn masked(s: &str) -> String {
    let mut t = Tokens::default();
    t.fill(s, 1000);
    (0..t.len()).map(|i| t.tok(i)).collect::<Vec<_>>().join(" ")
}

#[test]
fn masks() {
    assert_eq!(
        masked("Stored chunk chk_-4417302958812 from: /10.31.4.77:41822 to: /10.31.4.78:7001"),
        "Stored chunk <*> from: <*> to: <*>"
    );
    assert_eq!(
        masked("shell started for account mail by (uid=0)"),
        "shell started for account mail by (uid=<*>)"
    );
    assert_eq!(masked("by SSH(uid=0)"), "by SSH(uid=<*>)");
    assert_eq!(
        masked("peer=198-51-100-23.dsl.example.net user=root"),
        "peer=<*> user=root"
    );
    assert_eq!(
        masked("resolve for mx.qvotrelbnapw.example [203.0.113.61] failed"),
        "resolve for <*> [<*>] failed"
    );
    assert_eq!(
        masked("id 550e8400-e29b-41d4-a716-446655440000 at 0x7ffd"),
        "id <*> at <*>"
    );
    assert_eq!(masked("java.io.IOException: x"), "java.io.IOException: x");
    assert_eq!(masked("mice.c(1234)]:"), "mice.c(<*>)]:");
    assert_eq!(masked("took 12.5ms, 3 retries"), "took <*>, <*> retries");
    assert_eq!(
        masked("10.0.0.1:50010:Got reply from fe80::1:beef"),
        "<*>:Got reply from <*>"
    );
    assert_eq!(
        masked(r#"request: "GET /a/b HTTP/1.1", msg="slow query" {"user": "bo"}"#),
        r#"request: "<*>", msg="<*>" {"user": "<*>"}"#
    );
    assert_eq!(
        masked("peer [2001:db8::1]:443 via [::1] and [10.0.0.1]"),
        "peer <*> via [<*>] and [<*>]"
    );
    assert_eq!(
        masked("GET https://x.example/a?b=c from /var/lib/app and jk2_init() ok"),
        "GET <*> from <*> and jk2_init() ok"
    );
}

#[test]
fn a_word_key_before_a_colon_stays() {
    assert_eq!(
        masked("reclaimed heap-used:5120kB, peers:3 at fe80::a:1 sha1:9f2c"),
        "reclaimed heap-used:<*>, peers:<*> at <*> <*>"
    );
    assert_eq!(masked("lease:0x2f17 ab:12"), "lease:<*> <*>");
}

fn add(d: &mut Drain, t: &mut Tokens, l: &str) -> u32 {
    t.fill(l, 100);
    match d.add(t) {
        AddResult::Template { id, .. } => id,
        AddResult::Overflow => u32::MAX,
    }
}

#[test]
fn drain_groups() {
    // plain Drain on words: two names are one variable (with categorical words, two plain words
    // are two variants until a third arrives; see the test of that below)
    let mut d = Drain::new(DrainConfig {
        categorical_words: false,
        ..DrainConfig::default()
    });
    let mut t = Tokens::default();
    let mut ids = Vec::new();
    for l in [
        "Connection pool exhausted (waited 100 ms)",
        "Connection pool exhausted (waited 250 ms)",
        "login by alice ok",
        "login by bob ok",
        "shell started for account mail by (uid=0)",
        "shell started for account backup by SSH(uid=0)",
    ] {
        ids.push(add(&mut d, &mut t, l));
    }
    assert_eq!(ids, vec![0, 0, 1, 1, 2, 3]);
    assert_eq!(
        d.variant_template(0),
        "Connection pool exhausted (waited <*> ms)"
    );
    assert_eq!(d.variant_template(1), "login by <*> ok");
    assert_eq!(
        d.variant_template(3),
        "shell started for account backup by SSH(uid=<*>)"
    );
}

#[test]
fn categorical_fields_split_until_saturated() {
    let mut d = Drain::new(DrainConfig::default());
    let mut t = Tokens::default();
    let a = add(&mut d, &mut t, "auth failure rhost=1.2.3.4 user=root");
    let b = add(&mut d, &mut t, "auth failure rhost=1.2.3.5 user=guest");
    let c = add(&mut d, &mut t, "auth failure rhost=1.2.3.6 user=root");
    assert_eq!((a, b, c), (0, 1, 0));
    assert_eq!(d.variant_template(1), "auth failure rhost=<*> user=guest");
    assert_eq!(
        add(&mut d, &mut t, "auth failure rhost=1.2.3.7 user=test"),
        2
    );
    assert!(d.take_merges().is_empty());
    // 4th distinct value: the field is a variable, the variants merge
    assert_eq!(
        add(&mut d, &mut t, "auth failure rhost=1.2.3.8 user=ftp"),
        0
    );
    assert_eq!(d.take_merges(), vec![(0, 1), (0, 2)]);
    assert_eq!(d.variant_template(0), "auth failure rhost=<*> user=<*>");
    // an empty field is a different format
    assert_eq!(add(&mut d, &mut t, "auth failure rhost= user=root"), 3);
}

#[test]
fn differing_tokens_keep_their_shared_punctuation() {
    let mut d = Drain::new(DrainConfig::default());
    let mut t = Tokens::default();
    let a = add(&mut d, &mut t, "token rejected for subject alice: expired");
    let b = add(&mut d, &mut t, "token rejected for subject bob: expired");
    assert_eq!(a, b);
    assert_eq!(
        d.variant_template(a),
        "token rejected for subject <*>: expired"
    );
    let c = add(&mut d, &mut t, "peer closed (reset) while reading");
    let e = add(&mut d, &mut t, "peer closed () while reading");
    assert_eq!(c, e);
    assert_eq!(d.variant_template(c), "peer closed (<*>) while reading");
}

#[test]
fn an_event_split_by_its_first_two_messages_is_merged_again() {
    let lines = [
        "lease 10 granted to alpha for region",
        // differs in two places: a second group (and another leaf: `job` is constant)
        "lease job granted to beta for region",
        // generalises the first group, which now covers the second one
        "lease 11 granted to beta for region",
        "lease job granted to gamma for region",
    ];
    let mut t = Tokens::default();
    // the names are plain words: without categorical words, as in Drain, they are one variable
    let plain = DrainConfig {
        categorical_words: false,
        ..DrainConfig::default()
    };
    let mut d = Drain::new(plain);
    let ids: Vec<u32> = lines.iter().map(|l| add(&mut d, &mut t, l)).collect();
    assert_eq!(ids, vec![0, 1, 0, 0]);
    assert_eq!(d.take_merges(), vec![(0, 1)]);
    assert_eq!(d.variant_template(0), "lease <*> granted to <*> for region");
    // Without the merge step the second group stays apart.
    let mut d = Drain::new(DrainConfig {
        merge: false,
        ..plain
    });
    let ids: Vec<u32> = lines.iter().map(|l| add(&mut d, &mut t, l)).collect();
    assert_eq!(ids, vec![0, 1, 0, 1]);
}

#[test]
fn embedded_dates_are_variables() {
    assert_eq!(
        masked("dialed 192.0.2.9 (edge.example.org) at Tue Mar 08 11:42:19 2022"),
        "dialed <*> (<*>) at <*>"
    );
    assert_eq!(
        masked("lease renewed until 2026-11-29 10:00:00, next at 10:05:00"),
        "lease renewed until <*>, next at <*>"
    );
    assert_eq!(masked("seen Jun 17 twice"), "seen <*> <*> twice");
    assert_eq!(masked("Sun is shining in May"), "Sun is shining in May");
}

#[test]
fn a_bare_request_line_keeps_its_route_and_a_keyed_one_is_a_parameter() {
    assert_eq!(
        masked(
            r#"10.1.2.3 "PATCH /v3/9f8e7d6c5b4a39281706f5e4d3c2b1a0/volumes/88 HTTP/1.1" status: 200 len: 87"#
        ),
        r#"<*> "PATCH /v3/<*>/volumes/<*> HTTP/<*>" status: <*> len: <*>"#
    );
    assert_eq!(
        masked(r#"upstream failed, request: "GET /boxes/12 HTTP/1.1", host: "a""#),
        r#"upstream failed, request: "<*>", host: "<*>""#
    );
    assert_eq!(
        masked(r#"proxy req="GET /boxes/12 HTTP/1.1" done"#),
        r#"proxy req="<*>" done"#
    );
}

#[test]
fn request_lines_of_different_routes_stay_apart_and_ids_of_one_route_join() {
    let mut d = Drain::new(DrainConfig::default());
    let mut t = Tokens::default();
    let line = |m: &str, p: &str| format!(r#"10.0.0.9 "{m} {p} HTTP/1.1" status: 200 len: 12"#);
    let a = add(&mut d, &mut t, &line("GET", "/shop/41/cart"));
    assert_eq!(add(&mut d, &mut t, &line("GET", "/shop/977/cart")), a);
    let mut others = Vec::new();
    for (m, p) in [
        ("GET", "/shop/41/orders"),
        ("POST", "/shop/41/cart"),
        ("GET", "/shop/41/wishlist"),
        ("DELETE", "/shop/41/cart"),
        ("GET", "/shop/41/returns"),
    ] {
        let id = add(&mut d, &mut t, &line(m, p));
        assert_ne!(id, a, "{m} {p}");
        assert!(!others.contains(&id), "{m} {p}");
        others.push(id);
    }
    assert_eq!(add(&mut d, &mut t, &line("GET", "/shop/5/cart")), a);
}

#[test]
fn a_url_with_a_scheme_is_not_a_key_value_pair() {
    assert_eq!(
        masked("Input split: hdfs://nn7:8020/lake/part-00003:0+512"),
        "Input split: <*>"
    );
}

#[test]
fn compound_identifiers_are_masked_whole_whatever_their_runs() {
    assert_eq!(masked("held by 4411@edge-07 now"), "held by <*>@<*> now");
    assert_eq!(masked("got shard_12_replica3@cachebox"), "got <*>@cachebox");
    assert_eq!(
        masked("got shard_12_replica31@cachebox"),
        "got <*>@cachebox"
    );
    assert_eq!(masked("lock(job_2026_0042_r_000007_1)"), "lock(<*>)");
    // names stay: no run of the compound is a variable
    assert_eq!(masked("jk2_init() ok"), "jk2_init() ok");
    let mut t = Tokens::default();
    t.set_options(MaskOptions {
        compound_ids: false,
        ..MaskOptions::default()
    });
    t.fill("got shard_12_replica3@cachebox", 10);
    assert_eq!(t.tok(1), "shard_<*>_replica3@cachebox");
}

#[test]
fn stage_and_task_numbers_mask_the_same_way_in_every_position() {
    assert_eq!(
        masked("Lost task 12.1 in stage 3.0 (TID 907, worker-3): boom"),
        "Lost task <*> in stage <*> (TID <*>, <*>): boom"
    );
    assert_eq!(
        masked("Lost task 7.0 in stage 14.2 (TID 8, node-12): boom"),
        "Lost task <*> in stage <*> (TID <*>, <*>): boom"
    );
}

#[test]
fn two_words_split_an_event_and_a_third_makes_the_position_a_variable() {
    let mut d = Drain::new(DrainConfig::default());
    let mut t = Tokens::default();
    let a = add(&mut d, &mut t, "Shelf 4 packed as crates in bay 9");
    let b = add(&mut d, &mut t, "Shelf 7 packed as pallets in bay 2");
    assert_ne!(a, b);
    assert_eq!(add(&mut d, &mut t, "Shelf 1 packed as crates in bay 3"), a);
    let mut d = Drain::new(DrainConfig::default());
    let x = add(&mut d, &mut t, "ticket opened for agent maya by desk 4");
    add(&mut d, &mut t, "ticket opened for agent omar by desk 5");
    let z = add(&mut d, &mut t, "ticket opened for agent lena by desk 6");
    let merged: HashMap<u32, u32> = d.take_merges().into_iter().map(|(k, v)| (v, k)).collect();
    let root = |mut i: u32| {
        while let Some(&k) = merged.get(&i) {
            i = k;
        }
        i
    };
    assert_eq!(root(x), root(z));
    let mut d = Drain::new(DrainConfig {
        categorical_words: false,
        ..DrainConfig::default()
    });
    let a = add(&mut d, &mut t, "Shelf 4 packed as crates in bay 9");
    assert_eq!(add(&mut d, &mut t, "Shelf 7 packed as pallets in bay 2"), a);
}
