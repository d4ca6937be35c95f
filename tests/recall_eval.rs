//! Recall quality gate: runs the recall evaluation with the built-in embedding model on the four
//! public development sets and fails when a figure drops below its floor (a little under the
//! measured figures) or when prescriptive questions are answered worse than plain BM25 over the
//! same documents answers them. Weights are chosen on the union of the sets:
//! `recall-dev-siblings.json` (pairs that share a symptom and differ in cause: only the evidence
//! decides), `recall-dev-hard.json` (confusable groups of three, other words),
//! `recall-dev-prescriptive.json` (questions as on-call engineers type them, over groups of four
//! siblings; incidents in three styles) and `recall-dev.json` (the regression check). A missing
//! set is a loud skip locally and a failure under `CI=true`.

#[path = "support/skip.rs"]
mod skip;

use std::path::Path;
use std::sync::Arc;

use incidentmind::cli::eval::Report;
use incidentmind::memory::RecallTuning;
use incidentmind::memory::embeddings::BuiltinEmbedder;

/// Floors of one set: `(query hit@1, query MRR, hard hit@1, prescriptive hit@1, prescriptive
/// hit@3, must-warn coverage)`.
struct Floors {
    hit1: f64,
    mrr: f64,
    hard_hit1: f64,
    prescriptive_hit1: f64,
    prescriptive_hit3: f64,
    must_warn: f64,
}

/// Longest a run may take on this machine (2 cores, debug build with optimised model crates),
/// with the four sets run side by side: a guard against a pathological slowdown, not a speed
/// figure (`recall-bench` prints those).
const MAX_SECONDS: f64 = 900.0;

async fn report_of(set: &str) -> Option<Report> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(set);
    if !path.exists() {
        skip::skip(
            "recall_eval",
            &format!("{} is missing: recall quality", path.display()),
            skip::Required::InCi(None),
        );
        return None;
    }
    let dir = incidentmind::memory::minilm::default_dir();
    let embedder = BuiltinEmbedder::load(&dir).expect("the built-in model under models/ loads");
    let report = incidentmind::cli::eval::recall_eval(
        &path,
        Some(Arc::new(embedder)),
        RecallTuning::default(),
    )
    .await
    .expect("evaluation runs");
    println!("{set}\n{report}");
    Some(report)
}

fn check(report: &Report, f: &Floors) {
    let checks = [
        ("query hit@1", report.query_metrics.hit1, f.hit1),
        ("query MRR", report.query_metrics.mrr, f.mrr),
        ("hard hit@1", report.hard_metrics.hit1, f.hard_hit1),
        (
            "prescriptive hit@1",
            report.prescriptive_metrics.hit1,
            f.prescriptive_hit1,
        ),
        (
            "prescriptive hit@3",
            report.prescriptive_metrics.hit3,
            f.prescriptive_hit3,
        ),
        ("must-warn coverage", report.must_warn_coverage, f.must_warn),
    ];
    let failed: Vec<String> = checks
        .iter()
        .filter(|(_, got, floor)| got < floor)
        .map(|(name, got, floor)| format!("{name} {got:.3} < floor {floor:.3}"))
        .collect();
    assert!(failed.is_empty(), "below the floor: {failed:?}\n{report}");
    assert!(
        report.prescriptive_metrics.hit1 >= report.bm25_prescriptive_metrics.hit1,
        "prescriptive hit@1 {:.3} below plain BM25's {:.3}\n{report}",
        report.prescriptive_metrics.hit1,
        report.bm25_prescriptive_metrics.hit1
    );
    assert_eq!(report.hidden, 0.0, "a warned recommendation was hidden");
    assert!(
        report.elapsed_secs < MAX_SECONDS,
        "took {:.1} s",
        report.elapsed_secs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_on_the_hard_development_set_stays_above_its_floors() {
    if let Some(report) = report_of("../shared/data/recall-dev-hard.json").await {
        check(
            &report,
            // Measured 2026-12-04: 0.972 / 0.981 / 1.000 / 1.000 / 1.000 / 1.000. Query hit@1 and
            // MRR at the floors of the recall issues (0.95, 0.97); the others allow one miss.
            &Floors {
                hit1: 0.95,
                mrr: 0.97,
                hard_hit1: 0.93,
                prescriptive_hit1: 0.94,
                prescriptive_hit3: 1.0,
                must_warn: 0.97,
            },
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_on_the_regression_set_stays_above_its_floors() {
    if let Some(report) = report_of("../shared/data/recall-dev.json").await {
        check(
            &report,
            // Measured 2026-12-04: 1.000 / 1.000 / 1.000 / 0.933 / 1.000 / 1.000.
            &Floors {
                hit1: 0.96,
                mrr: 0.98,
                hard_hit1: 0.95,
                prescriptive_hit1: 0.9,
                prescriptive_hit3: 1.0,
                must_warn: 1.0,
            },
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_tells_siblings_apart_on_the_siblings_set() {
    if let Some(report) = report_of("../shared/data/recall-dev-siblings.json").await {
        check(
            &report,
            // Measured 2026-12-04: 0.958 / 0.979 / 0.958 / 1.000 / 1.000 / 1.000 (the sibling stage
            // off: 0.833 / 0.910 / 0.833 / 0.667 / 1.000 / 0.917). Floors at the recall issue's:
            // hit@1 and prescriptive hit@1 0.95, every dead end warned.
            &Floors {
                hit1: 0.95,
                mrr: 0.97,
                hard_hit1: 0.95,
                prescriptive_hit1: 0.95,
                prescriptive_hit3: 1.0,
                must_warn: 1.0,
            },
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_are_answered_by_the_right_lesson_on_the_prescriptive_set() {
    if let Some(report) = report_of("../shared/data/recall-dev-prescriptive.json").await {
        check(
            &report,
            // Measured 2026-12-07 (issue #53's second pass): 0.875 / 0.906 / 0.857 / 0.875 /
            // 0.975 / 0.938; plain BM25 0.500 queries, 0.075 questions. Questions meet the
            // issue's 0.85 and 0.975 (floors one miss under); queries 0.95 and must-warn 100 %
            // are not reached yet: these floors hold what is, one miss each.
            &Floors {
                hit1: 0.8,
                mrr: 0.85,
                hard_hit1: 0.78,
                prescriptive_hit1: 0.85,
                prescriptive_hit3: 0.95,
                must_warn: 0.93,
            },
        );
    }
}
