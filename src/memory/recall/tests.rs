//! Unit tests of the recall stages.

use super::explain::is_weak;
use super::fusion::{IncidentList, SCORE_SHARE, fuse_incidents};
use super::*;

#[test]
fn years_numbers_and_timestamp_pieces_are_not_shown_as_matched_words() {
    let shown: Vec<String> =
        content_words("INC-2026-0042 at 2026-11-29T14:05:12Z: 5xx from http2 after 30000ms")
            .into_iter()
            .filter(|w| is_displayable_word(w))
            .collect();
    assert_eq!(shown, ["inc", "5xx", "http2"]);
}

#[test]
fn negated_findings_are_dropped_to_the_end_of_their_clause() {
    assert_eq!(
        strip_negated("workers: 40 'busy', 0 'stuck on locks'; p50 12 ms"),
        "workers: 40 'busy', ; p50 12 ms"
    );
    assert_eq!(
        strip_negated("queue depth rising on 8/8 shards; no parse failures"),
        "queue depth rising on 8/8 shards; "
    );
    assert_eq!(
        strip_negated("retried without backoff. Disk fine"),
        "retried . Disk fine"
    );
    // Not cues: parts of numbers, paths and words.
    for kept in [
        "error rate 0.2% -> 38%",
        "wrote /var/0/log",
        "nothing to see, notation",
    ] {
        assert_eq!(strip_negated(kept), kept);
    }
}

#[test]
fn negation_ends_at_but_and_never_cuts_inside_a_character() {
    assert_eq!(
        strip_negated("no errors but the pool is exhausted"),
        "but the pool is exhausted"
    );
    assert!(
        derive_tags("no errors but the pool is exhausted")
            .contains(&"connection_pool_exhausted".into())
    );
    assert!(
        derive_tags("pg: write to \"pg_wal/0001\" failed: No space left on device")
            .contains(&"disk_full".into())
    );
    // Characters whose lower case has another byte length (Ⱥ grows, the Ångström and
    // Kelvin signs shrink) around a cue.
    for s in ["ȺȺȺ0 ñÅÅÅ", "İİİ0 ñKẞ", "ñ no İ errors", "0 ẞẞ, 0 Ⱥ"] {
        let out = strip_negated(s);
        assert!(out.len() <= s.len(), "{s} → {out}");
    }
    assert_eq!(strip_negated("ȺȺȺ 0 ñÅÅÅ, ok"), "ȺȺȺ , ok");
}

#[test]
fn a_cue_inside_a_failure_phrase_is_kept() {
    for kept in [
        "write failed: No space left on device",
        "dial tcp: lookup db.internal: no such host",
        "connections not returned to the pool",
    ] {
        assert_eq!(strip_negated(kept), kept, "{kept}");
    }
    assert!(derive_tags("write failed: No space left on device").contains(&"disk_full".into()));
    assert!(!derive_tags("0 'unclosed client session'").contains(&"connection_leak".into()));
    assert!(
        derive_tags("25 warnings 'unclosed client session'").contains(&"connection_leak".into())
    );
}

#[test]
fn a_match_by_meaning_alone_under_the_chance_level_is_weak() {
    let chance = Some(0.31);
    assert!(is_weak(&["semantic"], Some(0.12), chance));
    assert!(is_weak(&["semantic", "incident"], Some(0.30), chance));
    // Above chance, or found by another list too, or no chance level known: not weak.
    assert!(!is_weak(&["semantic"], Some(0.45), chance));
    assert!(!is_weak(&["text", "semantic"], Some(0.12), chance));
    assert!(!is_weak(&["semantic"], Some(0.12), None));
    assert!(!is_weak(&["scope"], None, chance));
}

