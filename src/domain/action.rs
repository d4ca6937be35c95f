//! The closed vocabulary of actions the copilot may recommend (DESIGN.md §5). Anything else —
//! model output, API input — is coerced through an alias table or rejected, never passed through.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ValidationError;

macro_rules! action_kinds {
    ($($(#[$vm:meta])* $v:ident => $s:literal, $label:literal;)+) => {
        /// A remediation or investigation action. Approving one only simulates it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum ActionKind { $($(#[$vm])* $v),+ }

        /// Verdicts an engineer can record on an approved action.
pub const VERDICTS: [&str; 4] = [
    "resolved",
    "partially_resolved",
    "did_not_resolve",
    "made_worse",
];

/// Reads a verdict as chosen on a form or sent to the API: one of [`VERDICTS`]. A verdict is
/// never assumed: an empty one is refused with "choose a verdict".
///
/// # Errors
/// [`ValidationError`] on the `verdict` field for an empty or unknown verdict.
pub fn parse_verdict(s: &str) -> Result<&'static str, ValidationError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(ValidationError::new(
            "verdict",
            format!("choose a verdict: {}", VERDICTS.join(", ")),
        ));
    }
    VERDICTS.iter().copied().find(|v| *v == s).ok_or_else(|| {
        ValidationError::new(
            "verdict",
            format!("'{s}' is not a verdict; use {}", VERDICTS.join(", ")),
        )
    })
}

/// A verdict code (`did_not_resolve`, …, or `rejected`) in words for people ("did not
/// resolve"); an unknown code is returned with its underscores as spaces.
pub fn verdict_label(code: &str) -> String {
    match code {
        "resolved" => "resolved".into(),
        "partially_resolved" => "partially resolved".into(),
        "did_not_resolve" => "did not resolve".into(),
        "made_worse" => "made it worse".into(),
        other => other.replace('_', " "),
    }
}

impl ActionKind {
            /// Every action kind.
            pub const ALL: &'static [ActionKind] = &[$(ActionKind::$v),+];

            /// The snake_case name (`raise_pool_limit`).
            pub fn as_str(self) -> &'static str {
                match self { $(ActionKind::$v => $s),+ }
            }

            /// A label for people ("Raise the connection-pool limit").
            pub fn label(self) -> &'static str {
                match self { $(ActionKind::$v => $label),+ }
            }
        }
    };
}

action_kinds! {
    /// Restart the service's processes.
    RestartService => "restart_service", "Restart the service";
    /// Roll back to the previous deploy.
    RollbackDeploy => "rollback_deploy", "Roll back the last deploy";
    /// Add instances.
    ScaleOut => "scale_out", "Scale out (add instances)";
    /// Remove instances.
    ScaleIn => "scale_in", "Scale in (remove instances)";
    /// Raise the connection-pool size.
    RaisePoolLimit => "raise_pool_limit", "Raise the connection-pool limit";
    /// Lower the connection-pool size.
    LowerPoolLimit => "lower_pool_limit", "Lower the connection-pool limit";
    /// Fail over to the database replica.
    FailoverDatabase => "failover_database", "Fail over the database";
    /// Flush a cache.
    FlushCache => "flush_cache", "Flush the cache";
    /// Turn a feature flag off.
    DisableFeatureFlag => "disable_feature_flag", "Disable the feature flag";
    /// Drain a node.
    DrainNode => "drain_node", "Drain the node";
    /// Rotate credentials or certificates.
    RotateCredentials => "rotate_credentials", "Rotate credentials / certificates";
    /// Block a traffic source.
    BlockTrafficSource => "block_traffic_source", "Block the traffic source";
    /// Raise a timeout.
    IncreaseTimeout => "increase_timeout", "Increase the timeout";
    /// Ship a fix forward.
    RollForwardFix => "roll_forward_fix", "Roll forward a fix";
    /// Page the owning team.
    PageOwnerTeam => "page_owner_team", "Page the owning team";
    /// Collect more evidence before acting.
    GatherMoreEvidence => "gather_more_evidence", "Gather more evidence";
    /// Free disk space.
    FreeDiskSpace => "free_disk_space", "Free disk space";
    /// Throttle / rate-limit clients.
    ThrottleClients => "throttle_clients", "Throttle clients";
}

