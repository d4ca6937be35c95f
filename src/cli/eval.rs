//! Recall quality, measured: replays a labelled set of past incidents through the
//! product's own learn path into a fresh temporary database, then opens each query incident with
//! only its description and evidence, investigates it through the same path the UI uses and
//! scores where the expected past incident lands (hit@1, hit@3, MRR), whether the action that
//! failed there is recommended with a dead-end warning citing it (must-warn coverage) and whether
//! any such warned recommendation was hidden. Prescriptive questions go through
//! [`recall::recall`] directly. The set's answer keys (`expected`, `must_warn`, `hard`) are never
//! given to the system.
//!
//! Input: the schema of `../shared/data/recall-dev.json`.
//!
//! The set's schema and the report are in `report`; the run that fills it is here.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use std::sync::Arc;

use crate::analyst::builtin::BuiltinAnalyst;
use crate::domain::{MemoryKind, NewIncident};
use crate::evidence::EvidenceKind;
use crate::memory::recall::{self, RecallQuery};
use crate::memory::{Embedder, Memory, RecallTuning, embeddings};
use crate::services::sample;
use crate::services::{evidence, investigation, workflow};
use crate::store::users::User;
use crate::store::{self, incidents};

pub mod bm25;
mod report;
pub mod signatures;

pub use report::{
    BaselineRank, CONFIDENT_GAP, EvalQuery, EvalQuestion, EvalSet, Metrics, QueryResult,
    QuestionResult, Report, Versus, WarnStatus,
};

/// The first sentence of `text` (up to `.`, `!` or `?` followed by a space or the end), cut to a
/// title's length.
pub fn first_sentence(text: &str) -> String {
    let t = text.trim();
    let mut end = t.len();
    let chars: Vec<(usize, char)> = t.char_indices().collect();
    for (i, (pos, c)) in chars.iter().enumerate() {
        if matches!(c, '.' | '!' | '?') && chars.get(i + 1).is_none_or(|(_, n)| n.is_whitespace()) {
            end = pos + c.len_utf8();
            break;
        }
    }
    let s = t[..end].trim_end_matches(['.', '!', '?']).trim();
    crate::evidence::truncate_chars(s, crate::domain::incident::TITLE_MAX).to_string()
}

/// Distinct incident ids in order of first appearance.
fn distinct<'a>(ids: impl Iterator<Item = Option<&'a str>>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for id in ids.flatten() {
        if !out.iter().any(|o| o == id) {
            out.push(id.to_string());
        }
    }
    out
}

fn rank_of(incidents: &[String], expected: Option<&String>) -> Option<usize> {
    let e = expected?;
    incidents.iter().position(|i| i == e).map(|p| p + 1)
}

/// Runs the recall evaluation of the set at `path` on a fresh temporary database.
///
/// # Errors
/// Unreadable or malformed set; any failure of the replay or the investigations.
pub async fn recall_eval(
    path: impl AsRef<Path>,
    embedder: Option<Arc<dyn Embedder>>,
    tuning: RecallTuning,
) -> anyhow::Result<Report> {
    recall_eval_with(path, embedder, tuning, None).await
}

/// [`recall_eval`], reusing the replayed past incidents of an earlier run: with `replayed`, the
/// database after replay (and its id map, `replayed.map.json`) is written there on the first run
/// and copied from there on the next ones, so trying recall settings does not replay the set
/// each time. Only for sets and code whose replay is unchanged.
///
/// # Errors
/// As [`recall_eval`]; I/O errors of `replayed`.
pub async fn recall_eval_with(
    path: impl AsRef<Path>,
    embedder: Option<Arc<dyn Embedder>>,
    tuning: RecallTuning,
    replayed: Option<&Path>,
) -> anyhow::Result<Report> {
    let path = path.as_ref();
    let raw =
        std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let set: EvalSet =
        serde_json::from_str(&raw).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    // The directory (database, WAL and shared-memory files) is removed when `dir` drops.
    let dir = tempfile::Builder::new()
        .prefix("incidentmind-eval-")
        .tempdir()?;
    let db = dir.path().join("eval.db");
    let map_path = replayed.map(|r| r.with_extension("map.json"));
    let reused: Option<HashMap<String, String>> = match (replayed, &map_path) {
        (Some(r), Some(m)) if r.exists() && m.exists() => {
            std::fs::copy(r, &db)?;
            Some(serde_json::from_str(&std::fs::read_to_string(m)?)?)
        }
        _ => None,
    };
    let pool = store::connect(&db.to_string_lossy()).await?;
    let memory = Memory::with_tuning(pool.clone(), embedder, tuning);
    let report = run(&memory, &set, reused, replayed.zip(map_path.as_deref())).await;
    pool.close().await;
    report
}