#[test]
fn score_fusion_keeps_the_margin_that_ranks_throw_away() {
    let list = |name: &'static str, xs: &[(&str, f32)]| -> IncidentList {
        (
            name,
            xs.iter()
                .map(|(i, s)| ((*i).to_string(), Some(*s)))
                .collect(),
        )
    };
    // Each incident is first in one list and second in the other: a tie by rank. In the
    // first list the two are almost level; in the second, "b" is far ahead.
    let lists = || {
        vec![
            list("doc_vector", &[("a", 0.50), ("b", 0.49), ("c", 0.10)]),
            list("passages", &[("b", 0.90), ("a", 0.30), ("c", 0.20)]),
        ]
    };
    let ids =
        |m: Vec<IncidentMatch>| -> Vec<String> { m.into_iter().map(|m| m.incident_id).collect() };
    assert_eq!(ids(fuse_incidents(lists(), 0.0)), ["a", "b", "c"]);
    assert_eq!(ids(fuse_incidents(lists(), SCORE_SHARE)), ["b", "a", "c"]);
    let fused = fuse_incidents(lists(), SCORE_SHARE);
    assert_eq!(fused[0].ranks, [2, 1]);
    assert_eq!(fused[0].cosine, Some(0.49));
}

#[test]
fn a_note_about_the_service_on_call_that_matches_on_its_own_is_shown_after_the_first_result() {
    use super::fusion::{Fused, service_notes, show_service_notes};
    let candidate = |id: i64| crate::store::memory::Candidate {
        id,
        kind: MemoryKind::ServiceFact,
        validation: Validation::Confirmed,
        created_at: jiff::Timestamp::UNIX_EPOCH,
        importance: 2,
        evidence_count: 1,
        consolidated_into: None,
    };
    // Notes 1–4 are about the service on call; 10+ are records of past incidents.
    let notes = [1, 2, 3, 4].into_iter().collect();
    let words: Vec<_> = [10, 1, 11, 12, 13, 14, 4].map(candidate).to_vec();
    let meaning = vec![(candidate(3), 0.20), (candidate(2), 0.80)];
    // 1 by its words (rank 2), 2 by meaning above chance (rank 2); 3 under chance; 4 too low
    // in the word list (rank 7: it shares little more than the service's name).
    assert_eq!(
        service_notes(&notes, [&words, &[]], &meaning, Some(0.31)),
        [1, 2]
    );
    let fused = |id: i64| Fused {
        candidate: candidate(id),
        rrf: 0.0,
        lists: vec!["text"],
        cosine: None,
    };
    let mut ranked: Vec<(f64, Fused)> = [(0.9, 10), (0.8, 11), (0.7, 12), (0.6, 2), (0.5, 1)]
        .into_iter()
        .map(|(s, id)| (s, fused(id)))
        .collect();
    show_service_notes(&mut ranked, &[1, 2]);
    let order: Vec<i64> = ranked.iter().map(|(_, f)| f.candidate.id).collect();
    assert_eq!(order, [10, 1, 2, 11, 12]);
    // Scores stay best first; the notes say why they are there.
    assert!(ranked.windows(2).all(|w| w[0].0 >= w[1].0));
    assert!(ranked[1].1.lists.contains(&"service_note"));
}

#[test]
fn the_chance_level_is_two_deviations_over_the_mean() {
    assert_eq!(crate::memory::embeddings::chance_level([0.1; 5]), None);
    let mut cosines = vec![0.1f32; 10];
    cosines.extend([0.3f32; 10]);
    let level = crate::memory::embeddings::chance_level(cosines).unwrap();
    assert!((level - 0.4).abs() < 1e-5, "{level}");
}

#[test]
fn the_load_shape_tells_a_surge_from_steady_traffic() {
    for surge in [
        "search rps 450 -> 1,200 at 08:30",
        "traffic jumped from 2.5k to 9k rps within a minute",
        "Traffic went from 800 to 4k.",
        "request rate 3k → 12k rps",
    ] {
        assert_eq!(load_shape(surge), Some("traffic_surge"), "{surge}");
    }
    for steady in [
        "request rate flat at ~510 rps (normal)",
        "inbound qps holding steady around 70/s, like yesterday",
        "Traffic looks normal; caches warm",
    ] {
        assert_eq!(load_shape(steady), Some("steady_load"), "{steady}");
    }
    for neither in [
        "request rate 300 -> 350 rps",
        "success ratio 99% -> 21%",
        "traffic dashboard for 2024-05-01 to 2024-05-02",
        "traffic report 10:00 to 12:00",
        "workers 12/12 busy",
    ] {
        assert_eq!(load_shape(neither), None, "{neither}");
    }
}