/// Aliases accepted from models and people, mapped to their action kind (lower-case, spaces and
/// dashes read as underscores).
const ALIASES: &[(&str, ActionKind)] = &[
    ("restart", ActionKind::RestartService),
    ("reboot", ActionKind::RestartService),
    ("bounce", ActionKind::RestartService),
    ("restart_pods", ActionKind::RestartService),
    ("rolling_restart", ActionKind::RestartService),
    ("revert", ActionKind::RollbackDeploy),
    ("rollback", ActionKind::RollbackDeploy),
    ("roll_back", ActionKind::RollbackDeploy),
    ("revert_deploy", ActionKind::RollbackDeploy),
    ("scale_up", ActionKind::ScaleOut),
    ("add_capacity", ActionKind::ScaleOut),
    ("add_instances", ActionKind::ScaleOut),
    ("scale_down", ActionKind::ScaleIn),
    ("increase_pool_size", ActionKind::RaisePoolLimit),
    ("increase_pool", ActionKind::RaisePoolLimit),
    ("raise_pool_size", ActionKind::RaisePoolLimit),
    ("increase_connection_pool", ActionKind::RaisePoolLimit),
    ("increase_max_connections", ActionKind::RaisePoolLimit),
    ("decrease_pool_size", ActionKind::LowerPoolLimit),
    ("failover", ActionKind::FailoverDatabase),
    ("promote_replica", ActionKind::FailoverDatabase),
    ("clear_cache", ActionKind::FlushCache),
    ("purge_cache", ActionKind::FlushCache),
    ("disable_flag", ActionKind::DisableFeatureFlag),
    ("feature_flag_off", ActionKind::DisableFeatureFlag),
    ("toggle_feature_flag", ActionKind::DisableFeatureFlag),
    ("cordon_node", ActionKind::DrainNode),
    ("drain", ActionKind::DrainNode),
    ("rotate_certificate", ActionKind::RotateCredentials),
    ("renew_certificate", ActionKind::RotateCredentials),
    ("rotate_keys", ActionKind::RotateCredentials),
    ("rotate_secrets", ActionKind::RotateCredentials),
    ("block_ip", ActionKind::BlockTrafficSource),
    ("block_traffic", ActionKind::BlockTrafficSource),
    ("raise_timeout", ActionKind::IncreaseTimeout),
    ("extend_timeout", ActionKind::IncreaseTimeout),
    ("hotfix", ActionKind::RollForwardFix),
    ("deploy_fix", ActionKind::RollForwardFix),
    ("roll_forward", ActionKind::RollForwardFix),
    ("escalate", ActionKind::PageOwnerTeam),
    ("page_team", ActionKind::PageOwnerTeam),
    ("page_oncall", ActionKind::PageOwnerTeam),
    ("investigate", ActionKind::GatherMoreEvidence),
    ("collect_logs", ActionKind::GatherMoreEvidence),
    ("gather_evidence", ActionKind::GatherMoreEvidence),
    ("clean_disk", ActionKind::FreeDiskSpace),
    ("free_disk", ActionKind::FreeDiskSpace),
    ("rate_limit", ActionKind::ThrottleClients),
    ("throttle", ActionKind::ThrottleClients),
];

