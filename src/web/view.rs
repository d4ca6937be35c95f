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
        let name = Self::zone_name_for(user, headers);
        match TimeZone::get(&name) {
            Ok(tz) => Self {
                tz,
                zone_name: name,
            },
            Err(_) => Self::utc(),
        }
    }

    /// The name of the zone [`Clock::for_viewer`] shows `user`'s times in, unchecked: the
    /// profile's zone, else the browser's `tz` cookie (set by `tz.js`), else `UTC` (a name
    /// that is no zone is shown as UTC). Cheap: no zone is loaded.
    pub fn zone_name_for(user: Option<&User>, headers: &HeaderMap) -> String {
        if let Some(zone) = user.and_then(|u| u.time_zone.clone()) {
            return zone;
        }
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == "tz")
            .map_or_else(|| "UTC".into(), |(_, v)| v.replace("%2F", "/"))
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

    /// `text` with each instant and window that statements write in UTC
    /// ([`crate::evidence::time::mentions`]) rewritten in this zone, with its offset:
    /// `2026-06-02 09:00 → 09:40 UTC` is `2026-06-02 11:00 → 11:40 +02:00` for a viewer in
    /// Berlin in June. The end carries its own date when it falls on another local day, and its
    /// own offset when a DST change lies between.
    pub fn localize(&self, text: &str) -> String {
        let found = crate::evidence::time::mentions(text);
        if found.is_empty() {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len() + 8 * found.len());
        let mut last = 0;
        for m in found {
            out.push_str(&text[last..m.range.start]);
            let start = m.start.to_zoned_datetime(self.tz.clone());
            let minute = |z: &jiff::ZonedDateTime| z.strftime("%Y-%m-%d %H:%M").to_string();
            let offset = |z: &jiff::ZonedDateTime| z.strftime("%:z").to_string();
            if m.since {
                out.push_str("since ");
            }
            out.push_str(&minute(&start));
            match m.end.map(|e| e.to_zoned_datetime(self.tz.clone())) {
                Some(end) => {
                    let same_day = end.date() == start.date();
                    if offset(&end) != offset(&start) {
                        out.push(' ');
                        out.push_str(&offset(&start));
                    }
                    out.push_str(" → ");
                    if same_day {
                        out.push_str(&end.strftime("%H:%M").to_string());
                    } else {
                        out.push_str(&minute(&end));
                    }
                    out.push(' ');
                    out.push_str(&offset(&end));
                }
                None => {
                    out.push(' ');
                    out.push_str(&offset(&start));
                }
            }
            last = m.range.end;
        }
        out.push_str(&text[last..]);
        out
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
            // The current step is the one whose work is to be done now: the step that leaves the
            // state (after resolving, the post-mortem; once learned, none).
            let status = if current_step(state) == Some(label) {
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

/// Label of the step that holds the work of `state`: Investigate while investigating, then
/// Post-mortem, Confirm, Learn; `None` once learned.
pub fn current_step(state: IncidentState) -> Option<&'static str> {
    use IncidentState::*;
    match state {
        Investigating => Some("Investigate"),
        Resolved => Some("Post-mortem"),
        PostmortemDraft => Some("Confirm"),
        Confirmed => Some("Learn"),
        Learned => None,
    }
}

/// What the "next step" card on the incident page asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextKind {
    /// No evidence yet: paste or upload some.
    AddEvidence,
    /// Evidence but no investigation: run the copilot.
    Investigate,
    /// Investigated: approve or reject recommendations, record verdicts, then resolve.
    Act,
    /// Resolved: draft the post-mortem.
    DraftPostmortem,
    /// Draft, and this viewer may confirm it.
    Confirm,
    /// Draft, and this viewer may not confirm it: edit it and ask a reviewer.
    EditPostmortem,
    /// Confirmed: preview what Learn writes and learn it.
    Learn,
    /// Learned: nothing left; the learnings are in memory.
    Done,
}

/// The "next step" card: what to do now, and which form the card carries.
#[derive(Debug, Clone)]
pub struct NextStep {
    /// Which form the card shows.
    pub kind: NextKind,
    /// Short imperative heading.
    pub title: &'static str,
    /// One or two sentences on what to do and why.
    pub text: String,
}

impl NextStep {
    /// CSS class / test hook of the card (`next-evidence`, `next-act`, …).
    pub fn class(&self) -> &'static str {
        match self.kind {
            NextKind::AddEvidence => "next-evidence",
            NextKind::Investigate => "next-investigate",
            NextKind::Act => "next-act",
            NextKind::DraftPostmortem => "next-postmortem",
            NextKind::Confirm => "next-confirm",
            NextKind::EditPostmortem => "next-edit",
            NextKind::Learn => "next-learn",
            NextKind::Done => "next-done",
        }
    }

    /// Whether the card is of kind `k` (for templates).
    pub fn is(&self, k: &str) -> bool {
        self.class().strip_prefix("next-") == Some(k)
    }
}

