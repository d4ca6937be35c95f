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
//! Long because it is the one policy: every pattern and the order they run in stay in one place,
//! with their tests (about 250 lines).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};

struct Patterns {
    json_literal: Regex,
    k8s_kind: Regex,
    k8s_json_map: Regex,
    k8s_json_value: Regex,
    yaml_map_head: Regex,
    yaml_entry: Regex,
    env_line: Regex,
    pem: Regex,
    url_pass: Regex,
    jwt: Regex,
    auth_header: Regex,
    cookie_header: Regex,
    cookie_value: Regex,
    tokens: Regex,
    aws_key: Regex,
    sig_param: Regex,
    json_secret: Regex,
    kv_secret: Regex,
    flag_secret: Regex,
    sql_identified: Regex,
    entropy_run: Regex,
    email: Regex,
    ipv4: Regex,
}

const SECRET_KEY: &str = r"[A-Za-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|client[_\-]?secret|accountkey|signature|credentials?)[A-Za-z0-9_.\-]*|[A-Za-z0-9_.\-]*auth";

/// A JSON quote, possibly escaped (once or more) inside an enclosing JSON string.
const Q: &str = r#"\\*""#;

static P: LazyLock<Patterns> = LazyLock::new(|| {
    Patterns {
    json_literal: Regex::new(r#""(?:[^"\\\r\n]|\\.)*""#).expect("json literal"),
    k8s_kind: Regex::new(&format!(
        r#"(?m){Q}kind{Q}\s*:\s*{Q}Secret(?:List)?{Q}|^[ \t-]*kind:[ \t]*["']?Secret(?:List)?["']?[ \t]*\r?$"#
    ))
    .expect("k8s kind"),
    // A flat map (Secret data maps hold strings only), so `[^{}]*` is its whole body.
    k8s_json_map: Regex::new(&format!(r#"{Q}(?:data|stringData){Q}\s*:\s*\{{([^{{}}]*)\}}"#))
        .expect("k8s map"),
    k8s_json_value: Regex::new(&format!(
        r#"{Q}[^"\\]*{Q}\s*:\s*{Q}((?:[^"\\]|\\+[^"\\])*){Q}"#
    ))
    .expect("k8s value"),
    yaml_map_head: Regex::new(r"^([ \t]*)(?:data|stringData):[ \t]*\r?$").expect("yaml head"),
    yaml_entry: Regex::new(r#"^[ \t]*["']?[A-Za-z0-9_.\-]+["']?:[ \t]*(.*?)[ \t]*\r?$"#)
        .expect("yaml entry"),
    env_line: Regex::new(r"^(?:export[ \t]+)?[A-Z][A-Z0-9_]*=(.*?)[ \t]*\r?$").expect("env"),
    pem: Regex::new(concat!(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
        r"(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=:\s\-]|\\[nr])*)"
    ))
    .expect("pem"),
    url_pass: Regex::new(r#"([A-Za-z][A-Za-z0-9+.\-]*://)([^:/@\s"'\\]*):([^\s/"'\\]+)@"#)
        .expect("url"),
    jwt: Regex::new(r"(?-u:\b)eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*")
        .expect("jwt"),
    auth_header: Regex::new(
        r"(?i)(?-u:\b)(bearer[ \t]+|authorization:[ \t]*(?:basic|token|digest|apikey|sso-key)[ \t]+)([A-Za-z0-9\-._~+/:]{8,}=*)",
    )
    .expect("auth"),
    cookie_header: Regex::new(r"(?i)(?-u:\b)((?:set-)?cookie:[ \t]*)([^\r\n]*)").expect("cookie"),
    cookie_value: Regex::new(r#"([A-Za-z0-9_.\-]+=)([^;\s"'\\<]+)"#).expect("cookie value"),
    tokens: Regex::new(concat!(
        r"(?-u:\b)(?:sk-(?:proj-|live-|test-|ant-(?:api\d\d-)?)?[A-Za-z0-9_\-]{16,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
        r"|whsec_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}",
        r"|xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,}",
        r"|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{16,}",
        r"|discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_\-]{16,}",
        r"|glpat-[A-Za-z0-9_\-]{20,}|AIza[0-9A-Za-z_\-]{35}|ya29\.[0-9A-Za-z_\-]{20,}|GOCSPX-[A-Za-z0-9_\-]{20,}",
        r"|npm_[A-Za-z0-9]{36}|pypi-[A-Za-z0-9_\-]{50,}|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
        r"|hf_[A-Za-z0-9]{30,}|dop_v1_[a-f0-9]{64}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|hvs\.[A-Za-z0-9_\-]{20,}",
        r"|ATATT[A-Za-z0-9_\-=]{20,}|dapi[a-f0-9]{32}|whk_[a-f0-9]{32,}|im_[a-f0-9]{32,})"
    ))
    .expect("tokens"),
    aws_key: Regex::new(r"(?-u:\b)(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}(?-u:\b)")
        .expect("aws"),
    sig_param: Regex::new(r#"(?i)([?&](?:sig|x-amz-signature|signature)=)([A-Za-z0-9%+/=_\-]{16,})"#)
        .expect("sig"),
    json_secret: Regex::new(&format!(
        r#"(?i)({Q}(?:{SECRET_KEY}){Q}\s*:\s*{Q})((?:[^"\\]|\\+[^"\\])+)({Q})"#
    ))
    .expect("json"),
    kv_secret: Regex::new(&format!(
        r#"(?i)(?-u:\b)({SECRET_KEY})(\s*[=:]\s*)(['"]?)([^\s'",;&}}<\]\\]+)"#
    ))
    .expect("kv"),
    flag_secret: Regex::new(r#"(?i)(--(?:password|passwd|token|secret|api-key|apikey|access-key|secret-key)[ \t]+)(['"]?)([^\s'"<]+)"#)
        .expect("flag"),
    sql_identified: Regex::new(r"(?i)(identified[ \t]+by[ \t]+')([^']+)(')").expect("sql"),
    entropy_run: Regex::new(r"[A-Za-z0-9+/_\-]{16,}={0,2}").expect("entropy"),
    email: Regex::new(r"(?-u:\b)[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}(?-u:\b)")
        .expect("email"),
    ipv4: Regex::new(r"(?-u:\b)(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?-u:\b)").expect("ipv4"),
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

fn is_placeholder(s: &str) -> bool {
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

    /// Redacts every string inside a JSON value (keys are kept), e.g. a whole post-mortem.
    pub fn redact_json(&mut self, v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) => {
                let r = self.redact(s);
                if r != *s {
                    *s = r;
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| self.redact_json(x)),
            serde_json::Value::Object(o) => o.values_mut().for_each(|x| self.redact_json(x)),
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

    /// AWS keys, signature parameters, secrets named by a JSON, `key=value` or flag key, and SQL `IDENTIFIED BY`.
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
        s
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
        let r = p.ipv4.replace_all(&s, |c: &Captures| {
            let m = c.get(0).expect("match");
            if is_version_or_private(&s, m.start(), m.end(), c) {
                m.as_str().to_string()
            } else {
                self.placeholder("ip-ext", m.as_str())
            }
        });
        if let Cow::Owned(o) = r {
            s = o;
        }
        s
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

/// The first `\n` at or after `from`.
fn memchr_nl(b: &[u8], from: usize) -> Option<usize> {
    b[from..].iter().position(|&c| c == b'\n').map(|p| from + p)
}

/// Value spans of `data`/`stringData` maps written as JSON (also escaped inside a JSON string).
fn k8s_json_spans(text: &str, spans: &mut Vec<(usize, usize)>) {
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
fn yaml_data_spans(text: &str, spans: &mut Vec<(usize, usize)>) {
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
fn env_spans(text: &str, spans: &mut Vec<(usize, usize)>) {
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
fn looks_random(run: &str) -> bool {
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
fn window_before(text: &str, at: usize, n: usize) -> &str {
    let mut s = at.saturating_sub(n);
    while !text.is_char_boundary(s) {
        s += 1;
    }
    &text[s..at]
}

/// A secret-ish word within 40 bytes before `at`, on the same line.
fn secret_word_before(text: &str, at: usize) -> bool {
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

/// Words after which a dotted quad is an address, not a version.
const ADDRESS_WORDS: &[&str] = &[
    "from",
    "to",
    "via",
    "at",
    "by",
    "for",
    "on",
    "in",
    "of",
    "and",
    "or",
    "is",
    "was",
    "with",
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
    "target",
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
    "timeout",
    "new",
    "the",
    "a",
    "an",
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

/// The one rule for dotted quads: `true` keeps it (a version, or a private/special address),
/// `false` masks it as a public address. See the module docs.
pub fn is_version_or_private(text: &str, start: usize, end: usize, c: &Captures) -> bool {
    let mut o = [0u32; 4];
    for (i, x) in o.iter_mut().enumerate() {
        match c[i + 1].parse::<u32>() {
            Ok(v) if v <= 255 => *x = v,
            _ => return true, // octet > 255: not an address
        }
    }
    let [a, b2, ..] = o;
    if a == 10
        || a == 127
        || a == 0
        || (a == 172 && (16..=31).contains(&b2))
        || (a == 192 && b2 == 168)
        || (a == 169 && b2 == 254)
        || (a == 100 && (64..=127).contains(&b2))
        || a >= 224
    {
        return true;
    }
    let b = text.as_bytes();
    // more dotted parts after or before
    if end + 1 < b.len() && b[end] == b'.' && b[end + 1].is_ascii_digit() {
        return true;
    }
    if start >= 2 && b[start - 1] == b'.' && b[start - 2].is_ascii_digit() {
        return true;
    }
    // a port or a prefix length: an address
    if end + 1 < b.len() && matches!(b[end], b':' | b'/') && b[end + 1].is_ascii_digit() {
        return false;
    }
    // joined to a letter / '-' / '_' / '@' (v1.2.3.4, nginx-1.2.3.4, pkg@1.2.3.4)
    if start >= 1
        && (b[start - 1].is_ascii_alphabetic() || matches!(b[start - 1], b'-' | b'_' | b'@'))
    {
        return true;
    }
    let before = window_before(text, start, 48);
    let trimmed = before.trim_end_matches([' ', '=', ':', '"', '\'']);
    let lower = trimmed.to_ascii_lowercase();
    for w in VERSION_WORDS {
        if let Some(head) = lower.strip_suffix(w)
            && !head.ends_with(|c: char| c.is_ascii_alphanumeric())
        {
            return true;
        }
    }
    // A bare name directly before (one space): `svc-d 2.14.0.1` is svc-d's version.
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
        && !ADDRESS_WORDS.contains(&lw.as_str())
        && !lw.ends_with("ed")
        && !lw.ends_with("ing")
}

/// Redact with a fresh, throw-away [`Redactor`].
pub fn redact_once(text: &str) -> String {
    Redactor::new().redact(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_characters_are_dropped_from_every_stored_text() {
        let mut r = Redactor::default();
        assert_eq!(r.redact("job=\0node\0-exporter"), "job=node-exporter");
        assert_eq!(
            r.redact_large("disk full on /var\0\n".to_string()),
            "disk full on /var\n"
        );
    }

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

    #[test]
    fn kubernetes_secret_values_are_redacted_whatever_the_key_names() {
        let json = r#"{"apiVersion":"v1","kind":"SecretList","items":[{"kind":"Secret","metadata":{"name":"orders-db","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"blob\":\"b3JkZXJzLXJvb3QtcHc=\"},\"kind\":\"Secret\"}\n"}},"data":{"blob":"b3JkZXJzLXJvb3QtcHc=","user":"YWRtaW4="},"type":"Opaque"}]}"#;
        let out = redact_once(json);
        assert!(!out.contains("b3JkZXJzLXJvb3QtcHc="), "{out}");
        assert!(!out.contains("YWRtaW4="), "{out}");
        assert!(out.contains(r#""name":"orders-db""#), "{out}");
        let yaml = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cache\ndata:\n  alpha: Y2FjaGUtcHctOTE=\n  beta: \"Ym9ib2JvYg==\"\nstringData:\n  config.yml: |\n    upstream: pw-in-block-771\n    second: line-two-771\ntype: Opaque\n";
        let out = redact_once(yaml);
        for s in [
            "Y2FjaGUtcHctOTE=",
            "Ym9ib2JvYg==",
            "pw-in-block-771",
            "line-two-771",
        ] {
            assert!(!out.contains(s), "{s} in {out}");
        }
        assert!(
            out.contains("name: cache") && out.contains("type: Opaque"),
            "{out}"
        );
        // A `data` map outside a Secret is left alone.
        let plain = r#"{"kind":"ConfigMap","data":{"mode":"fast"}}"#;
        assert_eq!(redact_once(plain), plain);
    }

    #[test]
    fn env_files_lose_their_values_but_keep_harmless_ones() {
        let env = "# service env\nAPP_NAME=orders\nAPP_VERSION=2.14.0.1\nSTRIPE_HOOK=Zx81kP2mQv\nDEBUG=false\nexport ORDERS_DB_URL=postgres://orders:Pw0rdZ@db:5432/o\n";
        let out = redact_once(env);
        assert!(
            !out.contains("Zx81kP2mQv") && !out.contains("Pw0rdZ"),
            "{out}"
        );
        assert!(
            out.contains("APP_NAME=orders") && out.contains("APP_VERSION=2.14.0.1"),
            "{out}"
        );
        assert!(out.contains("DEBUG=false"), "{out}");
        // One KEY=value line in a log is not an .env file.
        let log = "LEVEL=Warn1ngX\nsomething else";
        assert_eq!(redact_once(log), log);
    }

    #[test]
    fn escaped_json_and_entropy_runs_next_to_secret_words() {
        let body =
            r#"{"annotations":{"description":"payload {\"password\":\"esc-pw-8812\",\"ok\":1}"}}"#;
        let out = redact_once(body);
        assert!(!out.contains("esc-pw-8812"), "{out}");
        let out = redact_once("session id 9f86d081884c7d659a2feaa0c55ad015 expired");
        assert!(!out.contains("9f86d081884c7d659a2feaa0c55ad015"), "{out}");
        // Not next to a secret word: a trace id stays.
        let t = "trace 9f86d081884c7d659a2feaa0c55ad015 slow";
        assert_eq!(redact_once(t), t);
        let out = redact_once("Cookie: theme=dark; sid=Q2hlY2tvdXQtc2Vzc2lvbi0x");
        assert!(!out.contains("Q2hlY2tvdXQtc2Vzc2lvbi0x"), "{out}");
        let out = redact_once("redis://:cachePw77@cache:6379/0");
        assert!(!out.contains("cachePw77"), "{out}");
    }

    #[test]
    fn one_rule_for_four_part_versions_and_addresses() {
        for keep in [
            "svc-d 2.14.0.1 rolled out",
            "checkout 2.14.0.1",
            "deployed payments-api 3.1.0.12 at 14:00",
        ] {
            assert_eq!(redact_once(keep), keep, "changed: {keep}");
        }
        for mask in [
            "client 203.0.113.77 failed",
            "connection refused 198.51.100.4",
            "GET / 203.0.113.9:443",
            "blocked 203.0.113.0/24",
            "203.0.113.8 - - [01/Dec/2026] GET /",
        ] {
            assert!(redact_once(mask).contains("<ip-ext-1>"), "kept: {mask}");
        }
    }

    #[test]
    fn redaction_is_linear_on_address_heavy_text() {
        let line = "2026-12-01T10:00:00Z client 203.0.113.7 token=abc\n";
        let small = line.repeat(2_000);
        let big = line.repeat(40_000);
        let t = std::time::Instant::now();
        let _ = redact_once(&small);
        let a = t.elapsed();
        let t = std::time::Instant::now();
        let _ = redact_once(&big);
        let b = t.elapsed();
        assert!(
            b < a * 60 + std::time::Duration::from_millis(200),
            "{a:?} vs {b:?}"
        );
    }

    #[test]
    fn a_large_text_is_redacted_piece_by_piece_like_a_small_one() {
        let mut text = String::new();
        let mut n = 0;
        while text.len() < 6 << 20 {
            n += 1;
            text.push_str(&format!(
                "2026-12-01T10:00:00Z INFO line {n} client 203.0.113.9 ok svc-d 2.14.0.1\n"
            ));
            if n % 5000 == 0 {
                text.push_str("-----BEGIN RSA PRIVATE KEY-----\nQmlnUGFzdGVTZWNyZXRLZXlCb2R5MQ==\n-----END RSA PRIVATE KEY-----\n");
                text.push_str(
                    "2026-12-01T10:00:01Z WARN password=Pz8LargePaste7 api_key=Kq3LargePaste9\n",
                );
            }
        }
        let lines = text.lines().count();
        let out = Redactor::new().redact_large(text);
        for s in [
            "QmlnUGFzdGVTZWNyZXRLZXlCb2R5MQ",
            "Pz8LargePaste7",
            "Kq3LargePaste9",
            "203.0.113.9",
        ] {
            assert!(!out.contains(s), "{s} survived");
        }
        assert!(out.contains("svc-d 2.14.0.1"));
        assert!(out.lines().count() >= lines - 2 * (n / 5000) as usize);
    }
}
