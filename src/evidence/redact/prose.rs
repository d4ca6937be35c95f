//! Secrets typed in prose: "the db password hunter2-blue was leaked", "the API key is
//! 9f2kq81x…", "rotated the token to 'Xq7-plum'". A secret word (password, passphrase, passwd,
//! secret, token, API key, access key, secret key, private key), at most three linking words
//! after it (is, was, now, set, changed, reset, rotated, updated, to, …), then one word that
//! reads as a secret rather than as English:
//! - letters and digits mixed (`hunter2`, `s3cr3t-pass`), or letters with a symbol other than
//!   a hyphen, dot or slash (`pa$$word`, `open#sesame`), at least 6 characters;
//! - or in quotes or backticks (at least 4 characters) with a capital, a symbol, or letters and
//!   digits run together (`'Plum-Kettle'`, `'s3cretpass'`; a lower-case name such as
//!   `'k8s-pull'` names the token rather than being it).
//!
//! Never a secret here: a `key=value` pair (the key=value pass judges it), a key already shown
//! masked (`AK...7Q2`).
//!
//! Plain words (`rotation`, `bucket`, `expired`, `store`), numbers, versions, URLs, paths and
//! placeholders are left alone, so ordinary post-mortem prose ("the token bucket refilled",
//! "the password was rotated at 14:02") keeps its words. The false-positive rate on the
//! project's post-mortem texts is measured by `tests/parsers.rs`.

use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::{Redactor, is_placeholder};

/// The secret word, the linking words, an optional opening quote, the candidate, and the rest.
static PROSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"(?i)(?-u:\b)((?:password|passphrase|passwd|secret|token|api[ _\-]?key|access[ _\-]key|secret[ _\-]key|private[ _\-]key)"#,
        r#"(?-u:\b)(?:[ \t]+(?:is|was|were|are|now|still|being|been|set|changed|reset|rotated|updated|to|as)(?-u:\b)){0,3}[ \t]*:?[ \t]+)"#,
        r#"(["'`]?)([^\s"'`,;()<>\[\]{}]{4,128})"#
    ))
    .expect("prose secret")
});

/// Trailing sentence punctuation, kept outside the placeholder.
const TRAILING: &[char] = &['.', '!', '?', ':'];

/// Whether `word` (trailing punctuation already cut) reads as a secret; `quoted` when it stood
/// in quotes or backticks.
fn reads_as_secret(word: &str, quoted: bool) -> bool {
    let chars = word.chars().count();
    // A placeholder, a URL or path, a `key=value` pair (the key=value pass judges those), or a
    // key shown masked already (`AK...7Q2`).
    if is_placeholder(word)
        || word.contains("://")
        || word.starts_with('/')
        || word.contains('=')
        || word.contains("..")
        || word.contains('…')
        || word.contains("**")
    {
        return false;
    }
    let letters = word.chars().filter(|c| c.is_alphabetic()).count();
    let digits = word.chars().filter(char::is_ascii_digit).count();
    if letters == 0 {
        // A number, a version, a time: never a secret in prose.
        return false;
    }
    let symbol = word
        .chars()
        .any(|c| !c.is_alphanumeric() && !matches!(c, '-' | '.' | '/' | '_'));
    if quoted {
        // In quotes, a name in lower case joined by hyphens (`'k8s-pull'`) names the token;
        // capitals, a symbol, or letters run together with digits make the secret itself.
        let capital = word.chars().any(char::is_uppercase);
        let joined = word.contains(['-', '_']);
        return chars >= 4 && (capital || symbol || (digits > 0 && !joined));
    }
    chars >= 6 && (digits > 0 || symbol)
}

impl Redactor {
    /// Secrets named in prose next to a secret word (see the module docs) → `<secret-N>`.
    pub(super) fn prose_secrets(&mut self, s: String) -> String {
        let r = PROSE.replace_all(&s, |c: &Captures| {
            let quote = &c[2];
            let raw = &c[3];
            let word = raw.trim_end_matches(TRAILING);
            let quoted = !quote.is_empty();
            // A closing quote right after the candidate is outside the match: `'Xq7-plum'`.
            if word.is_empty() || !reads_as_secret(word, quoted) {
                return c[0].to_string();
            }
            format!(
                "{}{}{}{}",
                &c[1],
                quote,
                self.placeholder("secret", word),
                &raw[word.len()..]
            )
        });
        match r {
            std::borrow::Cow::Owned(o) => o,
            std::borrow::Cow::Borrowed(_) => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Redactor;

    fn redact(s: &str) -> String {
        Redactor::new().redact(s)
    }

    #[test]
    fn a_secret_named_in_prose_is_redacted() {
        for (text, gone) in [
            ("the db password hunter2-blue was leaked", "hunter2-blue"),
            ("The password is Tr0ub4dor in the runbook.", "Tr0ub4dor"),
            ("we rotated the API key to 9f2kq81xbb", "9f2kq81xbb"),
            (
                "the token was set to 'Plum-Kettle' by mistake",
                "Plum-Kettle",
            ),
            ("passphrase: `open#sesame!` shared in chat", "open#sesame!"),
            (
                "the access key abcd1234efgh was in the screenshot",
                "abcd1234efgh",
            ),
            ("Secret now s3cr3t.", "s3cr3t"),
        ] {
            let out = redact(text);
            assert!(!out.contains(gone), "{text} → {out}");
            assert!(out.contains("<secret-1>"), "{text} → {out}");
        }
        assert_eq!(
            redact("The password is Tr0ub4dor in the runbook."),
            "The password is <secret-1> in the runbook."
        );
        assert_eq!(
            redact("the token was set to 'Plum-Kettle' by mistake"),
            "the token was set to '<secret-1>' by mistake"
        );
    }

    #[test]
    fn ordinary_prose_around_secret_words_keeps_its_words() {
        for text in [
            "the token bucket refilled at 100 requests per second",
            "the password was rotated at 14:02 UTC",
            "secret rotation failed on two nodes",
            "the API key expired on 2026-03-11",
            "token refresh took 30s after the deploy",
            "password reset emails were delayed",
            "the private key was read-only for the service account",
            "the secret is stored in Vault under a per-service path",
            "a token of 512 bytes",
            "the access key for checkout-api-v2 was revoked",
            "the token endpoint https://auth.example.test/token timed out",
            "secret was <secret-3> already",
            "the password is 'redacted' in the ticket",
            "the API key rotated to version 2.14.0.1",
            "the robot token 'ci-pull' was rotated",
            "the token iat=1747040221 was too old",
            "access key AK...7Q2 expired",
        ] {
            assert_eq!(redact(text), text);
        }
    }
}
