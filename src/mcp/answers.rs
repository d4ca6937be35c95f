//! What each tool answers, written from the service's result: our own words above, the text
//! that came from incidents inside the untrusted block ([`Answer`]). Pure: no I/O.

use crate::domain::IncidentId;
use crate::domain::action::verdict_label;
use crate::domain::memory::MemoryRecord;
use crate::memory::recall::Recalled;
use crate::services::evidence::EvidenceAdded;
use crate::services::questions::{
    IncidentRead, PastIncident, Remediation, RemediationCheck, SimilarIncidents, Situation,
};

use super::render::Answer;

/// Timeline events `get_incident` shows at most (the newest).
const TIMELINE_MAX: usize = 30;

/// Observations `get_incident` shows at most (the most salient).
const OBSERVATIONS_MAX: usize = 20;

/// What the agent is told when a tool found nothing recorded: memory is not proof.
const NOT_PROOF: &str = "Absence of a record is not proof that it is safe.";

/// `MEM-12, 2026-12-07`: a record's id and the day it was written (UTC).
fn cite(r: &MemoryRecord) -> String {
    format!("MEM-{}, {}", r.id, r.created_at.strftime("%Y-%m-%d"))
}

/// The text a record carries for an agent: a lesson's rule, else its text.
fn text_of(r: &MemoryRecord) -> String {
    r.rule
        .as_ref()
        .map_or_else(|| r.text.clone(), |rule| rule.text())
}

/// The verdict of a remediation record in words (`did not resolve`, `made it worse`).
fn verdict_of(r: &MemoryRecord) -> Option<String> {
    r.data
        .get("verdict")
        .and_then(|v| v.as_str())
        .map(verdict_label)
}

/// `recall_similar_incidents`.
pub fn similar(found: &SimilarIncidents) -> Answer {
    let mut a = if found.incidents.is_empty() {
        Answer::new(format!(
            "No past incident in organizational memory matches this. {}",
            found.notice.as_deref().unwrap_or(NOT_PROOF)
        ))
    } else {
        Answer::new(format!(
            "{} past incident(s) like the situation you described, most similar first (ranked \
             as IncidentMind's incident page ranks them). For each: why it was recalled, root \
             cause, what worked, what did NOT work, what was rejected, lessons.",
            found.incidents.len()
        ))
    };
    if !found.derived_tags.is_empty() {
        a.say(format!(
            "Failure modes read from your description: {}.",
            found.derived_tags.join(", ")
        ));
    }
    if !found.similar.is_empty() {
        a.say(format!(
            "Most similar (their dead ends apply to you): {}. {} dead end(s) to avoid are listed \
             at the end; check_remediation checks one action.",
            found.similar.join(", "),
            found.dead_ends.len()
        ));
    }
    if let Some(n) = found
        .notice
        .as_deref()
        .filter(|_| !found.incidents.is_empty())
    {
        a.say(format!("Recall notes: {n}."));
    }
    for (k, p) in found.incidents.iter().enumerate() {
        past_incident(&mut a, k + 1, p);
    }
    if !found.dead_ends.is_empty() {
        a.heading("## Dead ends the incident page would show for this situation");
        for r in &found.dead_ends {
            a.data(&format!("dead end ({}): ", cite(r)), &r.text);
        }
    }
    a
}

/// One past incident's section of a `recall_similar_incidents` answer.
fn past_incident(a: &mut Answer, rank: usize, p: &PastIncident) {
    let service = p
        .service
        .as_deref()
        .map(|s| format!(" on {s}"))
        .unwrap_or_default();
    a.heading(format!("## {rank}. {}{service}", p.incident_id));
    if let Some(t) = &p.title {
        a.data("title: ", t);
    }
    let lists: Vec<String> = p
        .ranked
        .lists
        .iter()
        .zip(&p.ranked.ranks)
        .map(|(l, r)| format!("{l} #{r}"))
        .collect();
    let mut why = format!("why recalled: ranked by {}", lists.join(", "));
    if let Some(c) = p.ranked.cosine {
        why.push_str(&format!("; cosine {c:.2}"));
    }
    if !p.ranked.conditions.is_empty() {
        why.push_str(&format!("; conditions: {}", p.ranked.conditions.join(", ")));
    }
    a.heading(why);
    if !p.shared.is_empty() {
        a.data("shares with your description: ", &p.shared.join(", "));
    }
    for r in &p.root_cause {
        a.data(
            &format!("{} ({}): ", r.kind.as_str().replace('_', " "), cite(r)),
            &r.text,
        );
    }
    for r in &p.worked {
        a.data(&format!("worked ({}): ", cite(r)), &r.text);
    }
    for r in &p.did_not_work {
        let verdict = verdict_of(r).unwrap_or_else(|| "did not resolve".into());
        a.data(&format!("did NOT work, {verdict} ({}): ", cite(r)), &r.text);
    }
    for r in &p.rejected {
        a.data(&format!("rejected ({}): ", cite(r)), &r.text);
    }
    for r in &p.lessons {
        a.data(&format!("lesson ({}): ", cite(r)), &text_of(r));
    }
}