/// Decides the next step of an incident for one viewer.
///
/// `may_confirm` is whether this viewer may confirm the draft now (reviewer role, and not its last
/// editor unless self-confirmation is allowed). `resolved_by_action` is whether an approved
/// action already has the verdict "resolved": then the next step is to resolve, and the other
/// recommendations are not "waiting" (issue #49).
pub fn next_step(
    state: IncidentState,
    has_evidence: bool,
    investigated: bool,
    open_recommendations: usize,
    resolved_by_action: bool,
    may_confirm: bool,
) -> NextStep {
    use IncidentState::*;
    let (kind, title, text) = match state {
        Investigating if !has_evidence => (
            NextKind::AddEvidence,
            "Add evidence",
            "Paste log lines, metrics, an alert body or a note, or upload a file. The copilot groups \
             them into observations; then investigate."
                .to_string(),
        ),
        Investigating if !investigated => (
            NextKind::Investigate,
            "Investigate",
            "The copilot proposes hypotheses that cite the evidence and past incidents, and actions \
             from a closed list (approving only simulates)."
                .to_string(),
        ),
        Investigating if resolved_by_action => (
            NextKind::Act,
            "Resolve the incident",
            "An approved action resolved it: resolve with a summary and the root cause. The \
             other recommendations need no decision."
                .to_string(),
        ),
        Investigating => (
            NextKind::Act,
            "Act on the recommendations, then resolve",
            if open_recommendations > 0 {
                format!(
                    "{open_recommendations} recommendation{} waiting: approve (simulated) or reject \
                     each, record a verdict on what you approved, then resolve with a summary and \
                     the root cause.",
                    if open_recommendations == 1 { " is" } else { "s are" }
                )
            } else {
                "Record a verdict on what you approved, then resolve with a summary and the root \
                 cause."
                    .to_string()
            },
        ),
        Resolved => (
            NextKind::DraftPostmortem,
            "Write the post-mortem",
            "The draft is written from what happened: what worked, what did not, and lessons as \
             ALWAYS / BECAUSE / SCOPE / SEVERITY rules. Edit it, then a reviewer confirms it."
                .to_string(),
        ),
        PostmortemDraft if may_confirm => (
            NextKind::Confirm,
            "Review and confirm the post-mortem",
            "Read the draft; confirm it when it is right. Only confirmed knowledge can be learned."
                .to_string(),
        ),
        PostmortemDraft => (
            NextKind::EditPostmortem,
            "Edit the post-mortem draft",
            "Correct the draft, then ask a reviewer (someone who did not edit it last) to confirm it."
                .to_string(),
        ),
        Confirmed => (
            NextKind::Learn,
            "Preview and learn",
            "See exactly which records Learn writes to organizational memory, then learn them."
                .to_string(),
        ),
        Learned => (
            NextKind::Done,
            "Learned",
            "This incident is closed and in organizational memory. Open a new incident for new \
             evidence."
                .to_string(),
        ),
    };
    NextStep { kind, title, text }
}

/// A byte limit for people: binary megabytes with one decimal when it has one (`50 MiB`,
/// `1.5 MiB`), kibibytes under 1 MiB (`4 KiB`), bytes under 1 KiB.
pub fn mebibytes(bytes: usize) -> String {
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    if bytes < 1024 * 1024 {
        return format!("{} KiB", bytes / 1024);
    }
    let tenths = (bytes as f64 / (1024.0 * 1024.0) * 10.0).round() as u64;
    if tenths.is_multiple_of(10) {
        format!("{} MiB", tenths / 10)
    } else {
        format!("{}.{} MiB", tenths / 10, tenths % 10)
    }
}

