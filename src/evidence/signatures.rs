//! Failure-signature catalogue: regex patterns → stable failure-mode tags.
//!
//! The catalogue is DATA (`signatures.json`, embedded with `include_str!` and parsed once). Every
//! entry carries its own positive and negative examples, which the unit tests check. Patterns are
//! compiled case-insensitively into one `RegexSet`, so matching a text costs one pass whatever the
//! number of signatures. Log templates are matched once per template (template text plus one
//! example line), never per line.

use std::sync::LazyLock;

use regex::RegexSet;
use serde::{Deserialize, Serialize};

/// One catalogue entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    /// Stable snake_case failure-mode tag (a database key), e.g. `connection_pool_exhausted`.
    pub tag: String,
    /// One-sentence human description of the failure mode.
    pub description: String,
    /// Regex patterns (Rust `regex` syntax, applied case-insensitively).
    pub patterns: Vec<String>,
    /// Texts that must match this signature (checked by tests).
    #[serde(default)]
    pub positive: Vec<String>,
    /// Texts that must NOT match this signature (checked by tests).
    #[serde(default)]
    pub negative: Vec<String>,
    /// More sentences saying what this failure mode looks like, in general words (not checked
    /// against the patterns): with the description and the positive examples, the meaning a
    /// template no pattern tags is compared with (`memory::failure_modes`).
    #[serde(default)]
    pub meaning: Vec<String>,
}

/// Metric-name word lists (data, from `signatures.json` → `metric_roles`) used to recognise
/// request-rate series and pressure (pool wait / latency / in-use) series by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricRoles {
    /// Substrings marking a request-rate / throughput series, e.g. `http_requests_total`, `rps`.
    pub request_rate: Vec<String>,
    /// Substrings marking a pressure series, e.g. `pool`, `wait`, `latency`, `connections`.
    pub pressure: Vec<String>,
}

#[derive(Deserialize)]
struct CatalogueFile {
    metric_roles: MetricRoles,
    #[serde(default)]
    benign: Vec<String>,
    signatures: Vec<Signature>,
}

struct Compiled {
    roles: MetricRoles,
    benign: Vec<String>,
    sigs: Vec<Signature>,
    set: RegexSet,
    /// pattern index → signature index
    owner: Vec<usize>,
}

static CATALOGUE: LazyLock<Compiled> = LazyLock::new(|| {
    let file: CatalogueFile =
        serde_json::from_str(include_str!("signatures.json")).expect("signatures.json is valid");
    let mut pats = Vec::new();
    let mut owner = Vec::new();
    for (i, s) in file.signatures.iter().enumerate() {
        for p in &s.patterns {
            pats.push(format!("(?i){p}"));
            owner.push(i);
        }
    }
    // The lazy DFA of ~100 case-insensitive patterns outgrows the default cache on a page of
    // text and falls back to the much slower NFA (a recall query of 1 KB took ~3 ms instead of
    // ~0.3 ms): give it room.
    let set = regex::RegexSetBuilder::new(&pats)
        .dfa_size_limit(32 << 20)
        .build()
        .expect("signature patterns compile");
    Compiled {
        roles: file.metric_roles,
        benign: file.benign,
        sigs: file.signatures,
        set,
        owner,
    }
});

/// The whole catalogue (for tests and a UI legend), in file order.
pub fn catalogue() -> &'static [Signature] {
    &CATALOGUE.sigs
}

/// Metric-name word lists for request-rate and pressure series.
pub fn metric_roles() -> &'static MetricRoles {
    &CATALOGUE.roles
}

/// Lines that report no failure although they use failure words (a pool's size, a timeout
/// setting, a healthy probe), from `signatures.json` → `benign`: with every signature's negative
/// examples, what the meaning fallback (`memory::failure_modes`) must find closer than any
/// failure mode before it leaves a template alone.
pub fn benign_examples() -> &'static [String] {
    &CATALOGUE.benign
}

/// Human description of a failure-mode tag, `None` for an unknown tag.
pub fn failure_mode_description(tag: &str) -> Option<&'static str> {
    CATALOGUE
        .sigs
        .iter()
        .find(|s| s.tag == tag)
        .map(|s| s.description.as_str())
}

/// Tags of every signature matching `text`, in catalogue order, without duplicates.
pub fn match_tags(text: &str) -> Vec<&'static str> {
    let c = &*CATALOGUE;
    let mut hit = vec![false; c.sigs.len()];
    for m in c.set.matches(text).iter() {
        hit[c.owner[m]] = true;
    }
    c.sigs
        .iter()
        .zip(hit)
        .filter(|(_, h)| *h)
        .map(|(s, _)| s.tag.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_shape() {
        let cat = catalogue();
        assert!(cat.len() >= 25, "only {} signatures", cat.len());
        let mut tags: Vec<&str> = cat.iter().map(|s| s.tag.as_str()).collect();
        for t in &tags {
            assert!(
                t.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'),
                "tag {t} is not snake_case"
            );
        }
        tags.sort();
        let n = tags.len();
        tags.dedup();
        assert_eq!(tags.len(), n, "duplicate tags");
        for required in [
            "connection_pool_exhausted",
            "too_many_connections",
            "oom_killed",
            "disk_full",
            "file_descriptors_exhausted",
            "tls_certificate_expired",
            "dns_resolution_failure",
            "deadlock",
            "replication_lag",
            "rate_limited",
            "upstream_5xx",
            "timeout",
            "crash_loop_backoff",
            "gc_pressure",
            "consumer_lag",
            "deploy_change",
            "config_change",
            "connection_leak",
            "traffic_surge",
        ] {
            assert!(
                failure_mode_description(required).is_some(),
                "{required} missing"
            );
        }
        assert_eq!(failure_mode_description("nope"), None);
    }

    #[test]
    fn every_signature_has_and_passes_its_examples() {
        for s in catalogue() {
            assert!(
                !s.positive.is_empty() && !s.negative.is_empty(),
                "{} lacks examples",
                s.tag
            );
            for p in &s.positive {
                assert!(
                    match_tags(p).contains(&s.tag.as_str()),
                    "{}: positive not matched: {p}",
                    s.tag
                );
            }
            for n in &s.negative {
                assert!(
                    !match_tags(n).contains(&s.tag.as_str()),
                    "{}: negative matched: {n}",
                    s.tag
                );
            }
        }
    }

    #[test]
    fn hand_written_examples() {
        assert_eq!(
            match_tags(
                "FATAL: remaining connection slots are reserved for non-replication superuser connections"
            ),
            vec!["too_many_connections"]
        );
        let t = match_tags("Memory cgroup out of memory: Killed process 4242 (java)");
        assert!(t.contains(&"oom_killed"));
        assert!(match_tags("all good, 200 OK").is_empty());
        assert!(match_tags("pod/web-1 CrashLoopBackOff").contains(&"crash_loop_backoff"));
        assert!(match_tags("Seconds_Behind_Master: 900").contains(&"replication_lag"));
    }
}