/// `check_remediation`.
pub fn remediation(asked: &Remediation, check: &RemediationCheck) -> Answer {
    let action = asked.action;
    let target = asked
        .target
        .as_deref()
        .map(|t| format!(" on {t}"))
        .unwrap_or_default();
    let mut a = match &check.warning {
        Some(w) => Answer::new(format!(
            "RECORDED FAILURE: {} ({}){target} was tried before and did not work, {} time(s), \
             during {}. It matches your case by service, by a shared failure mode or because \
             those incidents are the most similar to your symptoms. Confirm why this time is \
             different before acting.",
            action.as_str(),
            action.label(),
            w.memory_ids.len(),
            w.incident_ids.join(", ")
        )),
        None => Answer::new(format!(
            "No recorded failure: organizational memory holds no failure of {} ({}) on {}{}. {NOT_PROOF}",
            action.as_str(),
            action.label(),
            asked.service,
            if check.similar.is_empty() {
                String::new()
            } else {
                format!(
                    " nor during the past incidents most like your symptoms ({})",
                    check.similar.join(", ")
                )
            }
        )),
    };
    if asked.symptoms.trim().is_empty() {
        a.say(
            "No symptoms given: only failures on this service were checked. Give symptoms to \
             also check the past incidents most like yours, on any service.",
        );
    } else if !check.tags.is_empty() {
        a.say(format!(
            "Failure modes read from your symptoms: {}.",
            check.tags.join(", ")
        ));
    }
    if let Some(w) = &check.warning {
        a.data("warning: ", &w.message);
        if !w.worked_in.is_empty() {
            a.heading(format!(
                "the same action did work during {} (another failure mode)",
                w.worked_in.join(", ")
            ));
        }
    }
    for r in &check.failures {
        let verdict = verdict_of(r).unwrap_or_else(|| "did not resolve".into());
        let during = r.incident_id.as_deref().unwrap_or("an earlier incident");
        a.data(
            &format!("failed during {during}, {verdict} ({}): ", cite(r)),
            &r.text,
        );
    }
    for r in &check.worked {
        let during = r.incident_id.as_deref().unwrap_or("an earlier incident");
        a.data(&format!("worked during {during} ({}): ", cite(r)), &r.text);
    }
    for r in &check.runbooks {
        a.data(&format!("runbook ({}): ", cite(&r.memory)), &r.memory.text);
    }
    a
}

/// `search_lessons`.
pub fn lessons(found: &[Recalled], notice: Option<&str>) -> Answer {
    let mut a = if found.is_empty() {
        Answer::new(format!(
            "No lesson matches this question. {}",
            notice.unwrap_or(NOT_PROOF)
        ))
    } else {
        Answer::new(format!(
            "{} lesson(s), best first: prescriptive rules learned from confirmed post-mortems \
             (ALWAYS / BECAUSE / SCOPE / SEVERITY).",
            found.len()
        ))
    };
    for r in found {
        let from = r
            .memory
            .incident_id
            .as_deref()
            .map(|i| format!(", from {i}"))
            .unwrap_or_default();
        let marks = if r.marks.is_empty() {
            String::new()
        } else {
            format!(", {}", r.marks.join(", "))
        };
        a.data(
            &format!("lesson ({}{from}{marks}): ", cite(&r.memory)),
            &text_of(&r.memory),
        );
    }
    a
}

/// `get_runbook`.
pub fn runbooks(asked: &Situation, found: &[Recalled]) -> Answer {
    let service = asked.service.as_deref().unwrap_or("this service");
    let mut a = if found.is_empty() {
        Answer::new(format!(
            "No runbook for {service} in organizational memory{}.",
            if asked.description.is_empty() {
                ""
            } else {
                " for this symptom"
            }
        ))
    } else {
        Answer::new(format!(
            "{} runbook(s) for {service}, best first.",
            found.len()
        ))
    };
    for r in found {
        a.data(&format!("runbook ({}): ", cite(&r.memory)), &r.memory.text);
    }
    a
}

