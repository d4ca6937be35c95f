//! The one rule for dotted quads (`a.b.c.d`): a version or a public address. It is decided by
//! shape first, then by the words before it, and then once per text and per incident:
//!
//! - **always kept** ([`Quad::Special`]): an octet above 255, more dotted parts, and private or
//!   special ranges (RFC 1918 10/8, 172.16/12, 192.168/16; loopback, link-local, CGNAT, 0/8,
//!   multicast and broadcast);
//! - **always an address** ([`Quad::Address`]): followed by `:port` or `/prefix`;
//! - **a version** ([`Quad::Version`]): joined to a name (`v2.14.0.1`, `app-2.14.0.1`,
//!   `pkg@2.14.0.1`); right after a version word (version, release, build, tag, upgraded to …);
//!   after a bare name (`svc-d 2.14.0.1`) that is not a word introducing an address, unless the
//!   incident already holds that quad as an address ([`Quad::Named`]); or, when
//!   its first three parts are each under 100, in a clause that speaks of a release (deploy,
//!   release, pin, upgrade, rollback, hotfix … earlier in the same clause: "after deploy of
//!   2.14.0.1", "Pin svc-d to 2.14.0.1") unless the word right before it introduces an address
//!   (host, client, peer, server …), or right after "back to" ("Back to 2.14.0.0");
//! - otherwise ([`Quad::Unsure`]) an address, unless the same quad is a version elsewhere in the
//!   same text, or was decided a version earlier in the same incident (the redactor remembers:
//!   [`super::Redactor`]) or in another text of the same write (a post-mortem's fields, Learn's
//!   records: [`super::Redactor::decide_versions`]).

use regex::Captures;

use super::spans::window_before;

/// Weak words after which a dotted quad is an address, not a version, outside a release clause
/// (from, to, of, at …); with [`STRONG_ADDRESS_WORDS`] the words that introduce an address.
const WEAK_ADDRESS_WORDS: &[&str] = &[
    "from", "to", "via", "at", "by", "for", "on", "in", "of", "and", "or", "is", "was", "with",
    "target", "timeout", "new", "the", "a", "an",
];

/// Words after which a dotted quad is a version.
const VERSION_WORDS: &[&str] = &[
    "version",
    "ver",
    "release",
    "build",
    "rev",
    "revision",
    "tag",
    "firmware",
    "bios",
    "upgraded to",
    "updated to",
    "downgraded to",
    "rolled back to",
    "bumped to",
];

/// Words that, right before a quad, make it an address even in a clause about a release.
const STRONG_ADDRESS_WORDS: &[&str] = &[
    "client",
    "clients",
    "host",
    "hostname",
    "server",
    "peer",
    "remote",
    "addr",
    "address",
    "ip",
    "ipv4",
    "src",
    "source",
    "dst",
    "dest",
    "destination",
    "resolver",
    "dns",
    "nameserver",
    "gateway",
    "gw",
    "proxy",
    "upstream",
    "downstream",
    "connect",
    "user",
    "node",
    "endpoint",
    "origin",
    "forwarded",
    "bind",
    "sender",
    "relay",
    "route",
    "inet",
    "nexthop",
    "neighbor",
    "lookup",
    "ping",
    "unreachable",
    "ips",
    "address:",
    "hosts",
    "nodes",
    "peers",
    "servers",
    "ssh",
    "tcp",
    "udp",
    "http",
    "https",
    "listen",
    "socket",
    "vip",
    "lb",
    "ingress",
    "egress",
    "x-forwarded-for",
    "x-real-ip",
    "refused",
    "connecting",
    "connected",
    "resolved",
    "blocked",
];

/// Whether `word` (lower case) introduces an address: a weak or a strong address word.
fn introduces_address(word: &str) -> bool {
    WEAK_ADDRESS_WORDS.contains(&word) || STRONG_ADDRESS_WORDS.contains(&word)
}

/// Words that make a clause speak of a release: a quad after them in the same clause is a
/// version (see [`judge`]).
const RELEASE_WORDS: &[&str] = &[
    "deploy",
    "deploys",
    "deployed",
    "deploying",
    "deployment",
    "redeploy",
    "redeployed",
    "release",
    "released",
    "releases",
    "releasing",
    "version",
    "versions",
    "pin",
    "pins",
    "pinned",
    "pinning",
    "upgrade",
    "upgraded",
    "upgrading",
    "downgrade",
    "downgraded",
    "rollback",
    "roll",
    "rolled",
    "rolling",
    "revert",
    "reverted",
    "bump",
    "bumped",
    "hotfix",
    "patch",
    "patched",
    "build",
    "tag",
    "image",
    "firmware",
    "changelog",
    "canary",
];

/// What one occurrence of a dotted quad is, by its shape and the words before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quad {
    /// Not a public address by shape (see the module docs): always kept.
    Special,
    /// A public address by shape (`:port`, `/prefix`): always masked.
    Address,
    /// A version by its context: kept.
    Version,
    /// After a bare name (`svc-d 2.14.0.1`): a version, unless the incident already decided
    /// this quad is an address.
    Named,
    /// No sign of a version: masked unless decided a version elsewhere.
    Unsure,
}

