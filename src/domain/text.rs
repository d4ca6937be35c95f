//! Text rules shared by the domain types: a leaf, it uses nothing of theirs.

/// Line endings as `\n`: browsers send textareas with CRLF (HTML's form submission normalises
/// newlines to CRLF), some tools send a lone `\r`.
pub fn unix_newlines(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}
