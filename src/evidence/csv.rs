//! CSV records of pasted evidence, read with the `csv` crate (RFC 4180: quoted fields, `""`
//! escapes, newlines inside quotes), leniently: rows may have any number of fields and blank
//! lines are skipped, since a paste is rarely a clean file.

/// The CSV records of `text`, each with the line it starts on (1-based) and its fields. A record
/// the reader cannot read (an unclosed quote at the very end, say) ends the list there.
pub fn records(text: &str) -> Vec<(u64, Vec<String>)> {
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut out = Vec::new();
    for record in reader.records() {
        let Ok(record) = record else { break };
        let line = record.position().map_or(0, ::csv::Position::line);
        out.push((line, record.iter().map(str::to_string).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_escaped_quotes_and_records_over_several_lines() {
        let r = records("1,2015-07-29,\"17:41:44,747\",INFO,\"say \"\"hi\"\"\",x\na,,b\n");
        assert_eq!(
            r[0].1,
            vec!["1", "2015-07-29", "17:41:44,747", "INFO", "say \"hi\"", "x"]
        );
        assert_eq!(r[1], (2, vec!["a".into(), String::new(), "b".into()]));
        let r = records("h1,h2\n\"multi\nline\",2\n3,4\n");
        assert_eq!(r.len(), 3);
        assert_eq!(r[1], (2, vec!["multi\nline".to_string(), "2".to_string()]));
        assert_eq!(r[2].0, 4);
    }
}