/// `get_incident`.
pub fn incident(read: &IncidentRead) -> Answer {
    let i = &read.incident;
    let mut a = Answer::new(format!(
        "Incident {}: state {}, {}, service {}, opened {} by {}, version {}; {} evidence item(s), \
         {} observation(s).",
        i.id,
        i.state.as_str(),
        i.severity.as_str(),
        i.service,
        i.opened_at,
        i.opened_by,
        i.version,
        read.evidence_count,
        read.observations.len()
    ));
    a.data("title: ", &i.title);
    a.data("description: ", &i.description);
    if let Some(s) = &i.summary {
        a.data("resolution summary: ", s);
    }
    if let Some(s) = &i.root_cause {
        a.data("root cause at resolution: ", s);
    }
    let skip = read.timeline.len().saturating_sub(TIMELINE_MAX);
    a.heading(format!(
        "## Timeline ({} event(s){})",
        read.timeline.len(),
        if skip > 0 { ", the newest 30" } else { "" }
    ));
    for e in read.timeline.iter().skip(skip) {
        a.data(&format!("{} {} {}: ", e.at, e.actor, e.kind), &e.detail);
    }
    if !read.observations.is_empty() {
        a.heading("## Observations, most salient first");
        for o in read.observations.iter().take(OBSERVATIONS_MAX) {
            a.data(&format!("OBS-{}: ", o.id), &o.text);
        }
    }
    if let Some(inv) = &read.investigation {
        a.heading(format!("## Latest investigation ({})", inv.analyst));
        for h in &inv.hypotheses {
            a.data(
                &format!("hypothesis {} ({}): ", h.reference, h.confidence.as_str()),
                &h.statement,
            );
        }
        for r in &inv.recommendations {
            let verdict = r
                .verdict
                .as_deref()
                .map(|v| format!(", verdict {}", verdict_label(v)))
                .unwrap_or_default();
            a.data(
                &format!("action {} on ", r.kind),
                &format!(
                    "{}: {}{verdict}{}{}",
                    r.target,
                    r.status,
                    r.verdict_note
                        .as_deref()
                        .filter(|n| !n.is_empty())
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default(),
                    r.reject_reason
                        .as_deref()
                        .map(|n| format!(", rejected: {n}"))
                        .unwrap_or_default()
                ),
            );
            if let Some(w) = &r.warning {
                a.data("  dead-end warning: ", &w.message);
            }
        }
    }
    if let Some(pm) = &read.postmortem {
        let p = &pm.postmortem;
        a.heading(format!(
            "## Post-mortem, confirmed by {}",
            pm.confirmed_by.as_deref().unwrap_or("a reviewer")
        ));
        a.data("summary: ", &p.summary);
        a.data("root cause: ", &p.root_cause);
        a.data("trigger: ", &p.trigger);
        for o in &p.what_worked {
            a.data(
                &format!("worked: {} on ", o.kind),
                &format!("{}: {}", o.target, o.note),
            );
        }
        for o in &p.what_did_not_work {
            a.data(
                &format!("did NOT work: {} on ", o.kind),
                &format!("{}, {}: {}", o.target, verdict_label(&o.outcome), o.note),
            );
        }
        for o in &p.rejected {
            a.data(
                &format!("rejected: {} on ", o.kind),
                &format!("{}: {}", o.target, o.note),
            );
        }
        for l in &p.lessons {
            a.data("lesson: ", &l.text());
        }
    }
    a
}

/// `list_incidents`.
pub fn incident_list(rows: &[crate::domain::Incident], next: Option<&str>) -> Answer {
    let mut a = Answer::new(match (rows.is_empty(), next) {
        (true, _) => "No incident matches.".to_string(),
        (false, Some(c)) => format!(
            "{} incident(s), newest first. More: call again with cursor \"{c}\".",
            rows.len()
        ),
        (false, None) => format!("{} incident(s), newest first; no more pages.", rows.len()),
    });
    for i in rows {
        a.data(
            &format!(
                "{} | {} | {} | {} | opened {} | ",
                i.id,
                i.state.as_str(),
                i.severity.as_str(),
                i.service,
                i.opened_at
            ),
            &i.title,
        );
    }
    a
}

/// `add_evidence`.
pub fn evidence_added(id: &IncidentId, user: &str, added: &EvidenceAdded) -> Answer {
    let e = &added.evidence;
    if !added.created {
        return Answer::new(format!(
            "Nothing added: the same content is already evidence #{} of {id} (added by {}).",
            e.id, e.author
        ));
    }
    let mut a = Answer::new(format!(
        "Added evidence #{} to {id} as {user} through MCP: {} read as {} ({} line(s)), {} \
         observation(s) extracted, redacted as a paste is. Organizational memory is unchanged.",
        e.id,
        e.kind,
        e.format,
        e.lines,
        added.observations.len()
    ));
    for o in added.observations.iter().take(OBSERVATIONS_MAX) {
        a.data(&format!("OBS-{}: ", o.id), &o.text);
    }
    a
}