/// How long ago `then` was, in the largest whole unit (`45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`).
pub fn age(then: &jiff::Timestamp, now: &jiff::Timestamp) -> String {
    let secs = now.as_second().saturating_sub(then.as_second()).max(0);
    let (d, h, m) = (secs / 86_400, secs % 86_400 / 3600, secs % 3600 / 60);
    if d > 0 {
        format!("{d} d {h} h")
    } else if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min")
    } else {
        format!("{secs} s")
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {

    #[test]
    fn mebibytes_show_one_decimal_only_when_there_is_one() {
        assert_eq!(mebibytes(50 * 1024 * 1024), "50 MiB");
        assert_eq!(mebibytes(3 * 512 * 1024), "1.5 MiB");
        assert_eq!(mebibytes(4096), "4 KiB");
        assert_eq!(mebibytes(1000), "1000 bytes");
    }
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
        assert_eq!(s[2].status, "done");
        assert_eq!(s[3].status, "current");
        let s = stepper(IncidentState::PostmortemDraft, Role::Reviewer);
        assert!(s[3].disabled_reason.is_none());
    }

    #[test]
    fn the_current_step_is_the_work_still_to_do_after_each_transition() {
        let current = |st| {
            stepper(st, Role::Admin)
                .into_iter()
                .filter(|s| s.status == "current")
                .map(|s| s.label)
                .collect::<Vec<_>>()
        };
        assert_eq!(current(IncidentState::Investigating), ["Investigate"]);
        assert_eq!(current(IncidentState::Resolved), ["Post-mortem"]);
        assert_eq!(current(IncidentState::PostmortemDraft), ["Confirm"]);
        assert_eq!(current(IncidentState::Confirmed), ["Learn"]);
        assert!(current(IncidentState::Learned).is_empty());
        let s = stepper(IncidentState::Resolved, Role::Admin);
        assert_eq!(s[1].status, "done", "Resolve is done once resolved");
        let s = stepper(IncidentState::Learned, Role::Admin);
        assert!(s.iter().all(|s| s.status == "done"));
    }

    #[test]
    fn the_next_step_follows_the_work_of_each_state() {
        use IncidentState::*;
        assert_eq!(
            next_step(Investigating, false, false, 0, false, false).kind,
            NextKind::AddEvidence
        );
        assert_eq!(
            next_step(Investigating, true, false, 0, false, false).kind,
            NextKind::Investigate
        );
        let act = next_step(Investigating, true, true, 2, false, false);
        assert_eq!(act.kind, NextKind::Act);
        assert!(
            act.text.starts_with("2 recommendations are waiting"),
            "{}",
            act.text
        );
        let done = next_step(Investigating, true, true, 2, true, false);
        assert_eq!(done.title, "Resolve the incident");
        assert!(!done.text.contains("waiting"), "{}", done.text);
        assert_eq!(
            next_step(Resolved, true, true, 0, false, false).kind,
            NextKind::DraftPostmortem
        );
        assert_eq!(
            next_step(PostmortemDraft, true, true, 0, false, true).kind,
            NextKind::Confirm
        );
        assert_eq!(
            next_step(PostmortemDraft, true, true, 0, false, false).kind,
            NextKind::EditPostmortem
        );
        assert_eq!(
            next_step(Confirmed, true, true, 0, false, false).kind,
            NextKind::Learn
        );
        assert_eq!(
            next_step(Learned, true, true, 0, false, false).kind,
            NextKind::Done
        );
        assert!(next_step(Learned, true, true, 0, false, false).is("done"));
    }

    #[test]
    fn age_uses_the_largest_units() {
        let t: jiff::Timestamp = "2026-07-01T12:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        assert_eq!(age(&t, &at("2026-07-01T12:00:45Z")), "45 s");
        assert_eq!(age(&t, &at("2026-07-01T12:12:10Z")), "12 min");
        assert_eq!(age(&t, &at("2026-07-01T15:05:00Z")), "3 h 5 min");
        assert_eq!(age(&t, &at("2026-07-03T16:00:00Z")), "2 d 4 h");
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

    #[test]
    fn statements_are_shown_in_the_viewers_zone_with_the_offset() {
        let berlin = Clock {
            tz: TimeZone::get("Europe/Berlin").expect("zone"),
            zone_name: "Europe/Berlin".into(),
        };
        let text = "40 lines, 2026-06-02 09:00 → 09:40 UTC, 3 templates; firing since 2026-06-02 22:30 UTC";
        assert_eq!(
            berlin.localize(text),
            "40 lines, 2026-06-02 11:00 → 11:40 +02:00, 3 templates; firing since 2026-06-03 00:30 +02:00"
        );
        // Crossing local midnight: the end keeps its date.
        assert_eq!(
            berlin.localize("2026-06-02 21:50 → 22:10 UTC"),
            "2026-06-02 23:50 → 2026-06-03 00:10 +02:00"
        );
        // Across the autumn DST change each end keeps its own offset.
        assert_eq!(
            berlin.localize("2026-10-25 00:30 → 01:30 UTC"),
            "2026-10-25 02:30 +02:00 → 02:30 +01:00"
        );
        assert_eq!(
            Clock::utc().localize("first at 2026-06-02 09:14 UTC."),
            "first at 2026-06-02 09:14 +00:00."
        );
        assert_eq!(berlin.localize("no times here"), "no times here");
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
