//! Minimal RFC 4180 CSV record splitting (quoted fields, `""` escapes). Records spanning several
//! lines (newline inside quotes) are handled by [`records`].

/// Split one CSV line into fields. A quoted field may contain commas and `""` (an escaped quote).
pub fn split_line(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut in_quotes = false;
    let mut chars = line.chars().peekable();
    let mut at_start = true;
    while let Some(c) = chars.next() {
        if in_quotes {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    field.push('"');
                    chars.next();
                } else {
                    in_quotes = false;
                }
            } else {
                field.push(c);
            }
        } else if c == '"' && at_start {
            in_quotes = true;
            at_start = false;
        } else if c == ',' {
            out.push(std::mem::take(&mut field));
            at_start = true;
        } else {
            field.push(c);
            at_start = false;
        }
    }
    out.push(field);
    out
}

/// Iterate CSV records over `text`, joining physical lines while a quote is open. Yields
/// (first line number (1-based), fields).
pub fn records(text: &str) -> Vec<(u64, Vec<String>)> {
    let mut out = Vec::new();
    let mut buf = String::new();
    let mut start = 0u64;
    for (i, line) in text.lines().enumerate() {
        if buf.is_empty() {
            start = i as u64 + 1;
            buf.push_str(line);
        } else {
            buf.push('\n');
            buf.push_str(line);
        }
        if buf.bytes().filter(|&c| c == b'"').count() % 2 == 0 {
            out.push((start, split_line(&buf)));
            buf.clear();
        }
    }
    if !buf.is_empty() {
        out.push((start, split_line(&buf)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields() {
        assert_eq!(
            split_line(r#"1,2015-07-29,"17:41:44,747",INFO,"say ""hi""",x"#),
            vec!["1", "2015-07-29", "17:41:44,747", "INFO", "say \"hi\"", "x"]
        );
        assert_eq!(split_line("a,,b"), vec!["a", "", "b"]);
        let r = records("h1,h2\n\"multi\nline\",2\n3,4\n");
        assert_eq!(r.len(), 3);
        assert_eq!(r[1], (2, vec!["multi\nline".to_string(), "2".to_string()]));
        assert_eq!(r[2].0, 4);
    }
}
