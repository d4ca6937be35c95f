//! Proposals for the reviewer queue and the accuracy grade asked at Learn. A job
//! never writes durable memory on its own: it drafts a [`Proposal`] whose `record` is exactly
//! what accepting it writes, and a reviewer accepts or rejects it. Pure: the rules that turn a
//! failed action into a reflection lesson, a run of working actions into a runbook (or a new
//! version of the nearest one), and a top hypothesis into a suggested grade. No I/O.

use serde::{Deserialize, Serialize};

use super::ValidationError;
use super::action::ActionKind;
use super::memory::{NewRecord, Rule, RuleSeverity};

/// What a proposal would write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProposalKind {
    /// A lesson reflecting on an approved action that did not resolve the incident or made it
    /// worse.
    Reflection,
    /// A runbook (or a new version of one) from the actions that resolved an incident.
    Runbook,
    /// One rule merged from near-duplicate lessons or failure records of several incidents
    /// ([`super::consolidation`]).
    Consolidation,
    /// After Learn marked a record contradicted: replace it by the record that contradicts it.
    Supersession,
}

impl ProposalKind {
    /// The snake_case name used in the database and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reflection => "reflection",
            Self::Runbook => "runbook",
            Self::Consolidation => "consolidation",
            Self::Supersession => "supersession",
        }
    }

    /// Where proposals of this kind come in the reviewers' queue, first 0: a supersession
    /// settles a contradiction recall already marks, a reflection turns a failed action into a
    /// rule, a runbook records what worked, a consolidation only tidies rules that already exist.
    pub fn review_rank(self) -> u8 {
        match self {
            Self::Supersession => 0,
            Self::Reflection => 1,
            Self::Runbook => 2,
            Self::Consolidation => 3,
        }
    }

    /// The heading of this kind's group in the reviewers' queue.
    pub fn review_heading(self) -> &'static str {
        match self {
            Self::Supersession => "Supersessions (a later incident contradicts a record)",
            Self::Reflection => "Reflections on failed actions",
            Self::Runbook => "Runbooks from what resolved an incident",
            Self::Consolidation => "Consolidations of near-duplicate rules",
        }
    }

    /// Parses the stored name.
    ///
    /// # Errors
    /// [`ValidationError`] on `kind` for anything else.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        match s {
            "reflection" => Ok(Self::Reflection),
            "runbook" => Ok(Self::Runbook),
            "consolidation" => Ok(Self::Consolidation),
            "supersession" => Ok(Self::Supersession),
            other => Err(ValidationError::new(
                "kind",
                format!(
                    "'{other}' is not a proposal kind; use reflection, runbook, consolidation \
                     or supersession"
                ),
            )),
        }
    }
}

/// Where a proposal is in the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProposalStatus {
    /// Waiting for a reviewer.
    Pending,
    /// A reviewer accepted it; its record is written.
    Accepted,
    /// A reviewer rejected it, with a reason; nothing was written.
    Rejected,
}

impl ProposalStatus {
    /// The snake_case name used in the database and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
        }
    }

    /// Parses the stored name.
    ///
    /// # Errors
    /// [`ValidationError`] on `status` for anything else.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        match s {
            "pending" => Ok(Self::Pending),
            "accepted" => Ok(Self::Accepted),
            "rejected" => Ok(Self::Rejected),
            other => Err(ValidationError::new(
                "status",
                format!("'{other}' is not a proposal status"),
            )),
        }
    }
}

/// A supersession to propose after Learn: the newer record contradicts the older one (a root
/// cause it denies). Accepting marks the older one `superseded_by` the newer; nothing is written
/// or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Supersession {
    /// The older record, to be marked superseded.
    pub old: i64,
    /// Its text.
    pub old_text: String,
    /// The newer record that contradicts it.
    pub new: i64,
    /// Its text.
    pub new_text: String,
    /// The words of the claim the newer record denies.
    pub claim: Vec<String>,
}

