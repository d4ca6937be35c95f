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

#[cfg(test)]
mod tests {
    use super::sentences;

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
