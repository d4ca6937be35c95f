//! Secret-bearing structures found by their shape (Kubernetes Secrets, `.env` files), random
//! runs, and the bounded context windows the passes look at.

use super::is_placeholder;
use super::patterns::P;

/// The first `\n` at or after `from`.
pub(super) fn memchr_nl(b: &[u8], from: usize) -> Option<usize> {
    b[from..].iter().position(|&c| c == b'\n').map(|p| from + p)
}

/// Value spans of `data`/`stringData` maps written as JSON (also escaped inside a JSON string).
pub(super) fn k8s_json_spans(text: &str, spans: &mut Vec<(usize, usize)>) {
    for map in P.k8s_json_map.captures_iter(text) {
        let body = map.get(1).expect("group");
        for v in P.k8s_json_value.captures_iter(body.as_str()) {
            let g = v.get(1).expect("group");
            if !g.as_str().is_empty() {
                spans.push((body.start() + g.start(), body.start() + g.end()));
            }
        }
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t', '-']).len()
}

/// Value spans of `data:`/`stringData:` blocks in YAML (block scalars included).
pub(super) fn yaml_data_spans(text: &str, spans: &mut Vec<(usize, usize)>) {
    let mut offset = 0;
    // (indent of the map's key, indent of a block scalar being read)
    let mut in_map: Option<usize> = None;
    let mut scalar: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        if body.trim().is_empty() {
            continue;
        }
        let indent = indent_of(body);
        if let Some(base) = in_map {
            if indent > base {
                if let Some(si) = scalar
                    && indent >= si
                {
                    let trimmed = body.trim();
                    let s = start + body.find(trimmed).unwrap_or(0);
                    spans.push((s, s + trimmed.len()));
                    continue;
                }
                scalar = None;
                if let Some(c) = P.yaml_entry.captures(body) {
                    let g = c.get(1).expect("group");
                    let v = g.as_str();
                    if v.starts_with('|') || v.starts_with('>') {
                        scalar = Some(indent + 1);
                    } else if !v.is_empty() {
                        let v2 = v.trim_matches(['"', '\'']);
                        let inner = g.start() + v.find(v2).unwrap_or(0);
                        if !v2.is_empty() {
                            spans.push((start + inner, start + inner + v2.len()));
                        }
                    }
                }
                continue;
            }
            in_map = None;
            scalar = None;
        }
        if let Some(c) = P.yaml_map_head.captures(body) {
            in_map = Some(c[1].len());
        }
    }
}

/// A value of a `.env` line that is plainly not a secret.
fn harmless_env_value(v: &str) -> bool {
    let v = v.trim_matches(['"', '\'']);
    v.is_empty()
        || is_placeholder(v)
        || v.contains("://") // URLs: their passwords go through the URL rule
        || matches!(
            v.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "none"
        )
        || v.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        || (v.len() <= 24
            && v.bytes().all(|b| b.is_ascii_lowercase() || matches!(b, b'-' | b'_' | b'.')))
}

/// Value spans of `.env` blocks: runs of two or more `NAME=value` lines (comments and blank lines
/// inside a run are allowed).
pub(super) fn env_spans(text: &str, spans: &mut Vec<(usize, usize)>) {
    let mut run: Vec<(usize, usize)> = Vec::new();
    let mut lines_in_run = 0;
    let flush = |run: &mut Vec<(usize, usize)>, n: &mut usize, spans: &mut Vec<(usize, usize)>| {
        if *n >= 2 {
            spans.append(run);
        }
        run.clear();
        *n = 0;
    };
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let first = line.as_bytes().first().copied().unwrap_or(b'\n');
        if first == b'#' || line.trim().is_empty() {
            continue;
        }
        if !(first.is_ascii_uppercase() || first == b'e') {
            flush(&mut run, &mut lines_in_run, spans);
            continue;
        }
        match P.env_line.captures(line.trim_end_matches('\n')) {
            Some(c) => {
                lines_in_run += 1;
                let g = c.get(1).expect("group");
                let v = g.as_str();
                if !harmless_env_value(v) {
                    let inner = v.trim_matches(['"', '\'']);
                    let s = start + g.start() + v.find(inner).unwrap_or(0);
                    run.push((s, s + inner.len()));
                }
            }
            None => flush(&mut run, &mut lines_in_run, spans),
        }
    }
    flush(&mut run, &mut lines_in_run, spans);
}

/// A run that reads as random: letters and digits, and Shannon entropy ≥ 3 bits per character.
pub(super) fn looks_random(run: &str) -> bool {
    let b = run.trim_end_matches('=').as_bytes();
    if b.len() < 16 || !b.iter().any(u8::is_ascii_digit) || !b.iter().any(u8::is_ascii_alphabetic) {
        return false;
    }
    let mut counts = [0u32; 256];
    for &c in b {
        counts[c as usize] += 1;
    }
    let n = b.len() as f64;
    let h: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum();
    h >= 3.0
}

/// At most `n` bytes of `text` before `at`, cut at a character boundary.
pub(super) fn window_before(text: &str, at: usize, n: usize) -> &str {
    &text[text.ceil_char_boundary(at.saturating_sub(n))..at]
}

/// A secret-ish word within 40 bytes before `at`, on the same line.
pub(super) fn secret_word_before(text: &str, at: usize) -> bool {
    let w = window_before(text, at, 40);
    let w = w.rsplit('\n').next().unwrap_or(w).to_ascii_lowercase();
    [
        "secret",
        "token",
        "key",
        "passw",
        "pwd",
        "session",
        "cookie",
        "credential",
        "auth",
        "signature",
    ]
    .iter()
    .any(|k| w.contains(k))
}