/// An action to try instead of a failed one, and where the suggestion comes from (never
/// invented: a recorded success or the analyst's own list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Alternative {
    /// The action kind (closed vocabulary).
    pub kind: ActionKind,
    /// Where it comes from: "resolved INC-2026-0003 (MEM-40)" or "the analyst's next
    /// recommendation".
    pub source: String,
}

/// What a reflection says: what was tried, what happened, what might be tried instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Reflection {
    /// The incident it happened in.
    pub incident_id: String,
    /// Its service.
    pub service: String,
    /// The action that was approved.
    pub action_kind: ActionKind,
    /// Its target.
    pub target: String,
    /// `did_not_resolve` or `made_worse`.
    pub verdict: String,
    /// The responder's note with the verdict (redacted).
    pub note: String,
    /// Specific failure modes of the incident (generic ones left out).
    pub failure_modes: Vec<String>,
    /// What might be tried instead, best first (at most [`MAX_ALTERNATIVES`]).
    pub instead: Vec<Alternative>,
}

/// At most this many alternatives in a reflection.
pub const MAX_ALTERNATIVES: usize = 3;

/// Verdicts that trigger a reflection.
pub fn is_failing_verdict(verdict: &str) -> bool {
    matches!(verdict, "did_not_resolve" | "made_worse")
}

impl Reflection {
    /// Where the rule applies: the service and the incident's specific failure modes.
    pub fn scope(&self) -> String {
        let mut parts = vec![self.service.clone()];
        parts.extend(self.failure_modes.iter().cloned());
        parts.join(", ")
    }

    /// The reflection as a prescriptive rule (DESIGN.md §3): ALWAYS names the alternatives
    /// (or, without any, to confirm the cause first), BECAUSE names the grounding incident and
    /// what happened, SCOPE is the service and failure modes, SEVERITY is high when the action
    /// made things worse and medium otherwise.
    pub fn rule(&self) -> Rule {
        let on = if self.failure_modes.is_empty() {
            self.service.clone()
        } else {
            format!("{} with {}", self.service, self.failure_modes.join(", "))
        };
        let tried = self.action_kind.as_str();
        let always = if self.instead.is_empty() {
            format!("Confirm the cause before {tried} on {on}; it is a recorded dead end")
        } else {
            let names: Vec<&str> = self.instead.iter().map(|a| a.kind.as_str()).collect();
            format!("On {on}, consider {} before {tried}", names.join(" or "))
        };
        let outcome = if self.verdict == "made_worse" {
            "made it worse"
        } else {
            "did not resolve it"
        };
        let mut because = format!(
            "During {} {tried} on {} {outcome}",
            self.incident_id, self.target
        );
        if !self.note.trim().is_empty() {
            because.push_str(&format!(" ({})", self.note.trim()));
        }
        let sources: Vec<String> = self
            .instead
            .iter()
            .map(|a| format!("{}: {}", a.kind.as_str(), a.source))
            .collect();
        if !sources.is_empty() {
            because.push_str(&format!("; {}", sources.join("; ")));
        }
        Rule {
            always,
            because,
            scope: self.scope(),
            severity: if self.verdict == "made_worse" {
                RuleSeverity::High
            } else {
                RuleSeverity::Medium
            },
        }
    }
}

/// A drafted runbook: a new one, or a new version of the nearest existing one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunbookDraft {
    /// Title.
    pub title: String,
    /// One-line summary.
    pub summary: String,
    /// Steps, in order.
    pub steps: Vec<String>,
    /// Common causes.
    pub common_causes: Vec<String>,
    /// The runbook this would replace (a new version of it); `None` for a new runbook.
    pub replaces: Option<i64>,
    /// The version it would be: 1 for a new runbook, the replaced one's plus one otherwise.
    pub version: i64,
    /// The steps that worked during the incident, in order ("Roll back the last deploy on
    /// checkout").
    pub worked: Vec<String>,
    /// How many of the worked actions the nearest runbook already covers, of how many.
    pub covered: usize,
}

