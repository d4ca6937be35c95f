//! Chat channels' rules (DESIGN.md §8, issue #50): the kinds of channel, the incident events a
//! channel may ask for and which timeline entry each one reports, and a channel's routing (which
//! services, from which severity, which events). Pure: the store writes the outbox rows these
//! rules select, the services compose and deliver them.

use serde::{Deserialize, Serialize};

use super::{Severity, ValidationError};

/// Where a channel posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    /// A Slack incoming webhook (also Mattermost's and Rocket.Chat's Slack-compatible ones):
    /// Block Kit with a plain-text fallback.
    SlackWebhook,
    /// A Matrix room, through the client-server API with an access token.
    Matrix,
    /// A Microsoft Teams Workflows webhook taking an Adaptive Card.
    TeamsWorkflow,
}

impl ChannelKind {
    /// Every kind, in the order the admin page lists them.
    pub const ALL: [ChannelKind; 3] = [Self::SlackWebhook, Self::Matrix, Self::TeamsWorkflow];

    /// Stored and API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SlackWebhook => "slack_webhook",
            Self::Matrix => "matrix",
            Self::TeamsWorkflow => "teams_workflow",
        }
    }

    /// What the admin page calls it.
    pub fn label(self) -> &'static str {
        match self {
            Self::SlackWebhook => "Slack incoming webhook (or Mattermost, Rocket.Chat)",
            Self::Matrix => "Matrix room",
            Self::TeamsWorkflow => "Microsoft Teams Workflows webhook",
        }
    }

    /// Parses [`ChannelKind::as_str`].
    ///
    /// # Errors
    /// A validation error on `kind` naming the accepted values.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s.trim())
            .ok_or_else(|| {
                ValidationError::new(
                    "kind",
                    format!(
                        "'{s}' is not a channel kind; use slack_webhook, matrix or teams_workflow"
                    ),
                )
            })
    }
}

/// Something that happened to an incident that a channel may post.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChatEvent {
    /// Opened by a person or an alert; the message carries the memory's first read.
    Opened,
    /// An action that carried a dead-end warning was approved anyway.
    DeadEndApproved,
    /// Resolved (with its root cause).
    Resolved,
    /// A post-mortem draft is ready for review.
    PostmortemReady,
    /// The post-mortem was confirmed by a reviewer.
    Confirmed,
    /// Learned: its knowledge went into memory.
    Learned,
    /// Every alert of its group resolved while the incident is still open.
    AlertsResolved,
}

impl ChatEvent {
    /// Every event, in the order of an incident's life.
    pub const ALL: [ChatEvent; 7] = [
        Self::Opened,
        Self::DeadEndApproved,
        Self::AlertsResolved,
        Self::Resolved,
        Self::PostmortemReady,
        Self::Confirmed,
        Self::Learned,
    ];

    /// Stored and API name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Opened => "opened",
            Self::DeadEndApproved => "dead_end_approved",
            Self::Resolved => "resolved",
            Self::PostmortemReady => "postmortem_ready",
            Self::Confirmed => "confirmed",
            Self::Learned => "learned",
            Self::AlertsResolved => "alerts_resolved",
        }
    }

    /// What the admin page calls it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Opened => "Incident opened, with the memory's first read",
            Self::DeadEndApproved => "A known dead end approved anyway",
            Self::Resolved => "Resolved",
            Self::PostmortemReady => "Post-mortem ready for review",
            Self::Confirmed => "Post-mortem confirmed",
            Self::Learned => "Learned into memory",
            Self::AlertsResolved => "Every alert resolved while the incident is open",
        }
    }

    /// Parses [`ChatEvent::as_str`].
    ///
    /// # Errors
    /// A validation error on `events` naming the accepted values.
    pub fn parse(s: &str) -> Result<Self, ValidationError> {
        Self::ALL
            .into_iter()
            .find(|e| e.as_str() == s.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|e| e.as_str()).collect();
                ValidationError::new(
                    "events",
                    format!("'{s}' is not an event; use {}", names.join(", ")),
                )
            })
    }

    /// The event a timeline entry of `kind` may report, before the facts only the write
    /// knows are checked (see [`Candidate`]). `None`: no channel ever posts it.
    pub fn candidate(kind: &str) -> Option<Candidate> {
        match kind {
            "opened" => Some(Candidate::Always(Self::Opened)),
            "resolve" => Some(Candidate::Always(Self::Resolved)),
            "draft_postmortem" => Some(Candidate::Always(Self::PostmortemReady)),
            "confirm" => Some(Candidate::Always(Self::Confirmed)),
            "learn" => Some(Candidate::Always(Self::Learned)),
            "action_approved" => Some(Candidate::IfApprovedWithWarning),
            "alerts" => Some(Candidate::IfNoAlertFiringWhileOpen),
            _ => None,
        }
    }
}

/// What a timeline entry reports, as far as its kind tells (see [`ChatEvent::candidate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidate {
    /// This event, whatever else holds.
    Always(ChatEvent),
    /// [`ChatEvent::DeadEndApproved`] when the approved recommendation carried a dead-end
    /// warning.
    IfApprovedWithWarning,
    /// [`ChatEvent::AlertsResolved`] when none of the incident's alerts fires any more and the
    /// incident is still being investigated.
    IfNoAlertFiringWhileOpen,
}

/// Which incidents' events a channel posts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Routing {
    /// Only these services (lower-case names); empty: every service.
    pub services: Vec<String>,
    /// Only incidents this severe or more (SEV1 is the most severe).
    pub min_severity: Severity,
    /// Only these events; never empty.
    pub events: Vec<ChatEvent>,
}

impl Routing {
    /// Whether an `event` of an incident on `service` with `severity` goes to this channel.
    pub fn wants(&self, service: &str, severity: Severity, event: ChatEvent) -> bool {
        severity <= self.min_severity
            && self.events.contains(&event)
            && (self.services.is_empty() || self.services.iter().any(|s| s == service))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_takes_severe_enough_incidents_of_its_services_and_events() {
        let r = Routing {
            services: vec!["checkout".into()],
            min_severity: Severity::Sev2,
            events: vec![ChatEvent::Opened],
        };
        assert!(r.wants("checkout", Severity::Sev1, ChatEvent::Opened));
        assert!(r.wants("checkout", Severity::Sev2, ChatEvent::Opened));
        assert!(!r.wants("checkout", Severity::Sev3, ChatEvent::Opened));
        assert!(!r.wants("billing", Severity::Sev1, ChatEvent::Opened));
        assert!(!r.wants("checkout", Severity::Sev1, ChatEvent::Resolved));
        let all = Routing {
            services: vec![],
            ..r
        };
        assert!(all.wants("billing", Severity::Sev1, ChatEvent::Opened));
    }

    #[test]
    fn names_parse_back_and_unknown_ones_are_refused() {
        for e in ChatEvent::ALL {
            assert_eq!(ChatEvent::parse(e.as_str()), Ok(e));
        }
        for k in ChannelKind::ALL {
            assert_eq!(ChannelKind::parse(k.as_str()), Ok(k));
        }
        assert_eq!(ChatEvent::parse("paged").unwrap_err().field, "events");
        assert_eq!(ChannelKind::parse("irc").unwrap_err().field, "kind");
        assert_eq!(ChatEvent::candidate("evidence_added"), None);
    }
}
