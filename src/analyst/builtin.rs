//! The built-in analyst: deterministic, offline. A playbook (data) maps failure-mode tags to
//! root-cause hypotheses and actions; evidence disambiguates look-alikes (a flat request rate
//! with climbing pool wait reads as a leak, a climbing one as load); recalled memory adds "same as
//! INC-…" hypotheses, actions that worked before, and rules.
//!
//! Just over 600 lines because the playbook table is most of it; the tests are in
//! `builtin_tests.rs`.

use std::collections::BTreeSet;

use async_trait::async_trait;

use super::{
    Analyst, AnalystError, AnalystOutput, InvestigationInput, PriorIncident, ProposedAction,
    ProposedHypothesis,
};
use crate::domain::postmortem::{DraftFacts, Postmortem};
use crate::domain::{ActionKind, Confidence, MemoryKind};

/// One playbook entry: when all of `when` are present and none of `unless`, propose the
/// hypothesis and the actions.
pub struct Play {
    /// Tags that must all be present.
    pub when: &'static [&'static str],
    /// Tags that must be absent.
    pub unless: &'static [&'static str],
    /// The hypothesis.
    pub hypothesis: &'static str,
    /// Confidence before ceilings.
    pub confidence: Confidence,
    /// Actions with their rationale.
    pub actions: &'static [(ActionKind, &'static str)],
}

use ActionKind as A;
use Confidence as C;

