//! The regular expressions of the redaction passes, compiled once.

use std::sync::LazyLock;

use regex::Regex;

pub(super) struct Patterns {
    pub(super) json_literal: Regex,
    pub(super) k8s_kind: Regex,
    pub(super) k8s_json_map: Regex,
    pub(super) k8s_json_value: Regex,
    pub(super) yaml_map_head: Regex,
    pub(super) yaml_entry: Regex,
    pub(super) env_line: Regex,
    pub(super) pem: Regex,
    pub(super) url_pass: Regex,
    pub(super) jwt: Regex,
    pub(super) auth_header: Regex,
    pub(super) cookie_header: Regex,
    pub(super) cookie_value: Regex,
    pub(super) tokens: Regex,
    pub(super) aws_key: Regex,
    pub(super) sig_param: Regex,
    pub(super) json_secret: Regex,
    pub(super) kv_secret: Regex,
    pub(super) flag_secret: Regex,
    pub(super) sql_identified: Regex,
    pub(super) entropy_run: Regex,
    pub(super) email: Regex,
    pub(super) ipv4: Regex,
    pub(super) placeholder: Regex,
}

const SECRET_KEY: &str = r"[A-Za-z0-9_.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|client[_\-]?secret|accountkey|signature|credentials?)[A-Za-z0-9_.\-]*|[A-Za-z0-9_.\-]*auth";

/// A JSON quote, possibly escaped (once or more) inside an enclosing JSON string.
const Q: &str = r#"\\*""#;

pub(super) static P: LazyLock<Patterns> = LazyLock::new(|| {
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
    placeholder: Regex::new(r"<([a-z][a-z\-]*)-(\d{1,9})>").expect("placeholder"),
}
});
