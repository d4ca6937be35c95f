//! The panels of the incident page a live page re-renders: which panels a change touches, the
//! quiet line that says what changed ("bob added evidence"), and the fragment route
//! `GET /incidents/{id}/panels?show=head,timeline` that renders them with the page's own
//! template blocks ([`super::super::incident::ShowPage`]), so a panel reads as it would after a
//! reload.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::super::auth::CurrentUser;
use super::super::errors::PageError;
use super::super::forms::KeptInput;
use super::super::incident::build_page;
use super::super::{AppState, incident_id};
use crate::domain::ValidationError;
use crate::error::AppError;

/// A panel of the incident page: a block of `templates/incidents/show.html` whose root element
/// carries `data-live-panel="<name>"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Panel {
    /// Title, state, service, age, who worked on it.
    Head,
    /// The next step and the workflow stepper.
    Next,
    /// Description, resolution and root cause.
    Summary,
    /// Evidence and observations, with the evidence forms.
    Observations,
    /// Hypotheses, recommendations, approvals and verdicts.
    Copilot,
    /// "Resolve now" while the investigation goes on.
    Resolve,
    /// What the organization learned before (recall).
    Memory,
    /// The timeline.
    Timeline,
}

impl Panel {
    /// Every panel, in page order.
    pub const ALL: [Panel; 8] = [
        Panel::Head,
        Panel::Next,
        Panel::Summary,
        Panel::Observations,
        Panel::Copilot,
        Panel::Resolve,
        Panel::Memory,
        Panel::Timeline,
    ];

    /// The name in `data-live-panel` and in `?show=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Panel::Head => "head",
            Panel::Next => "next",
            Panel::Summary => "summary",
            Panel::Observations => "observations",
            Panel::Copilot => "copilot",
            Panel::Resolve => "resolve",
            Panel::Memory => "memory",
            Panel::Timeline => "timeline",
        }
    }

    /// The panel named `name`.
    ///
    /// # Errors
    /// A [`ValidationError`] on `show` naming the panels there are.
    pub fn parse(name: &str) -> Result<Panel, ValidationError> {
        Panel::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| {
                ValidationError::new(
                    "show",
                    format!(
                        "no panel {name:?}; the panels are {}",
                        Panel::ALL.map(Panel::as_str).join(", ")
                    ),
                )
            })
    }
}

/// What a timeline event of kind `kind` changed on the page, and how the quiet line says it
/// after the actor's name ("added evidence"). An unknown kind re-renders every panel. Every
/// event touches the head (who worked on it) and the timeline.
pub fn change_of(kind: &str) -> (&'static str, &'static [Panel]) {
    use Panel::{Copilot, Head, Memory, Next, Observations, Resolve, Timeline};
    const EVIDENCE: &[Panel] = &[Head, Next, Observations, Memory, Resolve, Timeline];
    const ACTIONS: &[Panel] = &[Head, Next, Copilot, Resolve, Timeline];
    const STATE: &[Panel] = &Panel::ALL;
    const QUIET: &[Panel] = &[Head, Next, Timeline];
    match kind {
        "opened" => ("opened the incident", STATE),
        "evidence_added" => ("added evidence", EVIDENCE),
        "prometheus" => ("pulled Prometheus series", EVIDENCE),
        "alerts" => ("updated the alerts", EVIDENCE),
        "alert_flagged" => ("flagged an alert", EVIDENCE),
        "follows" => ("linked a learned incident", EVIDENCE),
        "investigated" => (
            "investigated",
            &[Head, Next, Copilot, Memory, Resolve, Timeline],
        ),
        "action_proposed" => ("proposed an action", ACTIONS),
        "action_approved" => ("approved an action", ACTIONS),
        "action_rejected" => ("rejected an action", ACTIONS),
        "verdict" => ("recorded a verdict", ACTIONS),
        "hypothesis_graded" => ("graded a hypothesis", ACTIONS),
        "memory_written" => ("wrote to memory", &[Head, Copilot, Memory, Timeline]),
        "postmortem_edited" => ("edited the post-mortem", QUIET),
        "proposal_drafted" => ("drafted a proposal for review", QUIET),
        "proposal_accepted" => ("accepted a proposal", QUIET),
        "proposal_rejected" => ("rejected a proposal", QUIET),
        "resolve" => ("resolved the incident", STATE),
        "reopen" => ("reopened the incident", STATE),
        "draft_postmortem" => ("drafted the post-mortem", STATE),
        "confirm" => ("confirmed the post-mortem", STATE),
        "learn" => ("learned from the incident", STATE),
        _ => ("changed the incident", STATE),
    }
}

