//! The Markdown export: free text made inert, then the document's sections.

use super::{ActionOutcome, Incident, Postmortem, duration};

/// Free text made inert in Markdown: what was written is what every renderer shows, as text.
/// `&`, `<`, `>` become entities (no raw HTML such as `<script>` or `<img>` survives in the
/// export), `[`, `]`, `` ` ``, `*` and `_` are escaped (the `<*>` placeholders of log templates
/// keep their stars) (no link, image or code span can form), and a
/// `javascript:`, `vbscript:` or `data:` scheme is broken by a zero-width space before its
/// colon (it reads the same, and no renderer, sanitizer or later HTML decoding makes it a scheme).
pub fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '[' | ']' | '`' | '\\' | '*' | '_' => {
                out.push('\\');
                out.push(ch);
            }
            _ => out.push(ch),
        }
    }
    for scheme in ["javascript:", "vbscript:", "data:"] {
        let mut i = 0;
        while let Some(pos) = out[i..].to_ascii_lowercase().find(scheme) {
            let at = i + pos + scheme.len() - 1;
            out.insert(at, '\u{200B}');
            i = at + '\u{200B}'.len_utf8() + 1;
        }
    }
    out
}

/// One line of free text for a list item or a heading.
fn md_line(s: &str) -> String {
    md_text(&s.replace(['\r', '\n'], " "))
}

fn list(out: &mut String, items: &[String]) {
    if items.is_empty() {
        out.push_str("_None recorded._\n");
    }
    for i in items {
        out.push_str(&format!("- {}\n", md_line(i)));
    }
}

fn outcomes(out: &mut String, items: &[ActionOutcome]) {
    if items.is_empty() {
        out.push_str("_None recorded._\n");
    }
    for a in items {
        out.push_str(&format!(
            "- `{}` on {} — {}{}{}\n",
            a.kind,
            md_line(&a.target),
            a.outcome.replace('_', " "),
            if a.note.is_empty() {
                String::new()
            } else {
                format!(": {}", md_line(&a.note))
            },
            if a.dead_end_reason.is_empty() {
                String::new()
            } else {
                format!(
                    " (approved despite a known dead end; different this time: {})",
                    md_line(&a.dead_end_reason)
                )
            }
        ));
    }
}

impl Postmortem {
    /// The post-mortem as Markdown, instants in UTC (the export format).
    pub fn to_markdown(&self, incident: &Incident) -> String {
        self.to_markdown_with(incident, |t| {
            t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
        })
    }

    /// The post-mortem as Markdown with instants written by `when` (the page writes them in
    /// the viewer's zone, with the offset, like every other time on the site).
    pub fn to_markdown_with(
        &self,
        incident: &Incident,
        when: impl Fn(&jiff::Timestamp) -> String,
    ) -> String {
        let t = |ts: &Option<jiff::Timestamp>| ts.as_ref().map_or_else(|| "—".to_string(), &when);
        let mut o = format!(
            "# Post-mortem {} — {}\n\n",
            incident.id,
            md_line(&incident.title)
        );
        o.push_str(&format!(
            "Service: {} · Severity: {}\n\n## Summary\n\n{}\n\n",
            incident.service,
            incident.severity,
            md_text(&self.summary)
        ));
        o.push_str(&format!(
            "## Impact\n\n{}\n\n| moment | instant |\n| --- | --- |\n| started | {} |\n| detected | {} |\n| mitigated | {} |\n| resolved | {} |\n\nTime to detect: {} · time to resolve: {}\n\n",
            md_text(&self.impact.description),
            t(&self.impact.started_at),
            t(&self.impact.detected_at),
            t(&self.impact.mitigated_at),
            t(&self.impact.resolved_at),
            duration(self.impact.time_to_detect_secs),
            duration(self.impact.time_to_resolve_secs)
        ));
        if !self.impact.left_out.is_empty() {
            o.push_str("Evidence left out of these times (outside the incident's window):\n\n");
            list(&mut o, &self.impact.left_out);
            o.push('\n');
        }
        o.push_str("## Symptoms\n\n");
        list(&mut o, &self.symptoms);
        o.push_str(&format!(
            "\n## Root cause\n\n{}\n\n## Trigger\n\n{}\n\n## Contributing factors\n\n",
            md_text(&self.root_cause),
            if self.has_trigger() {
                md_text(&self.trigger)
            } else {
                "_Not written yet: a reviewer confirms the draft once it says what set the incident off._"
                    .to_string()
            }
        ));
        list(&mut o, &self.contributing_factors);
        o.push_str("\n## What worked\n\n");
        outcomes(&mut o, &self.what_worked);
        o.push_str("\n## What did NOT work\n\n");
        outcomes(&mut o, &self.what_did_not_work);
        o.push_str("\n## Rejected recommendations\n\n");
        outcomes(&mut o, &self.rejected);
        o.push_str("\n## Misleading hypotheses\n\n");
        list(&mut o, &self.misleading_hypotheses);
        o.push_str("\n## Lessons\n\n");
        if self.lessons.is_empty() {
            o.push_str("_None recorded._\n");
        }
        for l in &self.lessons {
            o.push_str(&format!(
                // A backslash before the line break is a hard break (CommonMark §6.7): each
                // part on its own line when rendered, not run together into one paragraph.
                "- **ALWAYS:** {}\\\n  **BECAUSE:** {}\\\n  **SCOPE:** {}\\\n  **SEVERITY:** {}\n",
                md_line(&l.always),
                md_line(&l.because),
                md_line(&l.scope),
                l.severity
            ));
        }
        o.push_str("\n## Action items\n\n");
        list(&mut o, &self.action_items);
        o.push_str("\n## Detection gaps\n\n");
        list(&mut o, &self.detection_gaps);
        o
    }
}
