//! Presentation helpers shared by pages: instants in the viewer's time zone (profile setting,
//! else the browser-reported zone from the `tz` cookie set by `static/tz.js`, else UTC) with the
//! offset visible, and the workflow stepper.

use axum::http::{HeaderMap, header};
use jiff::tz::TimeZone;

use crate::domain::incident::required_role;
use crate::domain::{IncidentState, Role, Transition};
use crate::store::users::User;

/// Formats instants for one viewer.
#[derive(Debug, Clone)]
pub struct Clock {
    tz: TimeZone,
    /// IANA name of the zone in use (`UTC` when unknown).
    pub zone_name: String,
}

impl Clock {
    /// Picks the zone: the user's profile setting, else the `tz` cookie, else UTC. Unknown zone
    /// names fall back to UTC.
    pub fn for_viewer(user: Option<&User>, headers: &HeaderMap) -> Self {
        let from_cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == "tz")
            .map(|(_, v)| v.replace("%2F", "/"));
        let name = user
            .and_then(|u| u.time_zone.clone())
            .or(from_cookie)
            .unwrap_or_else(|| "UTC".into());
        match TimeZone::get(&name) {
            Ok(tz) => Self {
                tz,
                zone_name: name,
            },
            Err(_) => Self::utc(),
        }
    }

    /// UTC.
    pub fn utc() -> Self {
        Self {
            tz: TimeZone::UTC,
            zone_name: "UTC".into(),
        }
    }

    /// `2026-11-29 17:40:05 +01:00`.
    pub fn fmt(&self, ts: &jiff::Timestamp) -> String {
        ts.to_zoned_datetime(self.tz.clone())
            .strftime("%Y-%m-%d %H:%M:%S %:z")
            .to_string()
    }

    /// Like [`Clock::fmt`] for an instant as stored (RFC 3339 text); text that is not an
    /// instant is shown as it is.
    pub fn fmt_stored(&self, stored: &str) -> String {
        stored
            .parse::<jiff::Timestamp>()
            .map_or_else(|_| stored.to_string(), |t| self.fmt(&t))
    }

    /// Like [`Clock::fmt`] for an optional instant; `—` when absent.
    pub fn fmt_opt(&self, ts: &Option<jiff::Timestamp>) -> String {
        ts.as_ref().map_or_else(|| "—".to_string(), |t| self.fmt(t))
    }
}

/// Whether an IANA time-zone name is known (for the profile form).
pub fn is_known_zone(name: &str) -> bool {
    TimeZone::get(name).is_ok()
}

/// One step of the workflow stepper on the incident page.
#[derive(Debug, Clone)]
pub struct Step {
    /// "Investigate", "Resolve", …
    pub label: &'static str,
    /// `done`, `current` or `todo` (CSS class).
    pub status: &'static str,
    /// The action this step performs (`None` for Investigate).
    pub action: Option<Transition>,
    /// Why the action is disabled now; `None` = it can be done by this viewer now.
    pub disabled_reason: Option<String>,
    /// Path suffix the action's form posts to under `/incidents/{id}/` (empty for Investigate).
    pub path: &'static str,
}

/// Path suffix under `/incidents/{id}/` (pages) and `/api/v1/incidents/{id}/` (API) of a
/// transition.
pub fn action_path(t: Transition) -> &'static str {
    match t {
        Transition::Resolve => "resolve",
        Transition::Reopen => "reopen",
        Transition::DraftPostmortem => "postmortem",
        Transition::Confirm => "postmortem/confirm",
        Transition::Learn => "learn",
    }
}