#[derive(Deserialize)]
pub(in crate::web) struct PanelsQuery {
    /// Comma-separated panel names; every panel when absent.
    #[serde(default)]
    show: Option<String>,
}

/// `GET /incidents/{id}/panels?show=head,observations`: the named panels of the incident page
/// as the viewer would see them after a reload, concatenated in page order, each the root
/// element of its block (`data-live-panel`). The incident version the forms in them carry is
/// in `X-Incident-Version`, the newest timeline event shown in `X-Incident-Event`. Same
/// authorization as the page.
pub(in crate::web) async fn panels(
    State(state): State<AppState>,
    CurrentUser(user): CurrentUser,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<PanelsQuery>,
) -> Result<Response, PageError> {
    let id = incident_id(&id)?;
    let wanted: Vec<Panel> = match q.show.as_deref().filter(|s| !s.trim().is_empty()) {
        None => Panel::ALL.to_vec(),
        Some(list) => {
            let named = list
                .split(',')
                .map(|n| Panel::parse(n.trim()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(AppError::from)?;
            Panel::ALL
                .into_iter()
                .filter(|p| named.contains(p))
                .collect()
        }
    };
    let (_, page) = build_page(
        &state,
        &user,
        &headers,
        &id,
        KeptInput::default(),
        None,
        None,
    )
    .await?;
    let mut html = String::new();
    for panel in wanted {
        let rendered = match panel {
            Panel::Head => page.as_head().render(),
            Panel::Next => page.as_next().render(),
            Panel::Summary => page.as_summary().render(),
            Panel::Observations => page.as_observations().render(),
            Panel::Copilot => page.as_copilot().render(),
            Panel::Resolve => page.as_resolve().render(),
            Panel::Memory => page.as_memory().render(),
            Panel::Timeline => page.as_timeline().render(),
        }
        .map_err(|e| {
            AppError::Internal(anyhow::anyhow!("incident panel {}: {e}", panel.as_str()))
        })?;
        html.push_str(&rendered);
        html.push('\n');
    }
    let mut response = axum::response::Html(html).into_response();
    let h = response.headers_mut();
    h.insert("x-incident-version", HeaderValue::from(page.version()));
    h.insert("x-incident-event", HeaderValue::from(page.last_event_id()));
    h.insert(
        header::VARY,
        HeaderValue::from_static("cookie, authorization"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_panel_reads_back_from_its_name_and_an_unknown_one_names_the_choices() {
        for p in Panel::ALL {
            assert_eq!(Panel::parse(p.as_str()), Ok(p));
        }
        let e = Panel::parse("sidebar").unwrap_err();
        assert_eq!(e.field, "show");
        assert!(e.message.contains("head, next, summary"), "{e}");
    }

    #[test]
    fn a_change_names_what_happened_and_always_touches_head_and_timeline() {
        assert_eq!(change_of("evidence_added").0, "added evidence");
        assert_eq!(change_of("verdict").0, "recorded a verdict");
        assert!(change_of("evidence_added").1.contains(&Panel::Observations));
        assert!(change_of("verdict").1.contains(&Panel::Copilot));
        assert_eq!(change_of("something_new").1, &Panel::ALL);
        for kind in [
            "opened",
            "evidence_added",
            "verdict",
            "postmortem_edited",
            "resolve",
            "x",
        ] {
            let panels = change_of(kind).1;
            assert!(
                panels.contains(&Panel::Head) && panels.contains(&Panel::Timeline),
                "{kind}"
            );
        }
    }
}
