//! Redaction of secrets and personal data before text is stored or sent to a model
//! (DESIGN.md §3: "emails, tokens, keys, passwords in URLs; addresses replaced by stable
//! placeholders so relations survive"). This is the one policy: every writer of user or sender
//! text calls it through `services::memory::redact_for` (with the incident's placeholder map)
//! before the text reaches the store, a model or an embeddings endpoint.
//!
//! A [`Redactor`] holds the per-incident mapping secret → placeholder so the same secret always
//! gets the same placeholder (`<email-1>`, `<ip-ext-2>`, ...). The mapping is keyed by a 128-bit
//! fingerprint of the secret (two salted FNV-1a-64 hashes), never the secret itself, so persisting
//! it (serde) does not persist secrets. The fingerprint is not cryptographic: give each incident a
//! random salt ([`Redactor::with_salt`]) so low-entropy secrets cannot be confirmed by guessing
//! across incidents.
//!
//! Secrets are recognised by **shape**, not only by key name. First, structures that carry
//! secrets whatever their keys are called:
//! - Kubernetes `Secret` / `SecretList` (JSON or YAML, also inside escaped JSON strings such as
//!   `last-applied-configuration` or an alert annotation): every value of a `data` /
//!   `stringData` map → `<secret-N>`;
//! - `.env` files (two or more `NAME=value` lines): every value that is not plainly harmless (a
//!   number, a boolean, a version, a short lower-case word) → `<secret-N>`;
//!
//! then, anywhere in the text (in this order):
//! 1. PEM private-key blocks (also PGP, also cut off before their END line) → `<private-key-N>`;
//! 2. passwords in URLs `scheme://user:PASS@host` (user may be empty) → `scheme://user:<password-N>@host`;
//! 3. JWTs `eyJ….eyJ….sig` → `<jwt-N>`;
//! 4. `Authorization: Bearer|Basic|Token x` credentials, `Cookie:`/`Set-Cookie:` values → `<token-N>`;
//! 5. well-known token shapes → `<token-N>`: OpenAI/Anthropic/Stripe `sk-…`/`sk_live_…`/`whsec_…`,
//!    GitHub `ghp_…` `gho_…` `ghs_…` `ghu_…` `ghr_…` `github_pat_…`, Slack `xoxb-…`/`xapp-…` and
//!    webhook URLs, GitLab `glpat-…`, Google API keys `AIza…`, OAuth `ya29.…`, `GOCSPX-…`, npm
//!    `npm_…`, PyPI `pypi-…`, SendGrid `SG.….…`, Hugging Face `hf_…`, DigitalOcean `dop_v1_…`,
//!    Shopify `shpat_…`, Vault `hvs.…`, Atlassian `ATATT…`, Databricks `dapi…`, our own `whk_…`
//!    and `im_…`; AWS access key ids (`AKIA…`, `ASIA…`) → `<aws-key-N>`; signed-URL `sig=` /
//!    `X-Amz-Signature=` values → `<secret-N>`;
//! 6. `key=value`, `key: value`, `--key value` and JSON `"key": "value"` (also with escaped quotes
//!    inside a JSON string) where the key contains password, passwd, pwd, secret, token,
//!    api_key/apikey/api-key, access_key, private_key, client_secret, accountkey, signature,
//!    credential(s), or ends in `auth`; SQL `IDENTIFIED BY '…'` → value replaced by `<secret-N>`;
//!    then a secret named in prose next to a secret word ("the db password hunter2-blue was
//!    leaked", "the API key is 9f2kq81x…") → `<secret-N>`, ordinary words kept ([`prose`]);
//! 7. high-entropy base64/hex runs (≥ 16 characters, letters and digits, Shannon entropy ≥ 3 bits)
//!    within 40 bytes after secret, token, key, password, session, cookie, credential, auth or
//!    signature on the same line → `<secret-N>`;
//! 8. e-mail addresses → `<email-N>`;
//! 9. public IPv4 addresses → `<ip-ext-N>`, with one rule for what is a version instead (see
//!    [`is_version_or_private`]): kept are RFC 1918 (10/8, 172.16/12, 192.168/16), loopback,
//!    link-local, CGNAT, 0/8, multicast and broadcast, and any dotted quad that reads as a
//!    version: an octet > 255, more dotted parts, joined to a name (`v1.2.3.4`, `app-1.2.3.4`,
//!    `pkg@1.2.3.4`), after a version word (version, release, build, rev, tag, upgraded to, …),
//!    or after a bare name (`svc-d 2.14.0.1`, `checkout 2.14.0.1`) that is not a word which
//!    introduces an address (from, to, client, host, peer, via, …, or a verb such as
//!    `refused`/`connecting`). A quad followed by `:port` or `/prefix` is always an address.
//!
//! Every pass is linear in the text (the regex crate guarantees it; context checks look at a
//! bounded window), so a 50 MB paste costs a few passes over it.
//!
//! By concern: this file the [`Redactor`] (the map and the order of the passes); `patterns` the
//! regular expressions; `spans` the secret-bearing structures and the context windows;
//! [`address`] the one rule for dotted quads (version or address); `tests` their tests.

