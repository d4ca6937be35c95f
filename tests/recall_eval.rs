//! Recall quality gate (issue #9): runs the recall evaluation on the public development set and
//! fails when a figure drops below its floor (a little under the measured figures). Skipped, with
//! a loud message, when the set is not checked out next to the repository.

use std::path::Path;

const SET: &str = "../shared/data/recall-dev.json";

/// Floors: measured figures minus a small margin.
const QUERY_HIT1: f64 = 0.96;
const QUERY_MRR: f64 = 0.98;
const HARD_HIT1: f64 = 0.87;
const PRESCRIPTIVE_HIT1: f64 = 0.93;
const PRESCRIPTIVE_HIT3: f64 = 1.0;
const MUST_WARN_COVERAGE: f64 = 1.0;
const MAX_SECONDS: f64 = 60.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_quality_stays_above_its_floors() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SET);
    if !path.exists() {
        eprintln!(
            "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
             !! SKIPPED recall_eval: {} not found — recall quality NOT measured\n\
             !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n",
            path.display()
        );
        return;
    }
    let report = incidentmind::eval::recall_eval(&path)
        .await
        .expect("evaluation runs");
    println!("{report}");
    let checks = [
        ("query hit@1", report.query_metrics.hit1, QUERY_HIT1),
        ("query MRR", report.query_metrics.mrr, QUERY_MRR),
        ("hard hit@1", report.hard_metrics.hit1, HARD_HIT1),
        (
            "prescriptive hit@1",
            report.prescriptive_metrics.hit1,
            PRESCRIPTIVE_HIT1,
        ),
        (
            "prescriptive hit@3",
            report.prescriptive_metrics.hit3,
            PRESCRIPTIVE_HIT3,
        ),
        (
            "must-warn coverage",
            report.must_warn_coverage,
            MUST_WARN_COVERAGE,
        ),
    ];
    let failed: Vec<String> = checks
        .iter()
        .filter(|(_, got, floor)| got < floor)
        .map(|(name, got, floor)| format!("{name} {got:.3} < floor {floor:.3}"))
        .collect();
    assert!(failed.is_empty(), "below the floor: {failed:?}\n{report}");
    assert_eq!(report.hidden, 0.0, "a warned recommendation was hidden");
    assert!(
        report.elapsed_secs < MAX_SECONDS,
        "took {:.1} s",
        report.elapsed_secs
    );
}
