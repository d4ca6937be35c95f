//! Safe text for chat messages: what an alert or a person wrote (already redacted) must reach a
//! room as text, never as a mention, a link or markup. Each format has its own escaping; all of
//! them first [`defang`] what every renderer of the three would act on.
//!
//! Pure; the senders call these on every piece of text that is not ours.

/// U+2060 WORD JOINER: invisible, zero width, and not a letter, so a renderer no longer sees the
/// token it splits (`@room`, `](`) while a reader sees the same text.
const JOINER: char = '\u{2060}';

/// Text with mentions and Markdown links broken and control characters dropped (newlines and
/// tabs kept):
/// - `@` before a letter or digit gets a word joiner after it: `@room` (Matrix), `@channel`,
///   `@here`, `@all` (Slack-compatible servers that parse plain mentions, Mattermost), `@user`;
/// - `](` and `]:` (a Markdown link or link reference) get one between the two characters.
pub fn defang(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_control() && c != '\n' && c != '\t' {
            continue;
        }
        out.push(c);
        match (c, chars.peek()) {
            ('@', Some(n)) if n.is_alphanumeric() => out.push(JOINER),
            (']', Some('(' | ':')) => out.push(JOINER),
            _ => {}
        }
    }
    out
}

/// Slack `mrkdwn` and plain text: [`defang`], then `&`, `<` and `>` as Slack's three entities
/// (Slack, "Formatting text for app surfaces: Escaping text"), which turns `<!channel>`,
/// `<@U123>` and `<https://x|label>` into visible text.
pub fn slack(s: &str) -> String {
    defang(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// HTML text (Matrix `formatted_body`): [`defang`], then the five HTML-special characters as
/// entities, so no tag or attribute survives.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in defang(s).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Adaptive Card `TextBlock` text (its Markdown subset: emphasis, lists, `[label](url)`):
/// [`defang`], and a word joiner after every `<` (an `<at>` mention tag or an `<https://…>`
/// autolink is then text).
pub fn teams(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in defang(s).chars() {
        out.push(c);
        if c == '<' {
            out.push(JOINER);
        }
    }
    out
}

/// `s` cut to at most `max` characters (Unicode scalar values): when longer, its first
/// characters, then `…` and `tail` (what says where the rest is), all within `max`.
pub fn cut(s: &str, max: usize, tail: &str) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let room = max.saturating_sub(tail.chars().count() + 1);
    let mut out: String = s.chars().take(room).collect();
    out.push('…');
    out.push_str(tail);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "<!channel> @room <@U024BE7LH> <b>bold</b> [click](https://evil.example) \
                           <https://evil.example|your bank> & more";

    #[test]
    fn slack_text_keeps_no_mention_link_or_tag() {
        let s = slack(HOSTILE);
        assert!(!s.contains('<') && !s.contains('>'), "{s}");
        assert!(s.contains("&lt;!channel&gt;"), "{s}");
        assert!(
            !s.contains("@room") && !s.contains("](") && !s.contains("& more"),
            "{s}"
        );
        assert!(s.contains("&amp; more"), "{s}");
    }

    #[test]
    fn html_text_keeps_no_tag_and_no_room_mention() {
        let s = html(HOSTILE);
        assert!(
            !s.contains('<') && !s.contains("@room") && !s.contains("]("),
            "{s}"
        );
        assert!(s.contains("&lt;b&gt;bold&lt;/b&gt;"), "{s}");
    }

    #[test]
    fn teams_text_keeps_no_markdown_link_or_tag() {
        let s = teams("<at>Everyone</at> [x](https://evil.example) [y]: https://evil.example");
        assert!(
            !s.contains("<at") && !s.contains("](") && !s.contains("]:"),
            "{s}"
        );
    }

    #[test]
    fn control_characters_go_and_an_address_at_a_space_stays() {
        assert_eq!(defang("a\u{7}b\nc @ d"), "ab\nc @ d");
    }

    #[test]
    fn cut_stays_within_its_limit_and_says_where_the_rest_is() {
        assert_eq!(cut("short", 10, " (more)"), "short");
        let c = cut(&"x".repeat(100), 20, " (more)");
        assert_eq!(c.chars().count(), 20);
        assert!(c.ends_with("… (more)"), "{c}");
    }
}
