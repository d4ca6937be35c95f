//! Redaction of secrets and personal data before text is stored or sent to a model
//! (DESIGN.md §3: "emails, tokens, keys, passwords in URLs; addresses replaced by stable
//! placeholders so relations survive").
//!
//! A [`Redactor`] holds the per-incident mapping secret → placeholder so the same secret always
//! gets the same placeholder (`<email-1>`, `<ip-ext-2>`, ...). The mapping is keyed by a 128-bit
//! fingerprint of the secret (two salted FNV-1a-64 hashes), never the secret itself, so persisting
//! it (serde) does not persist secrets. The fingerprint is not cryptographic: give each incident a
//! random salt ([`Redactor::with_salt`]) so low-entropy secrets cannot be confirmed by guessing
//! across incidents.
//!
//! What is replaced (in this order):
//! 1. PEM private-key blocks → `<private-key-N>`;
//! 2. passwords in URLs `scheme://user:PASS@host` → `scheme://user:<password-N>@host`;
//! 3. JWTs `eyJ….eyJ….sig` → `<jwt-N>`;
//! 4. `Authorization: Bearer x` / `Basic x` credentials → `<token-N>`;
//! 5. well-known token shapes → `<token-N>`: OpenAI/Stripe `sk-…`/`sk_live_…`, GitHub `ghp_…`
//!    `gho_…` `ghs_…` `ghu_…` `ghr_…` `github_pat_…`, Slack `xoxb-…`/`xoxp-…`, GitLab `glpat-…`,
//!    Google API keys `AIza…`, Google OAuth `ya29.…`, npm `npm_…`, SendGrid `SG.….…`; AWS access key
//!    ids (`AKIA…`, `ASIA…`) → `<aws-key-N>`; Azure SAS `sig=` values → `<secret-N>`;
//! 6. `key=value`, `key: value` and JSON `"key": "value"` where the key contains password, passwd,
//!    pwd, secret, token, api_key/apikey/api-key, access_key, private_key, client_secret,
//!    accountkey, credential(s), or ends in `auth` → value replaced by `<secret-N>`;
//! 7. e-mail addresses → `<email-N>`;
//! 8. public IPv4 addresses → `<ip-ext-N>`. Kept as they are: RFC 1918 (10/8, 172.16/12,
//!    192.168/16), loopback 127/8, link-local 169.254/16, CGNAT 100.64/10, 0.0.0.0, multicast and
//!    broadcast, and anything that looks like a version: an octet > 255, more dotted parts before
//!    or after (`1.2.3.4.5`), or preceded by `v`, a letter/`-`/`_`/`@` joined to it, or the words
//!    version/ver/release/build/rev/tag/firmware or `upgraded|updated|downgraded|rolled back to`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};

struct Patterns {
    pem: Regex,
    url_pass: Regex,
    jwt: Regex,
    auth_header: Regex,
    tokens: Regex,
    aws_key: Regex,
    sas_sig: Regex,
    json_secret: Regex,
    kv_secret: Regex,
    email: Regex,
    ipv4: Regex,
}

const SECRET_KEY: &str = r"[A-Za-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|client[_\-]?secret|accountkey|credentials?)[A-Za-z0-9_.\-]*|[A-Za-z0-9_.\-]*auth";

