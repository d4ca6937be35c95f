//! A Slack incoming webhook (Slack, "Sending messages using incoming webhooks"): one JSON body
//! with Block Kit `blocks` and a `text` fallback (what notifications show). Mattermost's and
//! Rocket.Chat's Slack-compatible incoming webhooks take the same body: they show `text`
//! (Markdown) and ignore `blocks`, so `text` carries the whole message with the bare link.
//!
//! Limits (Slack, "Block Kit: section block" and "Blocks"): a section's text at most 3,000
//! characters, at most 50 blocks in a message; a header's plain text at most 150.

use serde_json::{Value, json};

use super::Message;
use super::text::{cut, slack};

/// Most characters of a section block's text (Slack's limit).
pub const SECTION_MAX: usize = 3000;

/// Most blocks in one message (Slack's limit).
pub const BLOCKS_MAX: usize = 50;

/// Most characters of a header block's text (Slack's limit).
pub const HEADER_MAX: usize = 150;

/// Most characters of the `text` fallback: Slack cuts messages above 40,000 and advises at most
/// 4,000; Mattermost's default post limit is 16,383.
pub const FALLBACK_MAX: usize = 4000;

/// The webhook body for `message`.
pub fn body(message: &Message) -> Value {
    let link = slack(&message.link);
    let more = format!(" <{link}|more on the incident page>");
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "emoji": false,
            "text": cut(&message.headline, HEADER_MAX, "")}}),
        json!({"type": "section", "text": {"type": "mrkdwn", "text": cut(
            &format!("*<{link}|{}>* {}", slack(&message.incident_id), slack(&message.title)),
            SECTION_MAX, &more)}}),
    ];
    let mut fallback = format!(
        "{}: {} {}\n",
        slack(&message.headline),
        slack(&message.incident_id),
        slack(&message.title)
    );
    for s in &message.sections {
        let lines: Vec<String> = s
            .lines
            .iter()
            .map(|l| {
                if s.lines.len() == 1 {
                    slack(l)
                } else {
                    format!("• {}", slack(l))
                }
            })
            .collect();
        let text = if s.label.is_empty() {
            lines.join("\n")
        } else {
            format!("*{}*\n{}", slack(&s.label), lines.join("\n"))
        };
        fallback.push_str(&text);
        fallback.push('\n');
        if blocks.len() == BLOCKS_MAX - 1 {
            continue;
        }
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn",
            "text": cut(&text, SECTION_MAX, &more)}}));
    }
    blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn",
        "text": format!("<{link}|Open {} in IncidentMind>", slack(&message.incident_id))}]}));
    let tail = format!("\n{}", message.link);
    let fallback = cut(fallback.trim_end(), FALLBACK_MAX - tail.chars().count(), "") + &tail;
    json!({
        "text": fallback,
        "blocks": blocks,
        "unfurl_links": false,
        "unfurl_media": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Section;

    #[test]
    fn every_block_and_the_fallback_stay_within_slacks_limits() {
        let m = Message {
            headline: "Incident opened".into(),
            incident_id: "INC-2026-0001".into(),
            title: "t".repeat(5000),
            link: "https://im.example/incidents/INC-2026-0001".into(),
            sections: (0..80)
                .map(|i| Section {
                    label: format!("S{i}"),
                    lines: vec!["x".repeat(4000), "y".into()],
                })
                .collect(),
        };
        let b = body(&m);
        let blocks = b["blocks"].as_array().unwrap();
        assert!(blocks.len() <= BLOCKS_MAX, "{}", blocks.len());
        for bl in blocks {
            if let Some(t) = bl["text"]["text"].as_str() {
                assert!(t.chars().count() <= SECTION_MAX, "{}", t.len());
            }
        }
        let text = b["text"].as_str().unwrap();
        assert!(text.chars().count() <= FALLBACK_MAX);
        assert!(text.ends_with(&m.link));
    }
}