/// The past incidents' ids in this database: `reused` from a saved replay, else each past
/// incident replayed through the workflow (then saved to `save` when given).
async fn replay_past(
    memory: &Memory,
    set: &EvalSet,
    reused: Option<HashMap<String, String>>,
    save: Option<(&Path, &Path)>,
    responder: &User,
    reviewer: &User,
) -> anyhow::Result<HashMap<String, String>> {
    let pool = memory.pool();
    let mut past_to_inc: HashMap<String, String> = HashMap::new();
    if let Some(map) = reused {
        past_to_inc = map;
    } else {
        for p in &set.past {
            let id = sample::replay(memory, p, responder, reviewer)
                .await
                .map_err(|e| anyhow::anyhow!("replaying {}: {e}", p.id))?;
            past_to_inc.insert(p.id.clone(), id.to_string());
        }
        // What the memory worker does after Learn in `serve`: documents and vectors, now.
        embeddings::catch_up(memory).await?;
        if let Some((db, map)) = save {
            store::backup::vacuum_into(pool, db).await?;
            std::fs::write(map, serde_json::to_string(&past_to_inc)?)?;
        }
    }
    Ok(past_to_inc)
}

/// Names an incident id with the past incident it replays: `INC-…=past-id`.
fn labeller(inc_to_past: &HashMap<String, String>) -> impl Fn(&String) -> String + Copy + '_ {
    |inc: &String| {
        inc_to_past
            .get(inc)
            .map(|p| format!("{inc}={p}"))
            .unwrap_or_else(|| inc.clone())
    }
}

/// The start of a recalled record's detail line: its incident (labelled), kind, score and the
/// lists that found it.
fn recalled_head(r: &recall::Recalled, label: impl Fn(&String) -> String) -> String {
    format!(
        "{} {} {:.4} lists={}",
        r.memory.incident_id.as_ref().map_or("-".to_string(), label),
        r.memory.kind.as_str(),
        r.score,
        r.why.lists.join("+")
    )
}

/// The detail lines of one query: its tags, the four best incidents with their lists and
/// conditions, and every recalled record with why it was recalled.
async fn detail_lines(
    memory: &Memory,
    input: &crate::analyst::InvestigationInput,
    label: impl Fn(&String) -> String + Copy,
) -> anyhow::Result<Vec<String>> {
    let mut detail = vec![format!("tags: {}", input.failure_modes.join(", "))];
    let ranked = investigation::recall_for_incident(
        memory,
        &input.incident,
        &input.observations,
        &input.failure_modes,
        &input.redactor,
        12,
        false,
    )
    .await?;
    detail.extend(ranked.incidents.iter().take(4).map(|m| {
        format!(
            "incident {} {:.4} lists={} conditions={}",
            label(&m.incident_id),
            m.score,
            m.lists
                .iter()
                .zip(&m.ranks)
                .map(|(l, r)| format!("{l}@{r}"))
                .collect::<Vec<_>>()
                .join("+"),
            m.conditions.join(",")
        )
    }));
    detail.extend(input.recalled.iter().map(|r| {
        format!(
            "{} tags={} terms={}",
            recalled_head(r, label),
            r.why.tags.join(","),
            r.why.matched_terms.join(",")
        )
    }));
    Ok(detail)
}