/// A runbook as the matcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownRunbook {
    /// Its record id.
    pub id: i64,
    /// Title.
    pub title: String,
    /// Summary (the text after the title).
    pub summary: String,
    /// Steps.
    pub steps: Vec<String>,
    /// Common causes.
    pub common_causes: Vec<String>,
    /// `data.version` (1 when absent).
    pub version: i64,
}

/// The action kinds a runbook step names: its snake_case name, its label, or a phrase of
/// [`super::action::MENTIONS`].
pub fn step_kinds(step: &str) -> Vec<ActionKind> {
    let lower = step.to_lowercase();
    let mut out: Vec<ActionKind> = ActionKind::ALL
        .iter()
        .copied()
        .filter(|k| lower.contains(k.as_str()) || lower.contains(&k.label().to_lowercase()))
        .collect();
    for k in ActionKind::mentioned_in(step) {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// The step a worked action becomes: "Roll back the last deploy on checkout (rollback_deploy)".
pub fn step_of(kind: ActionKind, target: &str) -> String {
    format!("{} on {target} ({})", kind.label(), kind.as_str())
}

/// Common causes from a confirmed root cause: its sentences ([`super::text::sentences`]: a
/// version such as `2.14.1` stays whole), at most three, each at most 300 characters.
pub fn common_causes(root_cause: &str) -> Vec<String> {
    super::text::sentences(root_cause)
        .into_iter()
        .take(3)
        .map(|s| s.chars().take(300).collect())
        .collect()
}

/// What a resolved incident's working actions ask of the runbooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunbookMatch {
    /// A runbook covers every worked action: nothing to propose.
    Covered(i64),
    /// The nearest runbook covers only some (`covered` of them): propose a new version of it.
    Partly {
        /// The nearest runbook.
        nearest: KnownRunbook,
        /// How many worked actions it covers.
        covered: usize,
    },
    /// No runbook covers any: propose a new one.
    None,
}

/// Matches the worked action kinds against `runbooks`: the nearest is the one covering the most
/// of them (ties: the highest version, then the newest id).
pub fn match_runbooks(worked: &[ActionKind], runbooks: &[KnownRunbook]) -> RunbookMatch {
    let mut best: Option<(usize, &KnownRunbook)> = None;
    for r in runbooks {
        let named: Vec<ActionKind> = r.steps.iter().flat_map(|s| step_kinds(s)).collect();
        let covered = worked.iter().filter(|k| named.contains(k)).count();
        let better = match best {
            None => true,
            Some((c, b)) => (covered, r.version, r.id) > (c, b.version, b.id),
        };
        if covered > 0 && better {
            best = Some((covered, r));
        }
    }
    match best {
        Some((c, r)) if c == worked.len() => RunbookMatch::Covered(r.id),
        Some((c, r)) => RunbookMatch::Partly {
            nearest: r.clone(),
            covered: c,
        },
        None => RunbookMatch::None,
    }
}

/// Drafts the runbook for `worked` (kind and target, in the order they were approved) on
/// `service`, against what [`match_runbooks`] found: a new version keeps the nearest runbook's
/// steps and adds the worked steps it lacks, in order, after them; its common causes gain the
/// root cause's. `None` when a runbook already covers every worked action.
pub fn draft_runbook(
    incident_id: &str,
    service: &str,
    root_cause: &str,
    worked: &[(ActionKind, String)],
    found: RunbookMatch,
) -> Option<RunbookDraft> {
    let kinds: Vec<ActionKind> = worked.iter().map(|(k, _)| *k).collect();
    let worked_steps: Vec<String> = worked.iter().map(|(k, t)| step_of(*k, t)).collect();
    let causes = common_causes(root_cause);
    match found {
        RunbookMatch::Covered(_) => None,
        RunbookMatch::None => Some(RunbookDraft {
            title: format!("{service}: {}", kinds_title(&kinds)),
            summary: format!("What resolved {incident_id}, in order."),
            steps: worked_steps.clone(),
            common_causes: causes,
            replaces: None,
            version: 1,
            worked: worked_steps,
            covered: 0,
        }),
        RunbookMatch::Partly { nearest, covered } => {
            let named: Vec<ActionKind> = nearest.steps.iter().flat_map(|s| step_kinds(s)).collect();
            let mut steps = nearest.steps.clone();
            for (k, step) in kinds.iter().zip(&worked_steps) {
                if !named.contains(k) && !steps.contains(step) {
                    steps.push(step.clone());
                }
            }
            let mut common = nearest.common_causes.clone();
            for c in causes {
                if !common.contains(&c) {
                    common.push(c);
                }
            }
            let summary = if nearest.summary.trim().is_empty() {
                format!("Updated after {incident_id}.")
            } else {
                nearest.summary.clone()
            };
            Some(RunbookDraft {
                title: nearest.title.clone(),
                summary,
                steps,
                common_causes: common,
                replaces: Some(nearest.id),
                version: nearest.version + 1,
                worked: worked_steps,
                covered,
            })
        }
    }
}

fn kinds_title(kinds: &[ActionKind]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for k in kinds {
        if !seen.contains(&k.as_str()) {
            seen.push(k.as_str());
        }
    }
    seen.join(", then ")
}

/// A runbook record's text (what search and recall read): title, summary, steps and common
/// causes. The one format, for people's runbooks and drafted ones.
pub fn runbook_text(title: &str, summary: &str, steps: &[String], causes: &[String]) -> String {
    format!(
        "Runbook: {title}. {summary}\nSteps: {}\nCommon causes: {}",
        steps.join("; "),
        causes.join("; ")
    )
}

impl RunbookDraft {
    /// Checks a (possibly edited) draft: a title of at most 200 characters, at least one step,
    /// every text within the memory forms' limits.
    ///
    /// # Errors
    /// [`ValidationError`] naming the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        super::required_text("title", &self.title, 200)?;
        super::optional_text("summary", &self.summary, 5000)?;
        if self.steps.is_empty() {
            return Err(ValidationError::new(
                "steps",
                "a runbook needs at least one step (one per line)",
            ));
        }
        let all = self.steps.join("\n") + &self.common_causes.join("\n");
        if all.chars().count() > 5000 {
            return Err(ValidationError::new(
                "steps",
                "steps and common causes are limited to 5000 characters",
            ));
        }
        Ok(())
    }

    /// The record's `data`: title, steps, common causes, version and the one it replaces.
    pub fn data(&self) -> serde_json::Value {
        let mut d = serde_json::json!({
            "title": self.title, "steps": self.steps, "common_causes": self.common_causes,
            "version": self.version,
        });
        if let (Some(prev), Some(obj)) = (self.replaces, d.as_object_mut()) {
            obj.insert("previous".into(), prev.into());
        }
        d
    }

    /// Applies `record`'s fields from this draft (text and data), for the preview and the write.
    pub fn apply_to(&self, record: &mut NewRecord) {
        record.text = runbook_text(&self.title, &self.summary, &self.steps, &self.common_causes);
        record.data = self.data();
    }
}

/// One line per non-empty line of a textarea, trimmed, a leading "- " removed.
pub fn lines_of(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .map(|l| l.trim_start_matches("- ").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// The grade the reviewer is asked to confirm at Learn: whether the copilot's top hypothesis
/// named the confirmed root cause ([`super::postmortem::names_root_cause`]). A suggestion only:
/// it is recorded when the reviewer answers.
pub fn suggest_grade(top_hypothesis: &str, root_cause: &str) -> bool {
    super::postmortem::names_root_cause(top_hypothesis, root_cause)
}

/// Parses the reviewer's answer to "did the top hypothesis match?": `yes`/`no` (forms) or
/// `true`/`false`.
///
/// # Errors
/// [`ValidationError`] on `top_hypothesis_matched` for anything else.
pub fn parse_grade(answer: &str) -> Result<bool, ValidationError> {
    match answer.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        other => Err(ValidationError::new(
            "top_hypothesis_matched",
            format!("'{other}' is not an answer; use yes or no"),
        )),
    }
}

#[cfg(test)]
mod tests;