mod conditions_read {
    use super::super::conditions::{Dimension, conditions_of};

    fn get(text: &str, d: Dimension) -> Vec<&'static str> {
        conditions_of(text).get(d)
    }

    #[test]
    fn demand_that_moves_reads_rising_and_demand_that_holds_reads_flat() {
        assert_eq!(
            get(
                "Checkout traffic tripled after the newsletter went out",
                Dimension::Load
            ),
            ["rising"]
        );
        assert_eq!(
            get("qps 300 -> 1,400 in ten minutes", Dimension::Load),
            ["rising"]
        );
        assert_eq!(
            get(
                "Request volume is in line with last Tuesday.",
                Dimension::Load
            ),
            ["flat"]
        );
        assert_eq!(
            get("Orders did not increase at all.", Dimension::Load),
            ["flat"]
        );
        assert!(get("The balancer health checks fail", Dimension::Load).is_empty());
    }

    #[test]
    fn the_people_behind_demand_count_as_demand() {
        assert_eq!(
            get(
                "Shoppers were up sevenfold during the sale",
                Dimension::Load
            ),
            ["rising"]
        );
        assert_eq!(
            get(
                "Subscribers up everywhere since the announcement",
                Dimension::Load
            ),
            ["rising"]
        );
        assert_eq!(
            get("Storefront visits level with last Monday", Dimension::Load),
            ["flat"]
        );
        assert_eq!(
            get("Page views haven't moved all week", Dimension::Load),
            ["flat"]
        );
        assert!(get("We set up the listeners on port 9000", Dimension::Load).is_empty());
        // One movement per phrase: the comma ends the subject's reach.
        assert_eq!(
            get(
                "Shoppers up across the board, each basket as big as before",
                Dimension::Load
            ),
            ["rising"]
        );
        // The longer cue stands: "N times the usual" is a surge.
        assert_eq!(
            get(
                "Refund requests are six times the usual this morning",
                Dimension::Load
            ),
            ["rising"]
        );
        assert_eq!(
            get("Login volume higher than usual since noon", Dimension::Load),
            ["rising"]
        );
        // What the service sends is no demand on it.
        assert!(get("Egress traffic tripled overnight", Dimension::Load).is_empty());
    }

    #[test]
    fn one_unit_against_the_whole_fleet() {
        assert_eq!(
            get(
                "Errors come from a single broker; the other brokers are healthy",
                Dimension::Scope
            ),
            ["one"]
        );
        assert_eq!(
            get("1 of 9 shards rejects writes", Dimension::Scope),
            ["one"]
        );
        assert_eq!(
            get(
                "Timeouts on every region at the same minute",
                Dimension::Scope
            ),
            ["all"]
        );
        assert_eq!(
            get("5xx spread evenly over the fleet", Dimension::Scope),
            ["all"]
        );
        // "all requests" names no unit of the fleet.
        assert!(get("all requests to /pay fail", Dimension::Scope).is_empty());
    }

    #[test]
    fn what_changed_before_onset_and_a_negated_change() {
        assert_eq!(
            get(
                "Started ten minutes after version 4.2 was deployed",
                Dimension::Release
            ),
            ["changed"]
        );
        assert_eq!(
            get(
                "Someone lowered the timeout on the gateway at 09:12",
                Dimension::Config
            ),
            ["changed"]
        );
        assert_eq!(
            get(
                "The intermediate certificate was rotated at 02:00",
                Dimension::Credential
            ),
            ["changed"]
        );
        assert_eq!(
            get("Nothing was deployed this week.", Dimension::Release),
            ["unchanged"]
        );
        assert_eq!(
            get("There was no release before it began", Dimension::Release),
            ["unchanged"]
        );
        // "No release" says nothing about the configuration.
        assert!(get("There was no release before it began", Dimension::Config).is_empty());
        assert_eq!(
            get("No changes anywhere since Friday", Dimension::Config),
            ["unchanged"]
        );
        assert_eq!(
            get(
                "Last deploy of the gateway: 19 days ago",
                Dimension::Release
            ),
            ["unchanged"]
        );
        // A proposal is not a report.
        assert!(
            get(
                "A teammate wants to revert yesterday's deploy",
                Dimension::Release
            )
            .is_empty()
        );
    }

    #[test]
    fn growth_shape_bottleneck_and_timing() {
        assert_eq!(
            get(
                "The data volume climbs steadily, about 30 GB per day",
                Dimension::Growth
            ),
            ["steady"]
        );
        assert_eq!(
            get("Our disk fills in bursts of about 40 GB", Dimension::Growth),
            ["step"]
        );
        assert_eq!(
            get(
                "The job is CPU-bound from start to end",
                Dimension::Bottleneck
            ),
            ["own"]
        );
        assert_eq!(
            get(
                "Threads sit idle, blocked on the ledger service",
                Dimension::Bottleneck
            ),
            ["waiting"]
        );
        assert_eq!(
            get(
                "Slowness appears only inside the nightly reindex window",
                Dimension::Timing
            ),
            ["scheduled"]
        );
        assert_eq!(
            get("The delay is there around the clock", Dimension::Timing),
            ["continuous"]
        );
    }

    #[test]
    fn agreement_counts_shared_and_contradicted_dimensions() {
        let query = conditions_of("Traffic doubled across all hosts once version 7 shipped");
        let same = conditions_of("Request rate went up 3x fleet-wide, just after the new build");
        let sibling = conditions_of("Traffic was flat; only one host failed; no deploy that day");
        let a = query.agreement(&same);
        assert_eq!((a.score, a.disagree.len()), (3.0, 0));
        let b = query.agreement(&sibling);
        assert_eq!((b.score, b.agree.len()), (-3.0, 0));
    }
}