/// How people write an action in free text (lower case, matched on word boundaries): a question
/// like "the on-call lead proposes we raise the pool ceiling; is that safe?" names
/// `raise_pool_limit` without its name. Data, not code branches; phrases that also name a
/// failure mode ("rate limit", "timeout") are left out.
pub const MENTIONS: &[(&str, ActionKind)] = &[
    ("restart the service", ActionKind::RestartService),
    ("restarting the pods", ActionKind::RestartService),
    ("restart the pods", ActionKind::RestartService),
    ("rolling restart", ActionKind::RestartService),
    ("roll back", ActionKind::RollbackDeploy),
    ("revert the deploy", ActionKind::RollbackDeploy),
    ("revert the release", ActionKind::RollbackDeploy),
    ("scale out", ActionKind::ScaleOut),
    ("add more instances", ActionKind::ScaleOut),
    ("add replicas", ActionKind::ScaleOut),
    ("more replicas", ActionKind::ScaleOut),
    ("more workers", ActionKind::ScaleOut),
    ("scale in", ActionKind::ScaleIn),
    ("bump the pool", ActionKind::RaisePoolLimit),
    ("raise the pool", ActionKind::RaisePoolLimit),
    ("raising the pool", ActionKind::RaisePoolLimit),
    ("increase the pool", ActionKind::RaisePoolLimit),
    ("bigger pool", ActionKind::RaisePoolLimit),
    ("larger pool", ActionKind::RaisePoolLimit),
    ("max pool size", ActionKind::RaisePoolLimit),
    ("fail over", ActionKind::FailoverDatabase),
    ("promote the replica", ActionKind::FailoverDatabase),
    ("flush the cache", ActionKind::FlushCache),
    ("clear the cache", ActionKind::FlushCache),
    ("purge the cache", ActionKind::FlushCache),
    ("turn off the flag", ActionKind::DisableFeatureFlag),
    ("disable the flag", ActionKind::DisableFeatureFlag),
    ("drain the node", ActionKind::DrainNode),
    ("rotate the credentials", ActionKind::RotateCredentials),
    ("rotate the keys", ActionKind::RotateCredentials),
    ("re-issue the certificate", ActionKind::RotateCredentials),
    ("reissue the certificate", ActionKind::RotateCredentials),
    ("block the traffic", ActionKind::BlockTrafficSource),
    ("raise the timeout", ActionKind::IncreaseTimeout),
    ("increase the timeout", ActionKind::IncreaseTimeout),
    ("longer timeout", ActionKind::IncreaseTimeout),
    ("bigger timeout", ActionKind::IncreaseTimeout),
    ("roll forward", ActionKind::RollForwardFix),
    ("free up disk", ActionKind::FreeDiskSpace),
    ("clean up disk", ActionKind::FreeDiskSpace),
    ("throttle the clients", ActionKind::ThrottleClients),
];

impl ActionKind {
    /// Action kinds that `text` names in free words (see [`MENTIONS`]), each once, in the
    /// order of [`MENTIONS`].
    pub fn mentioned_in(text: &str) -> Vec<ActionKind> {
        let lower = text.to_lowercase();
        let mut out = Vec::new();
        for (phrase, kind) in MENTIONS {
            if !out.contains(kind) && contains_phrase(&lower, phrase) {
                out.push(*kind);
            }
        }
        out
    }

    /// Exact parse of the snake_case name.
    ///
    /// # Errors
    /// [`ValidationError`] on `kind` listing the accepted names.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        let t = s.trim();
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == t)
            .ok_or_else(|| {
                let all: Vec<&str> = Self::ALL.iter().map(|k| k.as_str()).collect();
                ValidationError::new(
                    "kind",
                    format!(
                        "'{s}' is not an action kind; use one of: {}",
                        all.join(", ")
                    ),
                )
            })
    }

    /// Lenient parse for model output and aliases: normalises case, spaces and dashes, then
    /// tries the exact names and the alias table. `None` means the item must be dropped.
    pub fn coerce(s: &str) -> Option<Self> {
        let norm: String = s
            .trim()
            .to_lowercase()
            .chars()
            .map(|c| if c == ' ' || c == '-' { '_' } else { c })
            .collect();
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str() == norm)
            .or_else(|| ALIASES.iter().find(|(a, _)| *a == norm).map(|(_, k)| *k))
    }
}