static P: LazyLock<Patterns> = LazyLock::new(|| {
    Patterns {
    pem: Regex::new(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----").expect("pem"),
    url_pass: Regex::new(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^:/@\s]+):([^\s/]+)@").expect("url"),
    jwt: Regex::new(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*").expect("jwt"),
    auth_header: Regex::new(r"(?i)\b(bearer\s+|authorization:\s*basic\s+)([A-Za-z0-9\-._~+/]{8,}=*)").expect("auth"),
    tokens: Regex::new(concat!(
        r"\b(?:sk-(?:proj-|live-|test-|ant-)?[A-Za-z0-9_\-]{16,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
        r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abposr]-[A-Za-z0-9\-]{10,}",
        r"|glpat-[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{35}|ya29\.[0-9A-Za-z_\-]{20,}|npm_[A-Za-z0-9]{36}",
        r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,})"
    ))
    .expect("tokens"),
    aws_key: Regex::new(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b").expect("aws"),
    sas_sig: Regex::new(r"([?&]sig=)([A-Za-z0-9%+/=]{16,})").expect("sas"),
    json_secret: Regex::new(&format!(r#"(?i)("(?:{SECRET_KEY})"\s*:\s*")((?:[^"\\]|\\.)+)(")"#)).expect("json"),
    kv_secret: Regex::new(&format!(r#"(?i)\b({SECRET_KEY})(\s*[=:]\s*)(['"]?)([^\s'",;&}}<\]]+)"#)).expect("kv"),
    email: Regex::new(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}\b").expect("email"),
    ipv4: Regex::new(r"\b(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\b").expect("ipv4"),
}
});

/// Per-incident redaction state: a stable mapping from secret fingerprints to placeholders.
/// Serialize it to persist the mapping with the incident.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redactor {
    /// Salt mixed into fingerprints (set a random per-incident value with [`Redactor::with_salt`]).
    #[serde(default)]
    salt: String,
    /// fingerprint (32 hex chars) → placeholder, e.g. `<email-1>`.
    #[serde(default)]
    map: BTreeMap<String, String>,
    /// kind → last number used.
    #[serde(default)]
    counters: BTreeMap<String, u32>,
}

fn fnv1a(seed: u64, parts: &[&[u8]]) -> u64 {
    let mut h = seed;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Redactor {
    /// Empty mapping, no salt.
    pub fn new() -> Self {
        Self::default()
    }

    /// Empty mapping with a salt (e.g. a random per-incident string).
    pub fn with_salt(salt: impl Into<String>) -> Self {
        Redactor {
            salt: salt.into(),
            ..Self::default()
        }
    }

    /// Number of distinct secrets replaced so far.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing was replaced yet.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Placeholder for `secret` of `kind` (`email`, `jwt`, `token`, `password`, `secret`,
    /// `aws-key`, `private-key`, `ip-ext`), allocating `<kind-N>` on first sight.
    pub fn placeholder(&mut self, kind: &str, secret: &str) -> String {
        let parts: [&[u8]; 3] = [self.salt.as_bytes(), kind.as_bytes(), secret.as_bytes()];
        let fp = format!(
            "{:016x}{:016x}",
            fnv1a(0xcbf2_9ce4_8422_2325, &parts),
            fnv1a(0x6c62_272e_07bb_0142, &parts)
        );
        if let Some(p) = self.map.get(&fp) {
            return p.clone();
        }
        let n = self.counters.entry(kind.to_string()).or_insert(0);
        *n += 1;
        let p = format!("<{kind}-{n}>");
        self.map.insert(fp, p.clone());
        p
    }

    /// Redact `text` (see the module docs for what is replaced). Idempotent: placeholders are not
    /// redacted again.
    pub fn redact(&mut self, text: &str) -> String {
        let p = &*P;
        let s = p
            .pem
            .replace_all(text, |c: &Captures| self.placeholder("private-key", &c[0]));
        let s = p.url_pass.replace_all(&s, |c: &Captures| {
            if c[3].starts_with('<') && c[3].ends_with('>') {
                return c[0].to_string();
            }
            format!(
                "{}{}:{}@",
                &c[1],
                &c[2],
                self.placeholder("password", &c[3])
            )
        });
        let s = p
            .jwt
            .replace_all(&s, |c: &Captures| self.placeholder("jwt", &c[0]));
        let s = p.auth_header.replace_all(&s, |c: &Captures| {
            format!("{}{}", &c[1], self.placeholder("token", &c[2]))
        });
        let s = p
            .tokens
            .replace_all(&s, |c: &Captures| self.placeholder("token", &c[0]));
        let s = p
            .aws_key
            .replace_all(&s, |c: &Captures| self.placeholder("aws-key", &c[0]));
        let s = p.sas_sig.replace_all(&s, |c: &Captures| {
            format!("{}{}", &c[1], self.placeholder("secret", &c[2]))
        });
        let s = p.json_secret.replace_all(&s, |c: &Captures| {
            if c[2].starts_with('<') && c[2].ends_with('>') {
                c[0].to_string()
            } else {
                format!("{}{}{}", &c[1], self.placeholder("secret", &c[2]), &c[3])
            }
        });
        let s = p.kv_secret.replace_all(&s, |c: &Captures| {
            format!(
                "{}{}{}{}",
                &c[1],
                &c[2],
                &c[3],
                self.placeholder("secret", &c[4])
            )
        });
        let s = p
            .email
            .replace_all(&s, |c: &Captures| self.placeholder("email", &c[0]));
        let s = p.ipv4.replace_all(&s, |c: &Captures| {
            let m = c.get(0).expect("match");
            if keep_ipv4(&s, m.start(), m.end(), c) {
                m.as_str().to_string()
            } else {
                self.placeholder("ip-ext", m.as_str())
            }
        });
        s.into_owned()
    }
}

/// Decide whether a dotted quad is kept (private/special range, or version-like context).
fn keep_ipv4(text: &str, start: usize, end: usize, c: &Captures) -> bool {
    let mut o = [0u32; 4];
    for (i, x) in o.iter_mut().enumerate() {
        match c[i + 1].parse::<u32>() {
            Ok(v) if v <= 255 => *x = v,
            _ => return true, // octet > 255: not an address
        }
    }
    let b = text.as_bytes();
    // more dotted parts after or before
    if end + 1 < b.len() && b[end] == b'.' && b[end + 1].is_ascii_digit() {
        return true;
    }
    if start >= 2 && b[start - 1] == b'.' && b[start - 2].is_ascii_digit() {
        return true;
    }
    // joined to a letter / '-' / '_' / '@' (v1.2.3.4, nginx-1.2.3.4, pkg@1.2.3.4)
    if start >= 1
        && (b[start - 1].is_ascii_alphabetic() || matches!(b[start - 1], b'-' | b'_' | b'@'))
    {
        return true;
    }
    let before = text[..start]
        .trim_end_matches([' ', '=', ':', '"', '\''])
        .to_ascii_lowercase();
    for w in [
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
    ] {
        if let Some(head) = before.strip_suffix(w)
            && !head.ends_with(|c: char| c.is_ascii_alphanumeric())
        {
            return true;
        }
    }
    let [a, b2, ..] = o;
    a == 10
        || a == 127
        || a == 0
        || (a == 172 && (16..=31).contains(&b2))
        || (a == 192 && b2 == 168)
        || (a == 169 && b2 == 254)
        || (a == 100 && (64..=127).contains(&b2))
        || a >= 224
}

/// Redact with a fresh, throw-away [`Redactor`].
pub fn redact_once(text: &str) -> String {
    Redactor::new().redact(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRETS: &[&str] = &[
        "hunter2hunter2",
        "s3cr3t-P@ss",
        "sk-proj-abcdefghijklmnopqrstuvwxyz123456",
        "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij",
        "xoxb-123456789012-abcdefghijkl",
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "alice@example.com",
        "bob.smith+ops@corp.example.org",
        "mF_9.B5f-4.1JqM",
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
        "glpat-abcdefghij1234567890",
        "tok_9f8e7d6c5b4a",
        "dbpassw0rd",
        "8.8.8.8",
        "203.0.113.77",
        "c2VjcmV0dXNlcjpzZWNyZXRwYXNz",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==",
    ];

    fn corpus() -> String {
        [
            "db url: postgres://app:hunter2hunter2@db.internal:5432/shop",
            "redis://default:s3cr3t-P@ss@cache:6379 is not parsed as email",
            "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz123456",
            "pushing with ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij",
            "slack token xoxb-123456789012-abcdefghijkl posted",
            "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
            "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "cookie session=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "paged alice@example.com and bob.smith+ops@corp.example.org",
            "Authorization: Bearer mF_9.B5f-4.1JqM",
            "maps key AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END RSA PRIVATE KEY-----",
            "gitlab glpat-abcdefghij1234567890",
            r#"{"client_secret": "tok_9f8e7d6c5b4a", "user": "svc"}"#,
            "DB_PASSWORD: dbpassw0rd",
            "resolver 8.8.8.8 and client 203.0.113.77 failed",
            "Authorization: Basic c2VjcmV0dXNlcjpzZWNyZXRwYXNz",
            "https://acct.blob.core.windows.net/c?sv=2020&sig=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==",
        ]
        .join("\n")
    }

    #[test]
    fn secret_corpus_leaves_no_secret() {
        let out = redact_once(&corpus());
        for s in SECRETS {
            assert!(!out.contains(s), "secret {s} survived in:\n{out}");
        }
        // structure kept
        assert!(
            out.contains("postgres://app:<password-1>@db.internal:5432/shop"),
            "{out}"
        );
        assert!(out.contains("Authorization: Bearer <token-"), "{out}");
        assert!(out.contains("<jwt-1>"), "{out}");
        assert!(out.contains("<private-key-1>"), "{out}");
        assert!(out.contains("<aws-key-1>"), "{out}");
        assert!(out.contains("\"user\": \"svc\""), "{out}");
    }

    #[test]
    fn stable_placeholders_and_kept_addresses() {
        let mut r = Redactor::new();
        let a = r.redact("from alice@example.com to 8.8.4.4");
        let b = r.redact("again alice@example.com, then carol@example.com via 8.8.4.4");
        assert_eq!(a, "from <email-1> to <ip-ext-1>");
        assert_eq!(b, "again <email-1>, then <email-2> via <ip-ext-1>");
        // persisted mapping keeps placeholders stable and holds no secret
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            !json.contains("alice") && !json.contains("8.8.4.4"),
            "{json}"
        );
        let mut r2: Redactor = serde_json::from_str(&json).unwrap();
        assert_eq!(r2.redact("alice@example.com"), "<email-1>");
        assert_eq!(r2.len(), 3);
        // salted redactors still map consistently
        let mut s = Redactor::with_salt("incident-42");
        assert_eq!(s.redact("x@y.io x@y.io"), "<email-1> <email-1>");
    }

    #[test]
    fn private_addresses_and_versions_kept() {
        for keep in [
            "connect to 10.2.3.14:8080",
            "peer 192.168.1.20 and 172.20.0.5",
            "loopback 127.0.0.1, link-local 169.254.169.254",
            "upgraded to 2.14.0.1",
            "deployed checkout v2.14.0.1",
            "version 2.14.0.1 rolled out",
            "image app-2.14.0.1 pulled",
            "kernel 2.6.9.42.1 loaded",
            "octets 300.1.2.3 invalid",
        ] {
            assert_eq!(redact_once(keep), keep, "changed: {keep}");
        }
        assert_eq!(
            redact_once("from 2.14.0.1 port 22"),
            "from <ip-ext-1> port 22"
        );
    }

    #[test]
    fn idempotent_and_plain_text_untouched() {
        let once = redact_once(&corpus());
        let mut r = Redactor::new();
        assert_eq!(r.redact(&once), once);
        let plain =
            "Failed password for root from 10.0.0.9 port 22 ssh2; token expired; author=jane";
        assert_eq!(redact_once(plain), plain);
    }
}