/// One query: opens it as an incident with its evidence, investigates, and ranks the expected
/// past incident among those recalled, with the must-warn check and the detail lines.
async fn run_query(
    memory: &Memory,
    q: &EvalQuery,
    responder: &User,
    past_to_inc: &HashMap<String, String>,
    inc_to_past: &HashMap<String, String>,
) -> anyhow::Result<QueryResult> {
    let pool = memory.pool();
    let label = labeller(inc_to_past);
    let new = NewIncident::parse(&q.incident_title(), "unknown", "SEV2", &q.description)
        .map_err(|e| anyhow::anyhow!("query {}: {e}", q.id))?;
    let inc = workflow::open_incident(pool, &responder.name, &new).await?;
    if !q.evidence.is_empty() {
        evidence::add(
            pool,
            &responder.name,
            &inc.id,
            EvidenceKind::Logs,
            q.evidence.join("\n"),
            &format!("recall eval {}", q.id),
            None,
        )
        .await?;
    }
    let view = investigation::investigate(
        memory,
        &crate::analyst::builtin::BuiltinAnalyst,
        &responder.name,
        &inc.id,
        None,
    )
    .await?;
    let recalled = distinct(view.recalled.iter().map(|r| r.incident_id.as_deref()));
    // Recall is deterministic: the analyst's input again, with scores and why (the view
    // keeps neither), for the detail lines and the hidden-warning check below.
    let incident = incidents::get(pool, &inc.id).await?;
    let (obs, tags) = investigation::incident_tags(pool, &incident).await?;
    let input = investigation::analyst_input(memory, incident, obs, tags).await?;
    let detail = detail_lines(memory, &input, label).await?;
    let expected_inc = past_to_inc.get(&q.expected);
    let rank = rank_of(&recalled, expected_inc);
    let warn = match (&q.must_warn, expected_inc) {
        (Some(kind), Some(e)) => {
            let listed = view.recommendations.iter().find(|r| &r.kind == kind);
            let status = match listed {
                Some(r)
                    if r.warning
                        .as_ref()
                        .is_some_and(|w| w.incident_ids.contains(e)) =>
                {
                    WarnStatus::Ok
                }
                Some(_) => WarnStatus::Unwarned,
                None => {
                    // Was it proposed at all? Run the analyst on the same input.
                    let out = BuiltinAnalyst::analyse(&input);
                    if out.actions.iter().any(|a| &a.kind == kind) {
                        WarnStatus::Hidden
                    } else {
                        WarnStatus::Missing
                    }
                }
            };
            Some((kind.clone(), status))
        }
        (Some(kind), None) => Some((kind.clone(), WarnStatus::Missing)),
        _ => None,
    };
    Ok(QueryResult {
        bm25: None,
        id: q.id.clone(),
        expected: q.expected.clone(),
        rank,
        top: recalled.iter().map(label).collect(),
        hard: q.hard,
        warn,
        detail,
    })
}

/// One forward-looking question: recalls it and ranks the expected past incident among the
/// lessons and among all records.
async fn run_question(
    memory: &Memory,
    p: &EvalQuestion,
    past_to_inc: &HashMap<String, String>,
    inc_to_past: &HashMap<String, String>,
) -> anyhow::Result<QuestionResult> {
    let label = labeller(inc_to_past);
    let res = recall::recall(
        memory,
        &RecallQuery {
            text: p.question.clone(),
            k: 30,
            ..Default::default()
        },
    )
    .await?;
    let all = distinct(res.results.iter().map(|r| r.memory.incident_id.as_deref()));
    let lessons = distinct(
        res.results
            .iter()
            .filter(|r| r.memory.kind == MemoryKind::Lesson)
            .map(|r| r.memory.incident_id.as_deref()),
    );
    let expected_inc = past_to_inc.get(&p.expected);
    let mut detail: Vec<String> = res
        .incidents
        .iter()
        .take(5)
        .map(|m| {
            format!(
                "incident {} {:.4} lists={} conditions={}",
                label(&m.incident_id),
                m.score,
                m.lists.join("+"),
                m.conditions.join(",")
            )
        })
        .collect();
    detail.extend(res.results.iter().take(8).map(|r| {
        format!(
            "{} cos={}",
            recalled_head(r, label),
            r.why.cosine.map_or("-".into(), |c| format!("{c:.3}"))
        )
    }));
    Ok(QuestionResult {
        bm25: None,
        detail,
        id: p.id.clone(),
        expected: p.expected.clone(),
        rank_lessons: rank_of(&lessons, expected_inc),
        rank_all: rank_of(&all, expected_inc),
        top: lessons.iter().map(label).collect(),
    })
}