/// Whether `phrase` occurs in `haystack` (both lower-case) on word boundaries.
fn contains_phrase(haystack: &str, phrase: &str) -> bool {
    let bytes = haystack.as_bytes();
    let mut start = 0;
    while let Some(pos) = haystack[start..].find(phrase) {
        let i = start + pos;
        let j = i + phrase.len();
        let before_ok = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let after_ok = j >= bytes.len() || !bytes[j].is_ascii_alphanumeric();
        if before_ok && after_ok {
            return true;
        }
        start = i + 1;
        while !haystack.is_char_boundary(start) {
            start += 1;
        }
    }
    false
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a recommendation stands: proposed by the copilot, then approved (its action is
/// simulated) or rejected by a responder, once (compare-and-set in the store). A verdict follows
/// an approval; it is not a status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RecommendationStatus {
    /// Waiting for a responder.
    Proposed,
    /// Approved: the action was simulated; a verdict may follow.
    Approved,
    /// Rejected with a reason.
    Rejected,
}

impl RecommendationStatus {
    /// The stored and API name (`proposed`, `approved`, `rejected`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Proposed => "proposed",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
        }
    }
}

impl std::fmt::Display for RecommendationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for RecommendationStatus {
    type Error = String;

    /// Reads a stored status.
    ///
    /// # Errors
    /// The text when it names no status.
    fn try_from(s: String) -> Result<Self, Self::Error> {
        match s.as_str() {
            "proposed" => Ok(Self::Proposed),
            "approved" => Ok(Self::Approved),
            "rejected" => Ok(Self::Rejected),
            _ => Err(format!("'{s}' is not a recommendation status")),
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_verdict_must_be_chosen_and_known() {
        let empty = parse_verdict("  ").unwrap_err().to_string();
        assert!(empty.contains("choose a verdict"), "{empty}");
        assert_eq!(
            parse_verdict(" did_not_resolve ").unwrap(),
            "did_not_resolve"
        );
        let unknown = parse_verdict("fixed").unwrap_err().to_string();
        assert!(unknown.contains("'fixed' is not a verdict"), "{unknown}");
    }

    use super::*;

    #[test]
    fn free_text_names_actions_without_their_names() {
        assert_eq!(
            ActionKind::mentioned_in(
                "Before we bump the pool on orders-db, is there a reason not to?"
            ),
            vec![ActionKind::RaisePoolLimit]
        );
        assert_eq!(
            ActionKind::mentioned_in("We did a rolling restart, then a roll back"),
            vec![ActionKind::RestartService, ActionKind::RollbackDeploy]
        );
        assert!(ActionKind::mentioned_in("the pool is exhausted and requests time out").is_empty());
    }

    #[test]
    fn aliases_coerce_and_unknown_kinds_are_dropped() {
        assert_eq!(
            ActionKind::coerce("restart"),
            Some(ActionKind::RestartService)
        );
        assert_eq!(
            ActionKind::coerce("Revert"),
            Some(ActionKind::RollbackDeploy)
        );
        assert_eq!(
            ActionKind::coerce("raise pool limit"),
            Some(ActionKind::RaisePoolLimit)
        );
        assert_eq!(ActionKind::coerce("reboot_cluster"), None);
        assert_eq!(ActionKind::coerce("rm -rf /"), None);
        assert!(
            ActionKind::parse("restart").is_err(),
            "exact parse has no aliases"
        );
        assert!(ActionKind::ALL.len() >= 16);
    }

    #[test]
    fn serde_refuses_unknown_kinds() {
        assert!(serde_json::from_str::<ActionKind>("\"scale_out\"").is_ok());
        assert!(serde_json::from_str::<ActionKind>("\"delete_database\"").is_err());
    }
}
