//! Text rules shared by the domain types: a leaf, it uses nothing of theirs.

/// Line endings as `\n`: browsers send textareas with CRLF (HTML's form submission normalises
/// newlines to CRLF), some tools send a lone `\r`.
pub fn unix_newlines(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}

/// The sentences of `s`, trimmed, without empty ones: a sentence ends at `.`, `!` or `?` followed
/// by white space or the end of the text, or at a line break. A dot inside a token — a version
/// (`2.14.1`), a decimal (`0.25`), a host (`db-3.internal`), a path (`/etc/app.yaml`) — does not
/// end one. The terminator stays with its sentence, except a final `.`, which is dropped.
pub fn sentences(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|(_, n)| *n);
        let ends =
            c == '\n' || (matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace));
        if ends {
            out.push(&s[start..i + c.len_utf8()]);
            start = i + c.len_utf8();
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(|p| p.trim().trim_end_matches('.').trim_end())
        .filter(|p| !p.is_empty())
        .collect()
}

/// `s` cut to at most `max` characters where a sentence ends (as in [`sentences`]): the whole
/// sentences that fit. When not even the first fits, its words that fit followed by `…`; a word
/// is never cut unless it alone is longer than `max`. Issue #49: a rationale is not cut
/// mid-sentence without a mark.
pub fn clip_sentences(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut last_end = None;
    let mut last_space = None;
    let mut chars = s.char_indices().enumerate().peekable();
    while let Some((n, (i, c))) = chars.next() {
        if n >= max {
            break;
        }
        let next = chars.peek().map(|(_, (_, c))| *c);
        if c == '\n' {
            last_end = Some(i);
        } else if matches!(c, '.' | '!' | '?') && next.is_none_or(char::is_whitespace) {
            last_end = Some(i + c.len_utf8());
        }
        if c.is_whitespace() {
            last_space = Some(i);
        }
    }
    if let Some(end) = last_end.filter(|e| *e > 0) {
        return s[..end].trim_end().to_string();
    }
    let room = max.saturating_sub(1);
    let cut = last_space
        .filter(|i| s[..*i].chars().count() <= room)
        .unwrap_or_else(|| s.char_indices().nth(room).map_or(s.len(), |(i, _)| i));
    format!("{}…", s[..cut].trim_end().trim_end_matches([',', ';', ':']))
}

#[cfg(test)]
mod tests {
    use super::{clip_sentences, sentences};

    #[test]
    fn a_clipped_text_ends_at_a_sentence_or_says_it_was_cut() {
        let s = "The pool filled in minutes. Raising it again did nothing. Third one here.";
        assert_eq!(clip_sentences(s, 200), s);
        assert_eq!(
            clip_sentences(s, 60),
            "The pool filled in minutes. Raising it again did nothing."
        );
        assert_eq!(clip_sentences(s, 30), "The pool filled in minutes.");
        assert_eq!(clip_sentences(s, 20), "The pool filled in…");
        assert_eq!(
            clip_sentences("Release 2.14.1 leaked one connection per retry", 20),
            "Release 2.14.1…"
        );
        assert_eq!(clip_sentences("abcdefghij", 5), "abcd…");
    }

    #[test]
    fn sentences_keep_versions_decimals_hosts_and_paths_whole() {
        assert_eq!(
            sentences(
                "The 2.14.1 config set a 0.25 s timeout. Reads went to db-3.internal!\nSee /etc/app.yaml."
            ),
            [
                "The 2.14.1 config set a 0.25 s timeout",
                "Reads went to db-3.internal!",
                "See /etc/app.yaml",
            ]
        );
        assert_eq!(sentences("  \n. "), Vec::<&str>::new());
        assert_eq!(
            sentences("one sentence without an end"),
            ["one sentence without an end"]
        );
    }
}