/// The stepper Investigate → Resolve → Post-mortem → Confirm → Learn for `state`, as seen by a
/// viewer with `role`: each step that cannot be taken now says why.
pub fn stepper(state: IncidentState, role: Role) -> Vec<Step> {
    use IncidentState::*;
    let reached = |s: IncidentState| {
        let order = |x: IncidentState| IncidentState::ALL.iter().position(|y| *y == x).unwrap_or(0);
        order(state) >= order(s)
    };
    let steps = [
        ("Investigate", None, Investigating),
        ("Resolve", Some(Transition::Resolve), Resolved),
        (
            "Post-mortem",
            Some(Transition::DraftPostmortem),
            PostmortemDraft,
        ),
        ("Confirm", Some(Transition::Confirm), Confirmed),
        ("Learn", Some(Transition::Learn), Learned),
    ];
    steps
        .into_iter()
        .map(|(label, action, reaches)| {
            let status = if state == reaches {
                "current"
            } else if reached(reaches) {
                "done"
            } else {
                "todo"
            };
            let disabled_reason = match action {
                None => Some("every incident starts here".to_string()),
                Some(t) => match state.apply(t) {
                    Err(e) => Some(capitalise(e.hint())),
                    Ok(_) if !role.includes(required_role(t)) => {
                        Some(format!("Needs the {} role", required_role(t)))
                    }
                    Ok(_) => None,
                },
            };
            Step {
                label,
                status,
                action,
                disabled_reason,
                path: action.map_or("", action_path),
            }
        })
        .collect()
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_template_placeholders_render_as_written() {
        let html = render_markdown("- lease <\\*> expired after <\\*> ms\n").0;
        assert!(
            html.contains("lease &lt;*&gt; expired after &lt;*&gt; ms"),
            "{html}"
        );
        assert!(!html.contains("<em>"), "{html}");
    }

    #[test]
    fn stepper_enables_only_the_next_step_and_explains_the_rest() {
        let s = stepper(IncidentState::Investigating, Role::Responder);
        assert_eq!(s[1].label, "Resolve");
        assert!(s[1].disabled_reason.is_none());
        assert_eq!(
            s[2].disabled_reason.as_deref(),
            Some("Resolve the incident first")
        );
        assert_eq!(
            s[4].disabled_reason.as_deref(),
            Some("A reviewer must confirm the post-mortem first")
        );
        let s = stepper(IncidentState::PostmortemDraft, Role::Responder);
        assert_eq!(
            s[3].disabled_reason.as_deref(),
            Some("Needs the reviewer role")
        );
        assert_eq!(s[1].status, "done");
        assert_eq!(s[2].status, "current");
        let s = stepper(IncidentState::PostmortemDraft, Role::Reviewer);
        assert!(s[3].disabled_reason.is_none());
    }

    #[test]
    fn clock_shows_the_offset_of_the_viewer_zone() {
        let ts: jiff::Timestamp = "2026-07-01T12:00:00Z".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, "a=b; tz=Europe%2FParis".parse().unwrap());
        let c = Clock::for_viewer(None, &h);
        assert_eq!(c.fmt(&ts), "2026-07-01 14:00:00 +02:00");
        let c = Clock::for_viewer(None, &HeaderMap::new());
        assert_eq!(c.fmt(&ts), "2026-07-01 12:00:00 +00:00");
        h.insert(header::COOKIE, "tz=Not/AZone".parse().unwrap());
        assert_eq!(Clock::for_viewer(None, &h).zone_name, "UTC");
    }
}

/// HTML that went through the Markdown renderer and the sanitizer; the only value templates
/// print with `|safe`.
#[derive(Debug, Clone)]
pub struct SafeHtml(String);

impl std::fmt::Display for SafeHtml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Renders Markdown (CommonMark + tables, pulldown-cmark) and sanitizes the HTML with ammonia:
/// no script, no event handlers, no `<base>`, only http(s)/mailto links, which get
/// `rel="noopener noreferrer"`.
pub fn render_markdown(md: &str) -> SafeHtml {
    let mut opts = pulldown_cmark::Options::empty();
    opts.insert(pulldown_cmark::Options::ENABLE_TABLES);
    opts.insert(pulldown_cmark::Options::ENABLE_STRIKETHROUGH);
    let parser = pulldown_cmark::Parser::new_ext(md, opts);
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, parser);
    let clean = ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer"))
        .clean(&html)
        .to_string();
    SafeHtml(clean)
}