mod patterns;
mod prose;
mod spans;

pub mod address;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use regex::Captures;
use serde::{Deserialize, Serialize};

use address::Quad;
use patterns::P;
use spans::{
    env_spans, k8s_json_spans, looks_random, memchr_nl, secret_word_before, yaml_data_spans,
};

pub use address::is_version_or_private;

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
    /// Fingerprints of the dotted quads decided versions in this incident, so a version stays
    /// a version in every later text (see [`address`]).
    #[serde(default)]
    versions: BTreeSet<String>,
    /// Leaves dotted quads as they are: set for text whose quads its incident's map already
    /// decided ([`redact_stored`]).
    #[serde(skip)]
    quads_decided: bool,
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

pub(super) fn is_placeholder(s: &str) -> bool {
    s.starts_with('<') && s.ends_with('>')
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

    /// True when nothing was replaced, numbered or decided yet: two fresh redactors redact any
    /// text alike, whatever their salts.
    pub fn is_fresh(&self) -> bool {
        self.map.is_empty() && self.counters.is_empty() && self.versions.is_empty()
    }

    /// Continues the numbering after every placeholder `text` holds (`<ip-ext-3>` → the next
    /// address is `<ip-ext-4>`), so a throw-away redactor never reuses an incident's number.
    pub fn continue_after(&mut self, text: &str) {
        for c in P.placeholder.captures_iter(text) {
            if let Ok(n) = c[2].parse::<u32>() {
                let at = self.counters.entry(c[1].to_string()).or_insert(0);
                *at = (*at).max(n);
            }
        }
    }

    /// The salted 128-bit fingerprint of `secret` of `kind`, as 32 hex characters.
    fn fingerprint(&self, kind: &str, secret: &str) -> String {
        let parts: [&[u8]; 3] = [self.salt.as_bytes(), kind.as_bytes(), secret.as_bytes()];
        format!(
            "{:016x}{:016x}",
            fnv1a(0xcbf2_9ce4_8422_2325, &parts),
            fnv1a(0x6c62_272e_07bb_0142, &parts)
        )
    }

    /// Placeholder for `secret` of `kind` (`email`, `jwt`, `token`, `password`, `secret`,
    /// `aws-key`, `private-key`, `ip-ext`), allocating `<kind-N>` on first sight.
    pub fn placeholder(&mut self, kind: &str, secret: &str) -> String {
        let fp = self.fingerprint(kind, secret);
        if let Some(p) = self.map.get(&fp) {
            return p.clone();
        }
        let n = self.counters.entry(kind.to_string()).or_insert(0);
        *n += 1;
        let p = format!("<{kind}-{n}>");
        self.map.insert(fp, p.clone());
        p
    }

    /// Decides, before any of `texts` is redacted, which dotted quads they show as versions
    /// (judged a version by [`address::judge`] in any of them), and remembers them in the map:
    /// the texts of one write (a resolution's summary and root cause, a post-mortem's fields,
    /// the records Learn writes) then read as one text, so a quad that a later field calls a
    /// version ("version 2.14.0.0") is not masked in an earlier one ("moved to 2.14.0.0").
    pub fn decide_versions<'t>(&mut self, texts: impl IntoIterator<Item = &'t str>) {
        if self.quads_decided {
            return;
        }
        for t in texts {
            for c in P.ipv4.captures_iter(t) {
                let m = c.get(0).expect("match");
                if address::judge(t, m.start(), m.end(), &c) == Quad::Version {
                    let fp = self.fingerprint("version", m.as_str());
                    self.versions.insert(fp);
                }
            }
        }
    }

    /// [`Redactor::decide_versions`] over every string inside a JSON value.
    pub fn decide_versions_in(&mut self, v: &serde_json::Value) {
        let mut texts = Vec::new();
        strings_of(v, &mut texts);
        self.decide_versions(texts);
    }

    /// Redacts every string inside a JSON value (keys are kept), e.g. a whole post-mortem,
    /// its versions decided over all of them first ([`Redactor::decide_versions_in`]).
    pub fn redact_json(&mut self, v: &mut serde_json::Value) {
        self.decide_versions_in(v);
        self.redact_json_strings(v);
    }

    fn redact_json_strings(&mut self, v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) => {
                let r = self.redact(s);
                if r != *s {
                    *s = r;
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| self.redact_json_strings(x)),
            serde_json::Value::Object(o) => {
                o.values_mut().for_each(|x| self.redact_json_strings(x));
            }
            _ => {}
        }
    }

    /// Redacts a serializable value by redacting every string of its JSON form (for documents
    /// such as a post-mortem whose every field is free text).
    ///
    /// # Errors
    /// When the value does not round-trip through JSON.
    pub fn redact_value<T: Serialize + serde::de::DeserializeOwned>(
        &mut self,
        value: &T,
    ) -> Result<T, serde_json::Error> {
        let mut v = serde_json::to_value(value)?;
        self.redact_json(&mut v);
        serde_json::from_value(v)
    }

    /// Redact `text` (see the module docs for what is replaced). Idempotent: placeholders are not
    /// redacted again.
    pub fn redact(&mut self, text: &str) -> String {
        if text.contains('\0') {
            // NUL is no character of any log, note or rule, and PostgreSQL text cannot hold it:
            // every stored text passes here, so neither backend stores one.
            return self.redact_at(&text.replace('\0', ""), 0);
        }
        self.redact_at(text, 0)
    }

    /// Redacts a large text piece by piece (pieces of about 1 MiB, cut before a line that starts
    /// with a date such as `2026-`, else after 4 MiB at any line end), so memory stays at the
    /// text plus its redacted copy. Shapes that span lines (PEM blocks, Secrets, `.env` files)
    /// never start with a date, so a cut does not fall inside one of them unless a piece grows
    /// past 4 MiB without a dated line. Texts up to 4 MiB go through [`Redactor::redact`] whole.
    pub fn redact_large(&mut self, text: String) -> String {
        const PIECE: usize = 1 << 20;
        const HARD: usize = 4 << 20;
        let text = if text.contains('\0') {
            text.replace('\0', "")
        } else {
            text
        };
        if text.len() <= HARD {
            return self.redact(&text);
        }
        let b = text.as_bytes();
        let dated = |i: usize| {
            b.len() >= i + 5 && b[i..i + 4].iter().all(u8::is_ascii_digit) && b[i + 4] == b'-'
        };
        let mut out = String::with_capacity(text.len());
        let mut start = 0;
        while start < b.len() {
            let mut cut = b.len();
            let mut i = start + PIECE;
            while i < b.len() {
                match memchr_nl(b, i) {
                    Some(nl) if dated(nl + 1) || nl + 1 - start >= HARD => {
                        cut = nl + 1;
                        break;
                    }
                    Some(nl) => i = nl + 1,
                    None => break,
                }
            }
            out.push_str(&self.redact(&text[start..cut]));
            start = cut;
        }
        out
    }

    fn redact_at(&mut self, text: &str, depth: u8) -> String {
        let s = if depth < 4 {
            self.escaped_strings(text, depth)
        } else {
            Cow::Borrowed(text)
        };
        let s = match self.structures(&s) {
            Some(changed) => Cow::Owned(changed),
            None => s,
        };
        let s: String = s.into_owned();
        let s = self.credentials(s);
        let s = self.secrets(s);
        self.shapes(s)
    }

    /// Private keys, URL passwords, JWTs, authorization and cookie headers, and known token shapes.
    fn credentials(&mut self, mut s: String) -> String {
        let p = &*P;
        let r = p.pem.replace_all(&s, |c: &Captures| {
            self.placeholder("private-key", c[0].trim_end())
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p.url_pass.replace_all(&s, |c: &Captures| {
            if is_placeholder(&c[3]) {
                return c[0].to_string();
            }
            format!(
                "{}{}:{}@",
                &c[1],
                &c[2],
                self.placeholder("password", &c[3])
            )
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p
            .jwt
            .replace_all(&s, |c: &Captures| self.placeholder("jwt", &c[0]));
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p.auth_header.replace_all(&s, |c: &Captures| {
            format!("{}{}", &c[1], self.placeholder("token", &c[2]))
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p.cookie_header.replace_all(&s, |c: &Captures| {
            let values = p.cookie_value.replace_all(&c[2], |v: &Captures| {
                let name = v[1].trim_end_matches('=').to_ascii_lowercase();
                if is_placeholder(&v[2])
                    || matches!(
                        name.as_str(),
                        "path" | "domain" | "expires" | "max-age" | "samesite" | "priority"
                    )
                {
                    v[0].to_string()
                } else {
                    format!("{}{}", &v[1], self.placeholder("token", &v[2]))
                }
            });
            format!("{}{}", &c[1], values)
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p
            .tokens
            .replace_all(&s, |c: &Captures| self.placeholder("token", &c[0]));
        if let Cow::Owned(o) = r {
            s = o;
        }
        s
    }

    /// AWS keys, signature parameters, secrets named by a JSON, `key=value` or flag key, SQL
    /// `IDENTIFIED BY`, and secrets named in prose.
    fn secrets(&mut self, mut s: String) -> String {
        let p = &*P;
        let r = p
            .aws_key
            .replace_all(&s, |c: &Captures| self.placeholder("aws-key", &c[0]));
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p.sig_param.replace_all(&s, |c: &Captures| {
            format!("{}{}", &c[1], self.placeholder("secret", &c[2]))
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p.json_secret.replace_all(&s, |c: &Captures| {
            if is_placeholder(&c[2]) {
                c[0].to_string()
            } else {
                format!("{}{}{}", &c[1], self.placeholder("secret", &c[2]), &c[3])
            }
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p.kv_secret.replace_all(&s, |c: &Captures| {
            format!(
                "{}{}{}{}",
                &c[1],
                &c[2],
                &c[3],
                self.placeholder("secret", &c[4])
            )
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p.flag_secret.replace_all(&s, |c: &Captures| {
            format!("{}{}{}", &c[1], &c[2], self.placeholder("secret", &c[3]))
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p.sql_identified.replace_all(&s, |c: &Captures| {
            format!("{}{}{}", &c[1], self.placeholder("secret", &c[2]), &c[3])
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        self.prose_secrets(s)
    }

    /// High-entropy runs, e-mail addresses and external IPv4 addresses (not versions or private ones).
    fn shapes(&mut self, mut s: String) -> String {
        let p = &*P;
        let r = self.entropy_runs(&s);
        if let Cow::Owned(o) = r {
            s = o;
        }
        let r = p
            .email
            .replace_all(&s, |c: &Captures| self.placeholder("email", &c[0]));
        if let Cow::Owned(o) = r {
            s = o;
        }
        if self.quads_decided {
            return s;
        }
        if let Some(o) = self.addresses(&s) {
            s = o;
        }
        s
    }

    /// Public IPv4 addresses → `<ip-ext-N>`, versions kept: each quad judged by
    /// [`address::judge`]; one judged a version anywhere in `s` is a version everywhere in it,
    /// and one decided a version earlier in the incident stays one. `None` when nothing changed.
    fn addresses(&mut self, s: &str) -> Option<String> {
        let p = &*P;
        let judged: Vec<(usize, usize, Quad)> = p
            .ipv4
            .captures_iter(s)
            .map(|c| {
                let m = c.get(0).expect("match");
                (
                    m.start(),
                    m.end(),
                    address::judge(s, m.start(), m.end(), &c),
                )
            })
            .collect();
        if judged.iter().all(|j| j.2 == Quad::Special) {
            return None;
        }
        let here: BTreeSet<&str> = judged
            .iter()
            .filter(|j| j.2 == Quad::Version)
            .map(|j| &s[j.0..j.1])
            .collect();
        let mut out = String::with_capacity(s.len());
        let mut at = 0;
        for (start, end, quad) in &judged {
            let text = &s[*start..*end];
            let fp = self.fingerprint("version", text);
            let keep = match quad {
                Quad::Special => true,
                Quad::Address => false,
                Quad::Version => true,
                Quad::Named => {
                    here.contains(text)
                        || self.versions.contains(&fp)
                        || !self.map.contains_key(&self.fingerprint("ip-ext", text))
                }
                Quad::Unsure => here.contains(text) || self.versions.contains(&fp),
            };
            out.push_str(&s[at..*start]);
            if keep {
                if *quad != Quad::Special {
                    self.versions.insert(fp);
                }
                out.push_str(text);
            } else {
                out.push_str(&self.placeholder("ip-ext", text));
            }
            at = *end;
        }
        out.push_str(&s[at..]);
        Some(out)
    }

    /// JSON string literals with escapes (an alert annotation holding a whole `.env` file, a
    /// Secret as escaped JSON, a PEM with `\n`): each is decoded, redacted as text of its own,
    /// and written back as a JSON string, so shapes that span lines are seen inside it too.
    fn escaped_strings<'t>(&mut self, text: &'t str, depth: u8) -> Cow<'t, str> {
        if !text.contains('\\') {
            return Cow::Borrowed(text);
        }
        P.json_literal.replace_all(text, |c: &Captures| {
            let lit = &c[0];
            if !lit.contains('\\') {
                return lit.to_string();
            }
            let Ok(decoded) = serde_json::from_str::<String>(lit) else {
                return lit.to_string();
            };
            let redacted = self.redact_at(&decoded, depth + 1);
            if redacted == decoded {
                lit.to_string()
            } else {
                serde_json::to_string(&redacted).unwrap_or_else(|_| lit.to_string())
            }
        })
    }

    /// Replaces the values of secret-bearing structures (Kubernetes Secrets, `.env` files),
    /// whatever their keys are called.
    fn structures(&mut self, text: &str) -> Option<String> {
        let mut spans: Vec<(usize, usize)> = Vec::new();
        if P.k8s_kind.is_match(text) {
            k8s_json_spans(text, &mut spans);
            yaml_data_spans(text, &mut spans);
        }
        env_spans(text, &mut spans);
        if spans.is_empty() {
            return None;
        }
        spans.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in spans {
            if start < at || start >= end {
                continue;
            }
            let value = &text[start..end];
            if is_placeholder(value) {
                continue;
            }
            out.push_str(&text[at..start]);
            out.push_str(&self.placeholder("secret", value));
            at = end;
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// High-entropy base64/hex runs shortly after a secret-ish word on the same line.
    fn entropy_runs<'t>(&mut self, text: &'t str) -> Cow<'t, str> {
        P.entropy_run.replace_all(text, |c: &Captures| {
            let m = c.get(0).expect("match");
            let run = m.as_str();
            if looks_random(run) && secret_word_before(text, m.start()) {
                self.placeholder("secret", run)
            } else {
                run.to_string()
            }
        })
    }
}

/// Every string of a JSON value, depth first.
fn strings_of<'v>(v: &'v serde_json::Value, out: &mut Vec<&'v str>) {
    match v {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| strings_of(x, out)),
        _ => {}
    }
}

/// Redacts with a fresh, throw-away [`Redactor`] whose numbering starts after every placeholder
/// `text` already holds, so a new placeholder never reads like one of the incident's map (a text
/// redacted with the incident's map keeps its placeholders; what is new gets the next number).
pub fn redact_once(text: &str) -> String {
    let mut r = Redactor::new();
    r.continue_after(text);
    r.redact(text)
}

/// Redacts text read back from the store (a record, an incident document) before it leaves
/// the process (an embeddings endpoint): like [`redact_once`], except that dotted quads stay as
/// they are, because the incident's map decided each of them when the text was written (a
/// version kept there is not masked here, an address is already its placeholder).
pub fn redact_stored(text: &str) -> String {
    let mut r = Redactor::new();
    r.continue_after(text);
    r.quads_decided = true;
    r.redact(text)
}

#[cfg(test)]
mod tests;
