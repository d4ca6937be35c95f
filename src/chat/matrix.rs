//! A Matrix room through the client-server API (spec v1.x, "Sending events to a room"):
//! `PUT /_matrix/client/v3/rooms/{roomId}/send/m.room.message/{txnId}` with the access token as a
//! bearer. The body is an `m.text` message with a plain `body` and an HTML `formatted_body`
//! (`format: org.matrix.custom.html`); `m.mentions: {}` says it mentions nobody (spec v1.7
//! intentional mentions: the legacy `@room` and display-name push rules do not apply to it).
//! A later message about the same incident is a thread reply (`m.relates_to` with
//! `rel_type: m.thread`, spec v1.4) under the first. The transaction id makes a retry
//! idempotent: the homeserver answers a repeated one with the event it already sent.

use serde_json::{Value, json};

use super::text::{cut, defang, html};
use super::{Message, SendError, Sent, answer};

/// Most characters of the plain `body` and of the `formatted_body` (an event is at most 64 KiB
/// of JSON, spec "Size limits"; HTML entities and JSON escapes at most triple the text, so
/// 16,000 characters of each stay well inside).
pub const TEXT_MAX: usize = 16_000;

/// The `m.room.message` content of `message`, threaded under `thread_root` when given.
pub fn body(message: &Message, thread_root: Option<&str>) -> Value {
    let more = format!(" (more on {})", message.link);
    let mut plain = format!(
        "{}: {} {}\n",
        message.headline,
        message.incident_id,
        defang(&message.title)
    );
    let mut formatted = format!(
        "<p><strong>{}</strong>: <a href=\"{}\">{}</a> {}</p>",
        html(&message.headline),
        html(&message.link),
        html(&message.incident_id),
        html(&message.title)
    );
    for s in &message.sections {
        if !s.label.is_empty() {
            plain.push_str(&s.label);
            plain.push('\n');
        }
        let one = s.lines.len() == 1;
        for l in &s.lines {
            plain.push_str(if one { "" } else { "- " });
            plain.push_str(&defang(l));
            plain.push('\n');
        }
        let label = if s.label.is_empty() {
            String::new()
        } else {
            format!("<strong>{}</strong>", html(&s.label))
        };
        if one {
            formatted.push_str(&format!("<p>{label}<br>{}</p>", html(&s.lines[0])));
        } else if !s.lines.is_empty() {
            let items: String = s
                .lines
                .iter()
                .map(|l| format!("<li>{}</li>", html(l)))
                .collect();
            formatted.push_str(&format!("<p>{label}</p><ul>{items}</ul>"));
        }
    }
    plain.push_str(&message.link);
    let mut content = json!({
        "msgtype": "m.text",
        "body": cut(&plain, TEXT_MAX, &more),
        "format": "org.matrix.custom.html",
        "formatted_body": cut_html(&formatted, &message.link),
        "m.mentions": {},
    });
    if let Some(root) = thread_root {
        content["m.relates_to"] = json!({
            "rel_type": "m.thread",
            "event_id": root,
            // Clients without threads show it as a reply to the root.
            "is_falling_back": true,
            "m.in_reply_to": {"event_id": root},
        });
    }
    content
}

/// `formatted` within [`TEXT_MAX`] characters: when longer, the whole paragraphs that fit, then
/// a link to the incident (never a cut inside a tag or an entity).
fn cut_html(formatted: &str, link: &str) -> String {
    if formatted.chars().count() <= TEXT_MAX {
        return formatted.to_string();
    }
    let tail = format!(
        "<p>… <a href=\"{}\">the rest is on the incident page</a></p>",
        html(link)
    );
    let budget = TEXT_MAX - tail.chars().count();
    let mut out = String::new();
    for part in formatted.split_inclusive("</p>") {
        if out.chars().count() + part.chars().count() > budget {
            break;
        }
        out.push_str(part);
    }
    out.push_str(&tail);
    out
}

/// `PUT`s `content` as an `m.room.message` into `room_id` with transaction id `txn_id`.
///
/// # Errors
/// [`SendError::Refused`] for 4xx but 429 (`M_FORBIDDEN`: the token may not post to the room;
/// `M_UNKNOWN_TOKEN`; a room that does not exist), [`SendError::Transient`] otherwise.
pub async fn send(
    client: &reqwest::Client,
    homeserver: &str,
    room_id: &str,
    access_token: &str,
    txn_id: &str,
    content: &Value,
) -> Result<Sent, SendError> {
    let url = format!(
        "{}/_matrix/client/v3/rooms/{}/send/m.room.message/{}",
        homeserver.trim_end_matches('/'),
        urlencoding(room_id),
        urlencoding(txn_id)
    );
    let res = client
        .put(url)
        .bearer_auth(access_token)
        .json(content)
        .send()
        .await;
    answer(res, |text| {
        serde_json::from_str::<Value>(text)
            .ok()?
            .get("event_id")?
            .as_str()
            .map(str::to_string)
    })
    .await
}

/// `s` as one path segment (RFC 3986 unreserved characters kept, everything else
/// percent-encoded): a room id holds `!` and `:`.
fn urlencoding(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::Section;

    fn hostile() -> Message {
        Message {
            headline: "Incident opened".into(),
            incident_id: "INC-2026-0002".into(),
            title: "@room <img src=x onerror=alert(1)> [login](https://evil.example)".into(),
            link: "https://im.example/incidents/INC-2026-0002".into(),
            sections: vec![Section {
                label: "Known dead ends".into(),
                lines: vec![
                    "<a href=\"https://evil.example\">x</a>".into(),
                    "two".into(),
                ],
            }],
        }
    }

    #[test]
    fn hostile_text_is_escaped_and_mentions_nobody() {
        let b = body(&hostile(), None);
        let f = b["formatted_body"].as_str().unwrap();
        let plain = b["body"].as_str().unwrap();
        assert!(!f.contains("<img") && !f.contains("evil.example\">"), "{f}");
        assert!(!f.contains("@room") && !plain.contains("@room"), "{f}");
        assert!(!plain.contains("]("), "{plain}");
        assert_eq!(b["m.mentions"], json!({}));
        assert!(
            f.contains("<a href=\"https://im.example/incidents/INC-2026-0002\">"),
            "{f}"
        );
    }

    #[test]
    fn a_later_message_is_a_thread_reply_under_the_root() {
        let b = body(&hostile(), Some("$root:hs"));
        assert_eq!(b["m.relates_to"]["rel_type"], "m.thread");
        assert_eq!(b["m.relates_to"]["event_id"], "$root:hs");
    }

    #[test]
    fn a_long_message_is_cut_with_a_link_to_the_rest() {
        let mut m = hostile();
        m.sections[0].lines = vec!["y".repeat(1000); 40];
        let b = body(&m, None);
        let f = b["formatted_body"].as_str().unwrap();
        assert!(
            f.chars().count() <= TEXT_MAX && f.ends_with("incident page</a></p>"),
            "{}",
            f.len()
        );
        let p = b["body"].as_str().unwrap();
        assert!(p.chars().count() <= TEXT_MAX && p.ends_with("INC-2026-0002)"));
    }

    #[test]
    fn room_ids_are_one_path_segment() {
        assert_eq!(urlencoding("!abc:example.org"), "%21abc%3Aexample.org");
    }
}