async fn run(
    memory: &Memory,
    set: &EvalSet,
    reused: Option<HashMap<String, String>>,
    save: Option<(&Path, &Path)>,
) -> anyhow::Result<Report> {
    let pool = memory.pool();
    let started = Instant::now();
    let (responder, reviewer) = sample::history_users(pool).await?;
    let past_to_inc = replay_past(memory, set, reused, save, &responder, &reviewer).await?;
    let inc_to_past: HashMap<String, String> = past_to_inc
        .iter()
        .map(|(p, i)| (i.clone(), p.clone()))
        .collect();

    let baseline = bm25::Bm25::new(&set.past);
    let mut queries = Vec::new();
    for q in &set.queries {
        let mut r = run_query(memory, q, &responder, &past_to_inc, &inc_to_past).await?;
        r.bm25 = Some(BaselineRank::of(&baseline.rank(&q.text()), &q.expected));
        queries.push(r);
    }

    let mut prescriptive = Vec::new();
    for p in &set.prescriptive {
        let mut r = run_question(memory, p, &past_to_inc, &inc_to_past).await?;
        r.bm25 = Some(BaselineRank::of(&baseline.rank(&p.question), &p.expected));
        prescriptive.push(r);
    }

    let ranks: Vec<Option<usize>> = queries.iter().map(|q| q.rank).collect();
    let hard: Vec<Option<usize>> = queries.iter().filter(|q| q.hard).map(|q| q.rank).collect();
    let warned: Vec<WarnStatus> = queries
        .iter()
        .filter_map(|q| q.warn.as_ref().map(|w| w.1))
        .collect();
    let share = |s: WarnStatus| {
        if warned.is_empty() {
            0.0
        } else {
            warned.iter().filter(|w| **w == s).count() as f64 / warned.len() as f64
        }
    };
    let bm25_ranks = |items: &mut dyn Iterator<Item = Option<BaselineRank>>| {
        items.map(|b| b.and_then(|b| b.rank)).collect::<Vec<_>>()
    };
    let versus = |items: &mut dyn Iterator<Item = (Option<usize>, Option<BaselineRank>)>| {
        Versus::of(&items.filter_map(|(r, b)| Some((r, b?))).collect::<Vec<_>>())
    };
    Ok(Report {
        bm25_query_metrics: Metrics::of(&bm25_ranks(&mut queries.iter().map(|q| q.bm25))),
        bm25_prescriptive_metrics: Metrics::of(&bm25_ranks(
            &mut prescriptive.iter().map(|p| p.bm25),
        )),
        query_versus: versus(&mut queries.iter().map(|q| (q.rank, q.bm25))),
        prescriptive_versus: versus(&mut prescriptive.iter().map(|p| (p.rank_lessons, p.bm25))),
        query_metrics: Metrics::of(&ranks),
        hard_metrics: Metrics::of(&hard),
        prescriptive_metrics: Metrics::of(
            &prescriptive
                .iter()
                .map(|p| p.rank_lessons)
                .collect::<Vec<_>>(),
        ),
        prescriptive_all_metrics: Metrics::of(
            &prescriptive.iter().map(|p| p.rank_all).collect::<Vec<_>>(),
        ),
        must_warn_total: warned.len(),
        must_warn_coverage: share(WarnStatus::Ok),
        hidden: share(WarnStatus::Hidden),
        queries,
        prescriptive,
        elapsed_secs: started.elapsed().as_secs_f64(),
    })
}
