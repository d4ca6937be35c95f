//! Lessons as prescriptive rules: their text block and the editor's blocks read back.

use serde::{Deserialize, Serialize};

use super::RuleSeverity;
use crate::domain::ValidationError;

/// A lesson as a prescriptive rule (DESIGN.md §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Rule {
    /// The imperative: "Check for a connection leak before raising the pool limit".
    pub always: String,
    /// Why, naming the grounding incident: "During INC-2026-0007 raising the limit …".
    pub because: String,
    /// Where it applies: services and/or failure modes, or `all`.
    pub scope: String,
    /// How much it matters.
    pub severity: RuleSeverity,
}

impl Rule {
    /// The rule as one text block, used for search and display:
    /// `ALWAYS: … BECAUSE: … SCOPE: … SEVERITY: …`.
    pub fn text(&self) -> String {
        format!(
            "ALWAYS: {}\nBECAUSE: {}\nSCOPE: {}\nSEVERITY: {}",
            self.always, self.because, self.scope, self.severity
        )
    }

    /// Rules as the post-mortem editor shows them: each [`Rule::text`], a blank line between.
    /// [`Rule::parse_blocks`] reads it back.
    pub fn blocks_text(rules: &[Rule]) -> String {
        rules
            .iter()
            .map(Rule::text)
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Parses lesson blocks as the editor sends them: blocks split by a blank line, each line
    /// `ALWAYS:`, `BECAUSE:`, `SCOPE:` or `SEVERITY:` (any case) then its text, up to the first
    /// colon. Any line endings (browsers send CRLF). A block without `SCOPE` applies to `all`;
    /// without `SEVERITY` it is `medium`.
    ///
    /// # Errors
    /// [`ValidationError`] on field `lessons`, naming the lesson (from 1): a line without a
    /// colon, an unknown key, or a severity that is not low, medium, high or critical.
    pub fn parse_blocks(s: &str) -> Result<Vec<Rule>, ValidationError> {
        let s = crate::domain::text::unix_newlines(s);
        let mut out = Vec::new();
        for (n, block) in s
            .split("\n\n")
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .enumerate()
        {
            let mut rule = Rule {
                always: String::new(),
                because: String::new(),
                scope: "all".into(),
                severity: RuleSeverity::Medium,
            };
            for line in block.lines() {
                let (k, v) = line.split_once(':').ok_or_else(|| {
                    ValidationError::new(
                        "lessons",
                        format!(
                            "lesson {}: every line starts with ALWAYS:, BECAUSE:, SCOPE: or SEVERITY:",
                            n + 1
                        ),
                    )
                })?;
                let v = v.trim().to_string();
                match k.trim().to_ascii_uppercase().as_str() {
                    "ALWAYS" => rule.always = v,
                    "BECAUSE" => rule.because = v,
                    "SCOPE" => rule.scope = v,
                    "SEVERITY" => rule.severity = RuleSeverity::parse(&v.to_lowercase())?,
                    other => {
                        return Err(ValidationError::new(
                            "lessons",
                            format!("lesson {}: unknown line '{other}:'", n + 1),
                        ));
                    }
                }
            }
            out.push(rule);
        }
        Ok(out)
    }
}