/// The playbook, most specific entries first.
pub const PLAYBOOK: &[Play] = &[
    Play {
        when: &["connection_pool_exhausted", "connection_leak"],
        unless: &[],
        confidence: C::High,
        hypothesis: "Connection leak: connections are not returned to the pool, so it fills up while the request rate stays flat",
        actions: &[
            (
                A::RollbackDeploy,
                "A leak usually arrives with a code change: roll back the last deploy",
            ),
            (
                A::RestartService,
                "Restarting returns leaked connections: a stopgap that buys time, not a fix",
            ),
            (
                A::RaisePoolLimit,
                "A bigger pool only delays exhaustion when connections leak",
            ),
        ],
    },
    Play {
        when: &["connection_pool_exhausted", "traffic_surge"],
        unless: &["connection_leak"],
        confidence: C::High,
        hypothesis: "Load-driven pool exhaustion: the pool is too small for the current request rate",
        actions: &[
            (
                A::RaisePoolLimit,
                "Pool wait climbs with the request rate: more connections absorb the load",
            ),
            (A::ScaleOut, "Spread the load over more instances"),
        ],
    },
    Play {
        when: &["connection_leak"],
        unless: &["connection_pool_exhausted"],
        confidence: C::High,
        hypothesis: "Connection leak: pool usage climbs while the request rate stays flat",
        actions: &[
            (
                A::RollbackDeploy,
                "A leak usually arrives with a code change: roll back the last deploy",
            ),
            (
                A::RestartService,
                "Restarting returns leaked connections: a stopgap",
            ),
            (
                A::RaisePoolLimit,
                "A bigger pool only delays exhaustion when connections leak",
            ),
        ],
    },
    Play {
        when: &["connection_pool_exhausted"],
        unless: &["connection_leak", "traffic_surge"],
        confidence: C::Medium,
        hypothesis: "Connection pool exhausted: callers wait for database connections (pool too small, a leak, or slow queries holding connections)",
        actions: &[
            (
                A::RaisePoolLimit,
                "More connections relieve waiting callers if the database has headroom",
            ),
            (
                A::RestartService,
                "Restarting frees held connections while the cause is found",
            ),
            (
                A::GatherMoreEvidence,
                "Compare pool wait with the request rate: flat rate means a leak, climbing rate means load",
            ),
        ],
    },
    Play {
        when: &["too_many_connections"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "The database refuses connections: clients together open more than its max_connections",
        actions: &[
            (
                A::LowerPoolLimit,
                "Smaller per-instance pools keep the total under the database limit",
            ),
            (A::ScaleIn, "Fewer instances open fewer connections"),
        ],
    },
    Play {
        when: &["slow_query"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Slow queries hold connections and threads (missing index or a bad plan)",
        actions: &[
            (
                A::RollbackDeploy,
                "A new query or migration often brings the slow plan",
            ),
            (
                A::GatherMoreEvidence,
                "Find the slow statement and its plan",
            ),
        ],
    },
    Play {
        when: &["oom_killed"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Processes are killed for exceeding their memory limit (a leak or a limit set too low)",
        actions: &[
            (
                A::RollbackDeploy,
                "A memory regression usually ships with a release",
            ),
            (A::ScaleOut, "Spread memory-heavy work"),
            (A::RestartService, "Restarts reset memory: a stopgap"),
        ],
    },
    Play {
        when: &["memory_pressure"],
        unless: &["oom_killed"],
        confidence: C::Low,
        hypothesis: "Memory pressure is building (a leak or an undersized limit)",
        actions: &[
            (A::RestartService, "Restarts reset memory: a stopgap"),
            (
                A::GatherMoreEvidence,
                "Take a heap profile before restarting",
            ),
        ],
    },
    Play {
        when: &["gc_pressure"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Garbage-collection pauses stall requests (heap too small or allocation spike)",
        actions: &[
            (A::ScaleOut, "Less load per instance means less allocation"),
            (A::RestartService, "Resets the heap: a stopgap"),
        ],
    },
    Play {
        when: &["disk_full"],
        unless: &[],
        confidence: C::High,
        hypothesis: "A disk or volume is full, so writes fail",
        actions: &[(
            A::FreeDiskSpace,
            "Free space (rotate or delete logs, old data) so writes succeed",
        )],
    },
    Play {
        when: &["file_descriptors_exhausted"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "The process ran out of file descriptors (a socket or file leak, or a low ulimit)",
        actions: &[
            (
                A::RestartService,
                "Restarting closes leaked descriptors: a stopgap",
            ),
            (
                A::RollbackDeploy,
                "A descriptor leak usually ships with a change",
            ),
        ],
    },
    Play {
        when: &["tls_certificate_expired"],
        unless: &[],
        confidence: C::High,
        hypothesis: "An expired TLS certificate breaks handshakes",
        actions: &[(A::RotateCredentials, "Renew and deploy the certificate")],
    },
    Play {
        when: &["certificate_verify_failed"],
        unless: &["tls_certificate_expired"],
        confidence: C::Medium,
        hypothesis: "Certificate verification fails (wrong chain or CA bundle)",
        actions: &[
            (A::RotateCredentials, "Deploy the right chain / CA bundle"),
            (
                A::RollbackDeploy,
                "A config or image change may have dropped the CA bundle",
            ),
        ],
    },
    Play {
        when: &["dns_resolution_failure"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Name resolution fails, so dependencies are unreachable",
        actions: &[
            (
                A::RollbackDeploy,
                "DNS failures often follow a resolver or config change",
            ),
            (A::PageOwnerTeam, "Page the DNS / platform owners"),
        ],
    },
    Play {
        when: &["deadlock"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Transactions deadlock on conflicting lock order",
        actions: &[
            (
                A::RollbackDeploy,
                "A new code path likely changed the lock order",
            ),
            (A::RollForwardFix, "Fix the lock order and ship it"),
        ],
    },
    Play {
        when: &["lock_wait_timeout"],
        unless: &["deadlock"],
        confidence: C::Low,
        hypothesis: "Long transactions hold locks others wait for",
        actions: &[(A::GatherMoreEvidence, "Find the blocking transaction")],
    },
    Play {
        when: &["replication_lag"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "A database replica lags behind the primary, so reads are stale",
        actions: &[
            (
                A::ThrottleClients,
                "Slow the write load (bulk jobs) so the replica catches up",
            ),
            (
                A::GatherMoreEvidence,
                "Check replica I/O and long-running queries",
            ),
        ],
    },
    Play {
        when: &["rate_limited"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Requests are rate-limited (a quota reached or a limiter misconfigured)",
        actions: &[
            (A::ThrottleClients, "Back off the noisy client"),
            (A::RollbackDeploy, "A limiter config change may be wrong"),
        ],
    },
    Play {
        when: &["upstream_5xx"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "An upstream dependency returns 5xx errors",
        actions: &[
            (
                A::PageOwnerTeam,
                "Page the team owning the failing upstream",
            ),
            (A::GatherMoreEvidence, "Find which upstream fails first"),
        ],
    },
    Play {
        when: &["timeout"],
        unless: &["connection_pool_exhausted", "connection_leak"],
        confidence: C::Low,
        hypothesis: "Calls time out: a slow dependency or saturated resources",
        actions: &[
            (
                A::IncreaseTimeout,
                "Longer timeouts let slow calls finish (can hide the cause)",
            ),
            (A::GatherMoreEvidence, "Find which dependency got slow"),
        ],
    },
    Play {
        when: &["crash_loop_backoff"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Pods crash on start and back off (bad image or config)",
        actions: &[(
            A::RollbackDeploy,
            "Crash loops after a rollout point at the new image or config",
        )],
    },
    Play {
        when: &["process_crash"],
        unless: &["crash_loop_backoff"],
        confidence: C::Low,
        hypothesis: "The process crashes (panic or segfault)",
        actions: &[
            (A::RollbackDeploy, "Crashes usually ship with a change"),
            (
                A::RestartService,
                "Bring instances back while the cause is found",
            ),
        ],
    },
    Play {
        when: &["consumer_lag"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "Consumers fall behind the queue (too few consumers or slow processing)",
        actions: &[(A::ScaleOut, "More consumers drain the backlog")],
    },
    Play {
        when: &["thread_pool_exhausted"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "The worker / thread pool is exhausted by slow requests",
        actions: &[
            (A::ScaleOut, "More workers"),
            (A::GatherMoreEvidence, "Find what holds the workers"),
        ],
    },
    Play {
        when: &["cache_failure"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "The cache fails or is cold, pushing load onto the backing store",
        actions: &[
            (A::FlushCache, "Clear poisoned entries"),
            (A::ThrottleClients, "Shed load while the cache warms"),
        ],
    },
    Play {
        when: &["network_partition"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "A network partition splits nodes",
        actions: &[
            (A::DrainNode, "Take the isolated node out of rotation"),
            (A::PageOwnerTeam, "Page the network owners"),
        ],
    },
    Play {
        when: &["authentication_failure"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "Authentication fails (expired or rotated credentials, or an attack)",
        actions: &[
            (A::RotateCredentials, "Re-issue the credentials"),
            (A::BlockTrafficSource, "Block an abusive source"),
        ],
    },
    Play {
        when: &["brute_force_attempt"],
        unless: &[],
        confidence: C::Medium,
        hypothesis: "A brute-force login attempt hammers the service",
        actions: &[(A::BlockTrafficSource, "Block the attacking addresses")],
    },
    Play {
        when: &["cpu_saturation"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "CPU is saturated",
        actions: &[(A::ScaleOut, "Add capacity")],
    },
    Play {
        when: &["config_change"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "A configuration or feature-flag change triggered the failure",
        actions: &[
            (A::DisableFeatureFlag, "Turn off the newly enabled flag"),
            (A::RollbackDeploy, "Revert the configuration change"),
        ],
    },
    Play {
        when: &["deploy_change"],
        unless: &[],
        confidence: C::Low,
        hypothesis: "The last deploy introduced the failure",
        actions: &[(
            A::RollbackDeploy,
            "The failure started with a deploy: roll it back",
        )],
    },
];

/// The built-in analyst.
#[derive(Debug, Clone, Default)]
pub struct BuiltinAnalyst;

fn incident_of(m: &crate::memory::recall::Recalled) -> Option<&str> {
    m.memory.incident_id.as_deref()
}

/// Whether recall marked `m` a weak match (found by meaning alone, under the query's chance
/// level): shown as such, but never a precedent — it lends no cause and no action.
fn is_weak(m: &crate::memory::recall::Recalled) -> bool {
    m.marks.contains(&"weak match")
}

/// Whether any recalled record of a past incident is a real (not weak) match.
fn has_precedent(input: &InvestigationInput) -> bool {
    input
        .recalled
        .iter()
        .any(|r| incident_of(r).is_some() && !is_weak(r))
}

/// Ids of up to 5 of the incident's observations that carry one of `play_tags`.
fn cites_for(input: &InvestigationInput, play_tags: &[&str]) -> Vec<i64> {
    input
        .observations
        .iter()
        .filter(|o| {
            o.failure_modes
                .iter()
                .any(|t| play_tags.contains(&t.as_str()))
        })
        .map(|o| o.id)
        .take(5)
        .collect()
}

/// Step 1 of [`BuiltinAnalyst::analyse`]: hypotheses from recalled root causes.
fn prior_hypotheses(input: &InvestigationInput, out: &mut AnalystOutput) {
    // 1. Prior incidents: a confirmed root cause recalled with shared failure modes.
    let mut seen_prior = BTreeSet::new();
    for r in input
        .recalled
        .iter()
        .filter(|r| r.memory.kind == MemoryKind::RootCause && !is_weak(r))
    {
        let Some(inc) = incident_of(r) else { continue };
        if !seen_prior.insert(inc.to_string()) || seen_prior.len() > 2 {
            continue;
        }
        let shared: Vec<String> = r.why.tags.clone();
        let why = if shared.is_empty() {
            format!("similar wording ({})", r.why.matched_terms.join(", "))
        } else {
            format!("same failure modes ({})", shared.join(", "))
        };
        let mut cites = vec![r.memory.id];
        cites.extend(cites_for(
            input,
            &shared.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        out.hypotheses.push(ProposedHypothesis {
            statement: format!("Same cause as {inc}: {}", r.memory.text),
            confidence: if shared.is_empty() {
                Confidence::Low
            } else {
                Confidence::Medium
            },
            cites,
            prior_incidents: vec![PriorIncident {
                id: inc.to_string(),
                why,
            }],
        });
    }
}

/// Step 2 of [`BuiltinAnalyst::analyse`]: the plays whose tags match, with their actions.
fn playbook(input: &InvestigationInput, tags: &BTreeSet<&str>, out: &mut AnalystOutput) {
    // 2. The playbook over this incident's tags.
    for play in PLAYBOOK {
        if !play.when.iter().all(|t| tags.contains(t))
            || play.unless.iter().any(|t| tags.contains(t))
        {
            continue;
        }
        let h = out.hypotheses.len();
        let prior: Vec<PriorIncident> = input
            .recalled
            .iter()
            .filter(|r| !is_weak(r))
            .filter(|r| {
                r.memory
                    .failure_modes
                    .iter()
                    .any(|t| play.when.contains(&t.as_str()))
            })
            .filter_map(|r| incident_of(r).map(|i| (i, r)))
            .take(2)
            .map(|(i, r)| PriorIncident {
                id: i.to_string(),
                why: format!(
                    "{} recorded there: {}",
                    r.memory.kind,
                    crate::evidence::truncate_chars(&r.memory.text, 160)
                ),
            })
            .collect();
        out.hypotheses.push(ProposedHypothesis {
            statement: play.hypothesis.to_string(),
            confidence: play.confidence,
            cites: cites_for(input, play.when),
            prior_incidents: prior,
        });
        for (kind, why) in play.actions {
            out.actions.push(ProposedAction {
                kind: kind.as_str().into(),
                target: input.incident.service.clone(),
                rationale: (*why).into(),
                hypothesis: Some(h),
            });
        }
    }
}

/// Steps 3 and 4 of [`BuiltinAnalyst::analyse`]: actions that worked or were tried before.
fn tried_before(input: &InvestigationInput, out: &mut AnalystOutput) {
    // 3. What worked before on similar incidents.
    for r in input.recalled.iter().filter(|r| {
        r.memory.kind == MemoryKind::RemediationSuccess && !r.why.tags.is_empty() && !is_weak(r)
    }) {
        if let (Some(a), Some(inc)) = (r.memory.action_kind, incident_of(r)) {
            out.actions.push(ProposedAction {
                kind: a.as_str().into(),
                target: input.incident.service.clone(),
                rationale: format!(
                    "Resolved {inc} ({}): {}",
                    r.why.tags.join(", "),
                    crate::evidence::truncate_chars(&r.memory.text, 200)
                ),
                hypothesis: None,
            });
        }
    }
    // 4. Actions recorded as tried in the most similar recalled incidents, whether they
    // worked or not: responders reach for them too. The dead-end check flags the ones that
    // failed there; flagged recommendations sort last and are never hidden.
    for r in &input.tried {
        let (Some(a), Some(inc)) = (r.action_kind, r.incident_id.as_deref()) else {
            continue;
        };
        let outcome = match r.kind {
            MemoryKind::RemediationFailure => "did not resolve it",
            MemoryKind::RemediationSuccess => "resolved it",
            _ => continue,
        };
        out.actions.push(ProposedAction {
            kind: a.as_str().into(),
            target: input.incident.service.clone(),
            rationale: format!(
                "Tried during the similar incident {inc} and {outcome}: {}",
                crate::evidence::truncate_chars(&r.text, 200)
            ),
            hypothesis: None,
        });
    }
}

impl BuiltinAnalyst {
    /// The deterministic analysis (also used as the fallback of the LLM analyst).
    pub fn analyse(input: &InvestigationInput) -> AnalystOutput {
        let tags: BTreeSet<&str> = input.failure_modes.iter().map(String::as_str).collect();
        let service = input.incident.service.clone();
        let mut out = AnalystOutput::default();
        prior_hypotheses(input, &mut out);
        playbook(input, &tags, &mut out);
        tried_before(input, &mut out);
        if !input.recalled.is_empty() && !has_precedent(input) {
            out.hypotheses.push(ProposedHypothesis {
                statement: "No precedent in organizational memory: the past incidents recalled \
                            are weak matches, so this reasoning rests on this incident's evidence \
                            alone"
                    .into(),
                confidence: Confidence::Low,
                cites: input.observations.iter().take(3).map(|o| o.id).collect(),
                prior_incidents: Vec::new(),
            });
        }
        if out.hypotheses.is_empty() {
            out.hypotheses.push(ProposedHypothesis {
                statement: "Not enough evidence for a specific cause yet".into(),
                confidence: Confidence::Low,
                cites: input.observations.iter().take(3).map(|o| o.id).collect(),
                prior_incidents: Vec::new(),
            });
        }
        out.actions.push(ProposedAction {
            kind: ActionKind::GatherMoreEvidence.as_str().into(),
            target: service,
            rationale: "Add logs, metrics (request rate next to latency / pool wait) and alerts: each narrows the cause".into(),
            hypothesis: None,
        });
        // One recommendation per action kind: the first (most specific) wins.
        let mut seen = BTreeSet::new();
        out.actions.retain(|a| seen.insert(a.kind.clone()));
        out
    }
}

#[async_trait]
impl Analyst for BuiltinAnalyst {
    fn name(&self) -> String {
        "built-in".into()
    }

    async fn investigate(&self, input: &InvestigationInput) -> Result<AnalystOutput, AnalystError> {
        Ok(Self::analyse(input))
    }

    async fn draft_postmortem(
        &self,
        _facts: &DraftFacts,
        builtin: &Postmortem,
    ) -> Result<Postmortem, AnalystError> {
        Ok(builtin.clone())
    }
}

#[cfg(test)]
#[path = "builtin_tests.rs"]
mod tests;
