//! A Microsoft Teams Workflows webhook ("Post to a channel when a webhook request is received"):
//! a `message` whose one attachment is an Adaptive Card (schema 1.4): the headline, the incident
//! (a link), one text block per line, and an "Open" button. Teams takes messages up to about
//! 28 KB; the card's text is kept under [`TEXT_MAX`] characters.

use serde_json::{Value, json};

use super::Message;
use super::text::{cut, teams};

/// Most characters of one text block.
pub const LINE_MAX: usize = 2000;

/// Most characters of all the card's text together (Teams' message limit is about 28 KB).
pub const TEXT_MAX: usize = 16_000;

/// The webhook body for `message`.
pub fn body(message: &Message) -> Value {
    let mut blocks = vec![
        json!({"type": "TextBlock", "text": teams(&message.headline), "weight": "Bolder",
               "size": "Medium", "wrap": true}),
        json!({"type": "TextBlock", "wrap": true, "text": format!("[{}]({}) {}",
            message.incident_id, message.link, cut(&teams(&message.title), LINE_MAX, ""))}),
    ];
    let mut used = 0;
    'sections: for s in &message.sections {
        if !s.label.is_empty() {
            blocks.push(
                json!({"type": "TextBlock", "text": teams(&s.label), "weight": "Bolder",
                               "wrap": true, "spacing": "Medium"}),
            );
        }
        for l in &s.lines {
            let text = cut(&teams(l), LINE_MAX, "");
            used += text.chars().count();
            if used > TEXT_MAX {
                blocks.push(json!({"type": "TextBlock", "wrap": true,
                    "text": "… the rest is on the incident page"}));
                break 'sections;
            }
            let text = if s.lines.len() > 1 {
                format!("• {text}")
            } else {
                text
            };
            blocks.push(json!({"type": "TextBlock", "text": text, "wrap": true}));
        }
    }
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.4",
                "body": blocks,
                "actions": [{"type": "Action.OpenUrl",
                             "title": format!("Open {}", message.incident_id),
                             "url": message.link}],
            },
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Section;

    #[test]
    fn a_long_card_stays_under_teams_message_size() {
        let m = Message {
            headline: "Incident opened".into(),
            incident_id: "INC-2026-0001".into(),
            title: "<at>Everyone</at> [x](https://evil.example)".into(),
            link: "https://im.example/incidents/INC-2026-0001".into(),
            sections: vec![Section {
                label: "Known dead ends".into(),
                lines: vec!["z".repeat(3000); 30],
            }],
        };
        let b = body(&m);
        assert!(b.to_string().len() < 28_000, "{}", b.to_string().len());
        let first = b["attachments"][0]["content"]["body"][1]["text"]
            .as_str()
            .unwrap();
        assert!(
            !first.contains("<at>") && !first.contains("](https://evil"),
            "{first}"
        );
    }
}
