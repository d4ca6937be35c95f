//! Memory records (DESIGN.md §2–§3): kinds with their lifetimes, epistemic types, validation
//! states, confidence ceilings and the citation rules. Pure: no I/O.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ValidationError;
use super::action::ActionKind;

mod rule;

pub use rule::Rule;

macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident, $field:literal { $($(#[$vm:meta])* $v:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vm])* $v),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            /// The snake_case name used in the database and the API.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }

            /// Parses the snake_case name.
            ///
            /// # Errors
            /// [`ValidationError`] naming the field and listing the accepted values.
            pub fn parse(s: &str) -> Result<Self, ValidationError> {
                let t = s.trim();
                Self::ALL.iter().copied().find(|v| v.as_str() == t).ok_or_else(|| {
                    let all: Vec<&str> = Self::ALL.iter().map(|v| v.as_str()).collect();
                    ValidationError::new($field, format!("'{s}' is not one of: {}", all.join(", ")))
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum!(
    /// What kind of knowledge a record is (DESIGN.md §2).
    EpistemicType, "epistemic_type" {
        /// The world reported it: a log line, a metric, an alert, what a user said.
        Observation => "observation",
        /// Reasoning over observations; cites what it rests on.
        Inference => "inference",
        /// A commitment; cites the inference or observation that justified it.
        Decision => "decision",
        /// What a (simulated) action returned.
        ActionResult => "action_result",
    }
);

string_enum!(
    /// The kind of a record, which fixes its lifetime (DESIGN.md §3).
    MemoryKind, "kind" {
        /// Working: an observation extracted from evidence.
        Observation => "observation",
        /// Working: a root-cause hypothesis.
        Hypothesis => "hypothesis",
        /// Working: a recommended action.
        Recommendation => "recommendation",
        /// Working: the transcript of a simulated action.
        ActionTranscript => "action_transcript",
        /// Episodic: what happened, in a paragraph.
        IncidentSummary => "incident_summary",
        /// Episodic: the confirmed root cause.
        RootCause => "root_cause",
        /// Episodic: what people saw.
        Symptom => "symptom",
        /// Episodic: what made it worse or possible.
        ContributingFactor => "contributing_factor",
        /// Episodic: what set it off.
        Trigger => "trigger",
        /// Episodic: a first explanation that turned out wrong.
        FalseHypothesis => "false_hypothesis",
        /// Episodic: an action that resolved it.
        RemediationSuccess => "remediation_success",
        /// Negative knowledge: an action that did not resolve it or made it worse.
        RemediationFailure => "remediation_failure",
        /// Negative knowledge: a recommendation people rejected, with the reason.
        RejectedRecommendation => "rejected_recommendation",
        /// Prescriptive rule: ALWAYS / BECAUSE / SCOPE / SEVERITY.
        Lesson => "lesson",
        /// Procedure: steps and common causes, versioned.
        Runbook => "runbook",
        /// Note: a fact about a service.
        ServiceFact => "service_fact",
        /// Note: service A depends on service B.
        Dependency => "dependency",
        /// Episodic: how detection fell short.
        DetectionGap => "detection_gap",
        /// Episodic: a follow-up to do.
        ActionItem => "action_item",
    }
);

/// How long a kind of record matters (DESIGN.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifetime {
    /// One incident; never recalled for another.
    Working,
    /// Decays with a recency half-life.
    Episodic,
    /// What did not work; no silent decay.
    Negative,
    /// Prescriptive rules; no decay, reviewed.
    Rule,
    /// Facts; no decay, updated.
    Note,
    /// Runbooks; no decay, versioned.
    Procedure,
}

impl MemoryKind {
    /// The kind's lifetime.
    pub fn lifetime(self) -> Lifetime {
        use MemoryKind::*;
        match self {
            Observation | Hypothesis | Recommendation | ActionTranscript => Lifetime::Working,
            IncidentSummary | RootCause | Symptom | ContributingFactor | Trigger
            | FalseHypothesis | RemediationSuccess | DetectionGap | ActionItem => {
                Lifetime::Episodic
            }
            RemediationFailure | RejectedRecommendation => Lifetime::Negative,
            Lesson => Lifetime::Rule,
            ServiceFact | Dependency => Lifetime::Note,
            Runbook => Lifetime::Procedure,
        }
    }

    /// Recency half-life in days for decaying kinds; `None` for kinds that never decay (notes,
    /// rules, runbooks, negative knowledge) and for working records.
    pub fn half_life_days(self) -> Option<f64> {
        use MemoryKind::*;
        match self {
            IncidentSummary | Symptom | Trigger | ActionItem => Some(180.0),
            RootCause | ContributingFactor | FalseHypothesis | RemediationSuccess
            | DetectionGap => Some(365.0),
            _ => None,
        }
    }

    /// Whether records of this kind are organizational memory (recallable across incidents).
    pub fn is_durable(self) -> bool {
        self.lifetime() != Lifetime::Working
    }

    /// The epistemic type a record of this kind has unless stated otherwise.
    pub fn default_epistemic_type(self) -> EpistemicType {
        use MemoryKind::*;
        match self {
            Observation | Symptom | ServiceFact | Dependency | DetectionGap => {
                EpistemicType::Observation
            }
            ActionTranscript | RemediationFailure | RemediationSuccess => {
                EpistemicType::ActionResult
            }
            Recommendation | RejectedRecommendation | Lesson | Runbook | ActionItem => {
                EpistemicType::Decision
            }
            Hypothesis | IncidentSummary | RootCause | ContributingFactor | Trigger
            | FalseHypothesis => EpistemicType::Inference,
        }
    }

    /// Recency weight in (0, 1] of a record of this kind `age_days` old: `0.5^(age/half-life)`,
    /// floored at 0.25 so old knowledge is ranked lower, never hidden; 1 for non-decaying kinds.
    pub fn recency_weight(self, age_days: f64) -> f64 {
        match self.half_life_days() {
            Some(h) if age_days > 0.0 => 0.5f64.powf(age_days / h).max(0.25),
            _ => 1.0,
        }
    }

    /// Whether a record of this kind `age_days` old is past its half-life (shown as stale).
    pub fn is_stale(self, age_days: f64) -> bool {
        self.half_life_days().is_some_and(|h| age_days > h)
    }
}

string_enum!(
    /// Whether a record may be relied on.
    Validation, "validation" {
        /// Proposed, not yet confirmed by a person.
        Pending => "pending",
        /// Confirmed by a person (a reviewer at Learn, or an engineer's verdict).
        Confirmed => "confirmed",
        /// Replaced by a newer record on the same scope; still readable, ranked below.
        Superseded => "superseded",
        /// Withdrawn: never recalled, kept for audit.
        Retracted => "retracted",
    }
);

/// Ranking weight of a record consolidated into a merged rule (`data.consolidated_into`): the same as a superseded one's, so the merged rule ranks first and its sources below
/// it, still recalled and marked, never hidden.
pub const CONSOLIDATED_WEIGHT: f64 = 0.3;

impl Validation {
    /// Ranking weight: confirmed 1, pending 0.6, superseded 0.3, retracted 0 (never recalled).
    pub fn weight(self) -> f64 {
        match self {
            Self::Confirmed => 1.0,
            Self::Pending => 0.6,
            Self::Superseded => 0.3,
            Self::Retracted => 0.0,
        }
    }
}

string_enum!(
    /// Confidence of an inference.
    Confidence, "confidence" {
        /// Plausible, weakly supported.
        Low => "low",
        /// Supported by evidence.
        Medium => "medium",
        /// Strongly supported by current evidence and memory.
        High => "high",
    }
);

impl Confidence {
    fn down(self) -> Self {
        match self {
            Self::High => Self::Medium,
            _ => Self::Low,
        }
    }
}

string_enum!(
    /// Severity of a prescriptive rule.
    RuleSeverity, "severity" {
        /// Ignoring it risks a SEV1.
        Critical => "critical",
        /// Ignoring it risks a major incident.
        High => "high",
        /// Worth following.
        Medium => "medium",
        /// Good practice.
        Low => "low",
    }
);

impl RuleSeverity {
    /// Importance 1 (low) … 4 (critical), used in ranking.
    pub fn importance(self) -> i64 {
        match self {
            Self::Critical => 4,
            Self::High => 3,
            Self::Medium => 2,
            Self::Low => 1,
        }
    }
}

/// What [`confidence_ceiling`] needs to know about each cited source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SourceInfo {
    /// The source's epistemic type.
    pub epistemic_type: EpistemicType,
    /// The source's kind.
    pub kind: MemoryKind,
    /// Its age in days.
    pub age_days: f64,
    /// The later confirmed record that contradicts it, if one does.
    pub contradicted_by: Option<i64>,
}

/// Caps `wanted` by the sources an inference cites (DESIGN.md §2): without any observation among
/// them at most `low`; one level down if any cited source is older than its kind's half-life,
/// and one more if any is contradicted by a later confirmed record.
pub fn confidence_ceiling(wanted: Confidence, sources: &[SourceInfo]) -> Confidence {
    let has_observation = sources
        .iter()
        .any(|s| s.epistemic_type == EpistemicType::Observation);
    let mut c = if has_observation {
        wanted
    } else {
        Confidence::Low
    };
    if sources.iter().any(|s| s.kind.is_stale(s.age_days)) {
        c = c.down();
    }
    if sources.iter().any(|s| s.contradicted_by.is_some()) {
        c = c.down();
    }
    c
}

/// Checks the citation rules of DESIGN.md §2 for a new record citing `sources`.
///
/// # Errors
/// [`ValidationError`] on `cites`: an inference citing nothing; a decision citing only decisions.
pub fn check_citations(
    epistemic_type: EpistemicType,
    sources: &[EpistemicType],
) -> Result<(), ValidationError> {
    match epistemic_type {
        EpistemicType::Inference if sources.is_empty() => Err(ValidationError::new(
            "cites",
            "an inference must cite at least one record it rests on",
        )),
        EpistemicType::Decision
            if !sources.is_empty() && sources.iter().all(|t| *t == EpistemicType::Decision) =>
        {
            Err(ValidationError::new(
                "cites",
                "a decision may not cite only decisions: cite the inference or observation that justifies it",
            ))
        }
        _ => Ok(()),
    }
}

/// A stored record as the rest of the app sees it; the JSON shape of `GET /api/v1/memories`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MemoryRecord {
    /// Row id.
    pub id: i64,
    /// Kind (fixes the lifetime).
    pub kind: MemoryKind,
    /// observation / inference / decision / action_result.
    pub epistemic_type: EpistemicType,
    /// The knowledge, redacted.
    pub text: String,
    /// Services it is about (lower-case).
    pub services: Vec<String>,
    /// Failure-mode tags (`connection_pool_exhausted`, …).
    pub failure_modes: Vec<String>,
    /// The action it is about, for remediation and recommendation records.
    pub action_kind: Option<ActionKind>,
    /// The action's target (service, node, flag…).
    pub target: Option<String>,
    /// The incident it came from.
    pub incident_id: Option<String>,
    /// pending / confirmed / superseded / retracted.
    pub validation: Validation,
    /// For inferences: confidence after the ceilings.
    pub confidence: Option<Confidence>,
    /// 1 (low) … 4 (critical).
    pub importance: i64,
    /// For lessons: the rule.
    pub rule: Option<Rule>,
    /// Who wrote it (user, `system`, an integration).
    pub author: String,
    /// When it was written (UTC).
    #[schema(value_type = String, format = DateTime)]
    pub created_at: jiff::Timestamp,
    /// When recall last returned it.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_recalled_at: Option<jiff::Timestamp>,
    /// How often recall returned it.
    pub recall_count: i64,
    /// How many learnings confirmed it (bumped instead of writing a duplicate).
    pub evidence_count: i64,
    /// The record that replaced it.
    pub superseded_by: Option<i64>,
    /// Ids of the records it derives from / cites.
    pub sources: Vec<i64>,
    /// Kind-specific details (line ranges of an observation, runbook steps, …).
    pub data: serde_json::Value,
}

#[cfg(test)]
impl MemoryRecord {
    /// A confirmed root cause `id` of `incident` (or of none) with `failure_modes`, for unit
    /// tests of the layers that read recall results.
    pub(crate) fn for_test(id: i64, incident: Option<&str>, failure_modes: &[&str]) -> Self {
        Self {
            id,
            kind: MemoryKind::RootCause,
            epistemic_type: EpistemicType::Inference,
            text: format!("record {id}"),
            services: Vec::new(),
            failure_modes: failure_modes.iter().map(|t| t.to_string()).collect(),
            action_kind: None,
            target: None,
            incident_id: incident.map(str::to_string),
            validation: Validation::Confirmed,
            confidence: None,
            importance: 2,
            rule: None,
            author: "victor".into(),
            created_at: jiff::Timestamp::UNIX_EPOCH,
            last_recalled_at: None,
            recall_count: 0,
            evidence_count: 1,
            superseded_by: None,
            sources: Vec::new(),
            data: serde_json::Value::Null,
        }
    }
}

impl MemoryRecord {
    /// The record that replaced this one: the one that superseded it, else the later one that
    /// contradicted it (`data.contradicted_by`).
    pub fn replaced_by(&self) -> Option<i64> {
        self.superseded_by
            .or_else(|| self.data.get("contradicted_by").and_then(|v| v.as_i64()))
    }

    /// Short reference for people and models: `OBS-12`, `INF-3`, `DEC-7`, `ACT-9` for working
    /// records, `MEM-40` for organizational memory.
    pub fn reference(&self) -> String {
        record_ref(self.id, self.kind, self.epistemic_type)
    }

    /// Age in days at `now` (never negative).
    pub fn age_days(&self, now: jiff::Timestamp) -> f64 {
        age_days(self.created_at, now)
    }

    /// The merged rule this record was consolidated into (`data.consolidated_into`).
    pub fn consolidated_into(&self) -> Option<i64> {
        self.data.get("consolidated_into").and_then(|v| v.as_i64())
    }

    /// The later record that contradicts this one (`data.contradicted_by`).
    pub fn contradicted_by(&self) -> Option<i64> {
        self.data.get("contradicted_by").and_then(|v| v.as_i64())
    }
}

/// Days (fractional, never negative) from `created_at` to `now`.
pub fn age_days(created_at: jiff::Timestamp, now: jiff::Timestamp) -> f64 {
    let secs = now.as_second() - created_at.as_second();
    (secs.max(0) as f64) / 86_400.0
}

/// See [`MemoryRecord::reference`].
pub fn record_ref(id: i64, kind: MemoryKind, t: EpistemicType) -> String {
    let prefix = if kind.is_durable() {
        "MEM"
    } else {
        match t {
            EpistemicType::Observation => "OBS",
            EpistemicType::Inference => "INF",
            EpistemicType::Decision => "DEC",
            EpistemicType::ActionResult => "ACT",
        }
    };
    format!("{prefix}-{id}")
}

/// A record to write. Text is redacted by the service before it reaches the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NewRecord {
    /// Kind.
    pub kind: MemoryKind,
    /// Epistemic type.
    pub epistemic_type: EpistemicType,
    /// Text.
    pub text: String,
    /// Services.
    #[serde(default)]
    pub services: Vec<String>,
    /// Failure-mode tags.
    #[serde(default)]
    pub failure_modes: Vec<String>,
    /// Action kind.
    #[serde(default)]
    pub action_kind: Option<ActionKind>,
    /// Action target.
    #[serde(default)]
    pub target: Option<String>,
    /// Source incident.
    #[serde(default)]
    pub incident_id: Option<String>,
    /// Validation state at write.
    pub validation: Validation,
    /// Confidence (inferences).
    #[serde(default)]
    pub confidence: Option<Confidence>,
    /// 1–4.
    #[serde(default = "default_importance")]
    pub importance: i64,
    /// Rule (lessons).
    #[serde(default)]
    pub rule: Option<Rule>,
    /// Author.
    pub author: String,
    /// Ids of cited records.
    #[serde(default)]
    pub cites: Vec<i64>,
    /// Idempotency key: a second write with the same origin returns the first record.
    #[serde(default)]
    pub origin: Option<String>,
    /// Kind-specific details.
    #[serde(default)]
    pub data: serde_json::Value,
}

fn default_importance() -> i64 {
    2
}

impl NewRecord {
    /// A record of `kind` with its default epistemic type, confirmed, importance 2, no keys.
    pub fn new(kind: MemoryKind, text: impl Into<String>, author: impl Into<String>) -> Self {
        Self {
            kind,
            epistemic_type: kind.default_epistemic_type(),
            text: text.into(),
            services: Vec::new(),
            failure_modes: Vec::new(),
            action_kind: None,
            target: None,
            incident_id: None,
            validation: Validation::Confirmed,
            confidence: None,
            importance: 2,
            rule: None,
            author: author.into(),
            cites: Vec::new(),
            origin: None,
            data: serde_json::Value::Null,
        }
    }
}

/// Whether an observation record is the summary of a log submission (line count, window,
/// templates, errors, format — see [`crate::evidence::SUMMARY_SALIENCE`]): shown first on the
/// page, but it says nothing about the failure, so recall queries and post-mortem symptoms leave
/// it out.
pub fn is_summary(o: &MemoryRecord) -> bool {
    o.data.get("salience").and_then(|v| v.as_u64())
        == Some(u64::from(crate::evidence::SUMMARY_SALIENCE))
}

#[cfg(test)]
mod tests;