mod sibling_rerank {
    use std::collections::HashMap;

    use super::super::IncidentMatch;
    use super::super::conditions::conditions_of;
    use super::super::siblings::{SIBLING_BAND, SIBLING_WEIGHT, rerank};

    fn m(id: &str, score: f64) -> IncidentMatch {
        IncidentMatch::for_test(id, score)
    }

    #[test]
    fn the_sibling_whose_conditions_match_moves_first_and_says_why() {
        let mut incidents = vec![m("INC-A", 1.0), m("INC-B", 0.95), m("INC-C", 0.2)];
        let reports: HashMap<String, String> = [
            ("INC-A", "Pool exhausted while traffic doubled for the sale."),
            ("INC-B", "Pool exhausted at flat traffic; slow queries on the database held the connections."),
        ]
        .into_iter()
        .map(|(i, t)| (i.to_string(), t.to_string()))
        .collect();
        let query = conditions_of("Connections all taken, request rate unchanged from last week");
        rerank(
            &mut incidents,
            &query,
            &reports,
            SIBLING_WEIGHT,
            SIBLING_BAND,
        );
        let ids: Vec<&str> = incidents.iter().map(|m| m.incident_id.as_str()).collect();
        assert_eq!(ids, ["INC-B", "INC-A", "INC-C"]);
        assert_eq!(incidents[0].conditions, ["load agrees"]);
        assert_eq!(incidents[1].conditions, ["load differs"]);
        assert!(incidents[0].sibling && incidents[1].sibling && !incidents[2].sibling);
        // A query that says nothing about conditions changes nothing.
        let mut again = vec![m("INC-A", 1.0), m("INC-B", 0.95)];
        rerank(
            &mut again,
            &conditions_of("pool exhausted"),
            &reports,
            SIBLING_WEIGHT,
            SIBLING_BAND,
        );
        assert_eq!(again[0].incident_id, "INC-A");
    }
}