/// The parts of a matched quad, or `None` when one is above 255.
fn octets(c: &Captures) -> Option<[u32; 4]> {
    let mut o = [0u32; 4];
    for (i, x) in o.iter_mut().enumerate() {
        match c[i + 1].parse::<u32>() {
            Ok(v) if v <= 255 => *x = v,
            _ => return None,
        }
    }
    Some(o)
}

/// Judges the quad matched at `start..end` of `text` (`c`: its four parts as groups 1–4).
pub fn judge(text: &str, start: usize, end: usize, c: &Captures) -> Quad {
    let Some(o) = octets(c) else {
        return Quad::Special;
    };
    let [a, b2, c3, _] = o;
    if a == 10
        || a == 127
        || a == 0
        || (a == 172 && (16..=31).contains(&b2))
        || (a == 192 && b2 == 168)
        || (a == 169 && b2 == 254)
        || (a == 100 && (64..=127).contains(&b2))
        || a >= 224
    {
        return Quad::Special;
    }
    let b = text.as_bytes();
    if end + 1 < b.len() && b[end] == b'.' && b[end + 1].is_ascii_digit() {
        return Quad::Special;
    }
    if start >= 2 && b[start - 1] == b'.' && b[start - 2].is_ascii_digit() {
        return Quad::Special;
    }
    if end + 1 < b.len() && matches!(b[end], b':' | b'/') && b[end + 1].is_ascii_digit() {
        return Quad::Address;
    }
    if start >= 1
        && (b[start - 1].is_ascii_alphabetic() || matches!(b[start - 1], b'-' | b'_' | b'@'))
    {
        return Quad::Version;
    }
    let before = window_before(text, start, 64);
    let trimmed = before.trim_end_matches([' ', '=', ':', '"', '\'']);
    let lower = trimmed.to_ascii_lowercase();
    for w in VERSION_WORDS {
        if let Some(head) = lower.strip_suffix(w)
            && !head.ends_with(|c: char| c.is_ascii_alphanumeric())
        {
            return Quad::Version;
        }
    }
    let last = lower
        .rsplit(|ch: char| ch.is_whitespace() || matches!(ch, '(' | '[' | '{' | ',' | ';' | '"'))
        .next()
        .unwrap_or("");
    if small_parts(a, b2, c3)
        && ((!STRONG_ADDRESS_WORDS.contains(&last) && release_clause(&lower)) || back_to(&lower))
    {
        return Quad::Version;
    }
    if bare_name_before(before) {
        return Quad::Named;
    }
    Quad::Unsure
}

/// Whether the first three parts are each under 100, as a version's are (`2.14.0.1`), unlike
/// many public addresses (`52.14.201.77`).
pub fn small_parts(a: u32, b: u32, c: u32) -> bool {
    a < 100 && b < 100 && c < 100
}

/// Whether the clause that ends `lower` (back to the last `.`, `;`, `:`, `!`, `?`, `|` or line
/// break) holds a release word.
fn release_clause(lower: &str) -> bool {
    let clause = lower
        .rsplit(['.', ';', ':', '!', '?', '|', '\n'])
        .next()
        .unwrap_or(lower);
    clause
        .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '-' || ch == '_'))
        .any(|w| RELEASE_WORDS.contains(&w))
}

/// Whether `lower` ends in "back to" as a word ("Back to 2.14.0.0", "went back to"): a return
/// to an earlier release (with small parts only, see [`judge`]).
fn back_to(lower: &str) -> bool {
    lower
        .strip_suffix("back to")
        .is_some_and(|head| !head.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

/// A bare name directly before (one space): `svc-d 2.14.0.1` is svc-d's version.
fn bare_name_before(before: &str) -> bool {
    let Some(gap) = before.strip_suffix(' ') else {
        return false;
    };
    if gap.ends_with(' ') {
        return false;
    }
    let word = gap
        .rsplit(|ch: char| ch.is_whitespace() || matches!(ch, '(' | '[' | '{' | ',' | ';' | '"'))
        .next()
        .unwrap_or("");
    let lw = word.to_ascii_lowercase();
    !word.is_empty()
        && word.bytes().any(|ch| ch.is_ascii_alphabetic())
        && word
            .bytes()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, b'-' | b'_' | b'.' | b'/'))
        && !introduces_address(&lw)
        && !lw.ends_with("ed")
        && !lw.ends_with("ing")
}

/// `true` keeps the quad at `start..end` when judged alone (a version or a private/special
/// address), `false` masks it: [`judge`] without what the text and the incident decided
/// elsewhere.
pub fn is_version_or_private(text: &str, start: usize, end: usize, c: &Captures) -> bool {
    matches!(
        judge(text, start, end, c),
        Quad::Special | Quad::Version | Quad::Named
    )
}
