//! Log line shapes: detection and hand-written parsing of timestamp, level and message content.
//!
//! Supported shapes (first byte dispatch, then a shape-specific parser; the dominant shape of the
//! first lines becomes the preferred parser and other shapes are still tried per line):
//! - syslog RFC 3164 `Jun 14 15:16:01 host proc[pid]: msg` (optionally `<PRI>`-prefixed; PRI gives
//!   the level), RFC 5424 `<PRI>1 2003-10-11T22:14:15Z host app pid msgid [sd] msg`;
//! - ISO-8601 / RFC 3339 prefixed lines, with Log4j/Logback headers
//!   (`2015-07-29 17:41:44,747 - INFO [thread] - msg`, `... [main] ERROR com.x.Y - msg`);
//! - Kubernetes CRI container output `2024-01-02T03:04:05.1Z stdout F msg` (inner msg re-parsed);
//! - epoch-prefixed lines (10/13/16/19 digits);
//! - Apache error log `[Sun Dec 04 04:47:44 2005] [error] msg` (2.4: `[core:error] [pid 1]`);
//! - HDFS/Hadoop `081109 203615 148 INFO dfs.DataNode$PacketResponder: msg`;
//! - klog `E0611 14:13:13.123456   12345 file.go:123] msg` (year-less);
//! - JSON lines (`msg`/`message`/`log`, `level`/`severity`, `time`/`ts`/`@timestamp`);
//! - logfmt (`ts=... level=error msg="..."`).
//!
//! Year-less timestamps (syslog, klog) use the extractor's reference year (default: the current UTC
//! year, or the previous one if that would put the first line more than two days in the future);
//! a month going backwards by more than six months (Dec → Jan) advances the year.
//!
//! The stateful shapes (syslog, CRI, klog: they need the reference year) and the first-byte
//! dispatch are here; the stateless shapes are in `formats`.

use std::borrow::Cow;

use super::time;

mod formats;

pub use formats::logfmt_pairs;
use formats::{apache, epoch, hdfs, iso, json, logfmt, num2, plain, skip_brackets};

/// Normalised severity, ordered from least to most severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// trace
    Trace,
    /// debug
    Debug,
    /// info
    Info,
    /// notice
    Notice,
    /// warn / warning
    Warn,
    /// error / err / severe
    Error,
    /// crit / critical / alert
    Critical,
    /// fatal / emerg / panic
    Fatal,
}

impl Level {
    /// Lower-case name: "trace", "debug", "info", "notice", "warn", "error", "critical", "fatal".
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Notice => "notice",
            Level::Warn => "warn",
            Level::Error => "error",
            Level::Critical => "critical",
            Level::Fatal => "fatal",
        }
    }

    /// Recognise a level word (case-insensitive, surrounding `[]():` ignored), e.g. `ERROR`,
    /// `[warn]`, `Warning:`, `E` is NOT accepted (too ambiguous).
    pub fn parse(word: &str) -> Option<Level> {
        if word.len() < 3 || word.len() > 13 {
            return None;
        }
        // byte-wise trim of the punctuation around a level word (all ASCII, so `w` stays a str)
        let trim = |c: u8| {
            matches!(
                c,
                b'[' | b']' | b'(' | b')' | b':' | b'<' | b'>' | b'"' | b','
            )
        };
        let b = word.as_bytes();
        let mut s = 0;
        let mut e = b.len();
        while s < e && trim(b[s]) {
            s += 1;
        }
        while e > s && trim(b[e - 1]) {
            e -= 1;
        }
        let w = &word[s..e];
        if w.len() < 3 || w.len() > 13 {
            return None;
        }
        // quick reject on the first letter (most words of a line are not levels)
        if !matches!(
            w.as_bytes()[0] | 0x20,
            b't' | b'd' | b'i' | b'n' | b'w' | b'e' | b's' | b'c' | b'a' | b'f' | b'p'
        ) {
            return None;
        }
        let mut buf = [0u8; 13];
        for (i, c) in w.bytes().enumerate() {
            buf[i] = c.to_ascii_lowercase();
        }
        Some(match &buf[..w.len()] {
            b"trace" | b"trc" => Level::Trace,
            b"debug" | b"dbg" => Level::Debug,
            b"info" | b"inf" | b"informational" => Level::Info,
            b"notice" => Level::Notice,
            b"warn" | b"warning" | b"wrn" => Level::Warn,
            b"error" | b"err" | b"severe" => Level::Error,
            b"crit" | b"critical" | b"alert" => Level::Critical,
            b"fatal" | b"emerg" | b"emergency" | b"panic" => Level::Fatal,
            _ => return None,
        })
    }

    /// Syslog severity 0..=7 (RFC 5424 §6.2.1) to a level.
    pub fn from_syslog_severity(sev: u8) -> Level {
        match sev {
            0 => Level::Fatal,
            1 | 2 => Level::Critical,
            3 => Level::Error,
            4 => Level::Warn,
            5 => Level::Notice,
            6 => Level::Info,
            _ => Level::Debug,
        }
    }
}

/// Recognised line shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogFormat {
    /// RFC 3164 / 5424 syslog.
    Syslog,
    /// ISO-8601 timestamp prefix (generic).
    Iso8601,
    /// ISO timestamp + Log4j/Logback header.
    Log4j,
    /// Kubernetes CRI container log.
    KubernetesCri,
    /// Epoch number prefix.
    Epoch,
    /// Apache error log.
    Apache,
    /// HDFS / Hadoop `yyMMdd HHmmss pid LEVEL component:`.
    Hdfs,
    /// klog (Kubernetes components).
    Klog,
    /// JSON object per line.
    Json,
    /// logfmt key=value.
    Logfmt,
    /// A header layout learned from the paste itself (see [`super::header`]).
    Learned,
    /// Anything else.
    Plain,
}

impl LogFormat {
    /// Stable name used in `Extraction::format`.
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Syslog => "syslog",
            LogFormat::Iso8601 => "iso8601",
            LogFormat::Log4j => "log4j",
            LogFormat::KubernetesCri => "kubernetes-cri",
            LogFormat::Epoch => "epoch",
            LogFormat::Apache => "apache",
            LogFormat::Hdfs => "hdfs",
            LogFormat::Klog => "klog",
            LogFormat::Json => "json",
            LogFormat::Logfmt => "logfmt",
            LogFormat::Learned => "learned",
            LogFormat::Plain => "plain",
        }
    }
}

/// One parsed line: timestamp (epoch ns, UTC), level, message content.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedLine<'a> {
    /// Epoch nanoseconds, UTC.
    pub ts: Option<i64>,
    /// Parsed severity.
    pub level: Option<Level>,
    /// Message part of the line (header removed).
    pub content: Cow<'a, str>,
    /// Shape that parsed it.
    pub format: LogFormat,
}

/// Stateful line parser (keeps the syslog year and the preferred shape).
#[derive(Debug, Clone)]
pub struct LineParser {
    year: i32,
    year_checked: bool,
    last_month: u32,
    now_ns: Option<i64>,
}

impl Default for LineParser {
    fn default() -> Self {
        Self::new(None)
    }
}

impl LineParser {
    /// `year`: reference year for year-less timestamps; `None` = current UTC year (see module doc).
    pub fn new(year: Option<i32>) -> Self {
        match year {
            Some(y) => LineParser {
                year: y,
                year_checked: true,
                last_month: 0,
                now_ns: None,
            },
            None => {
                let now = jiff::Timestamp::now();
                let y: i32 = now.strftime("%Y").to_string().parse().unwrap_or(2000);
                LineParser {
                    year: y,
                    year_checked: false,
                    last_month: 0,
                    now_ns: i64::try_from(now.as_nanosecond()).ok(),
                }
            }
        }
    }

    fn yearless(&mut self, mo: u32, d: u32, sod: u32, nanos: u32) -> Option<i64> {
        if self.last_month != 0 && mo + 6 < self.last_month {
            self.year += 1;
        }
        self.last_month = mo;
        let mut ns =
            time::civil_to_ns(self.year as i64, mo, d, 0, 0, 0, nanos)? + sod as i64 * time::NS;
        if !self.year_checked {
            self.year_checked = true;
            if let Some(now) = self.now_ns
                && ns > now + 2 * 86_400 * time::NS
            {
                self.year -= 1;
                ns = time::civil_to_ns(self.year as i64, mo, d, 0, 0, 0, nanos)?
                    + sod as i64 * time::NS;
            }
        }
        Some(ns)
    }

    /// Epoch nanoseconds of a scanned [`time::Stamp`]: year-less stamps take the reference year
    /// (with the Dec → Jan roll-over of the module doc); a time of day alone gives `None`.
    pub fn stamp_ns(&mut self, st: time::Stamp) -> Option<i64> {
        match st {
            time::Stamp::Abs(ns) | time::Stamp::Date(ns) => Some(ns),
            time::Stamp::YearLess(mo, d, sod, nanos) => self.yearless(mo, d, sod, nanos),
            time::Stamp::TimeOfDay(_) => None,
        }
    }

    /// Parse with a preferred shape first, then the generic dispatcher.
    pub fn parse<'a>(&mut self, line: &'a str, preferred: Option<LogFormat>) -> ParsedLine<'a> {
        if let Some(f) = preferred
            && let Some(p) = self.parse_as(f, line)
        {
            return p;
        }
        self.parse_any(line)
    }

    /// Generic dispatch on the first byte.
    pub fn parse_any<'a>(&mut self, line: &'a str) -> ParsedLine<'a> {
        let b = line.as_bytes();
        let order: &[LogFormat] = match b.first() {
            Some(b'{') => &[LogFormat::Json],
            Some(b'[') => &[LogFormat::Apache],
            Some(b'<') => &[LogFormat::Syslog],
            Some(c) if c.is_ascii_digit() => &[
                LogFormat::KubernetesCri,
                LogFormat::Iso8601,
                LogFormat::Hdfs,
                LogFormat::Epoch,
            ],
            Some(b'I' | b'W' | b'E' | b'F') => {
                &[LogFormat::Klog, LogFormat::Syslog, LogFormat::Logfmt]
            }
            Some(c) if c.is_ascii_alphabetic() => &[LogFormat::Syslog, LogFormat::Logfmt],
            _ => &[],
        };
        for &f in order {
            if let Some(p) = self.parse_as(f, line) {
                return p;
            }
        }
        plain(line)
    }

    /// Parse as one given shape; `None` if the line does not have that shape.
    pub fn parse_as<'a>(&mut self, f: LogFormat, line: &'a str) -> Option<ParsedLine<'a>> {
        match f {
            LogFormat::Syslog => self.syslog(line),
            LogFormat::Iso8601 | LogFormat::Log4j => iso(line),
            LogFormat::KubernetesCri => self.cri(line),
            LogFormat::Epoch => epoch(line),
            LogFormat::Apache => apache(line),
            LogFormat::Hdfs => hdfs(line),
            LogFormat::Klog => self.klog(line),
            LogFormat::Json => json(line),
            LogFormat::Logfmt => logfmt(line),
            LogFormat::Plain | LogFormat::Learned => Some(plain(line)),
        }
    }

    fn syslog<'a>(&mut self, line: &'a str) -> Option<ParsedLine<'a>> {
        let b = line.as_bytes();
        let mut i = 0;
        let mut level = None;
        if b.first() == Some(&b'<') {
            // bytes, not str: the line may hold a multi-byte char within its first six bytes
            let end = b[..b.len().min(6)].iter().position(|&c| c == b'>')?;
            let pri: u16 = line[1..end].parse().ok()?;
            level = Some(Level::from_syslog_severity((pri % 8) as u8));
            i = end + 1;
            // RFC 5424: version digit + space + ISO timestamp.
            if b.get(i) == Some(&b'1') && b.get(i + 1) == Some(&b' ') {
                let (ns, used) = time::parse_iso(&b[i + 2..])?;
                let rest = &line[i + 2 + used..];
                // host app procid msgid
                let mut r = rest.trim_start();
                for _ in 0..4 {
                    r = r.split_once(' ').map(|x| x.1).unwrap_or("");
                }
                // structured data
                let r = if let Some(s) = r.strip_prefix("- ") {
                    s
                } else if r.starts_with('[') {
                    skip_brackets(r)
                } else {
                    r
                };
                return Some(ParsedLine {
                    ts: Some(ns),
                    level,
                    content: Cow::Borrowed(r.trim_start_matches('\u{feff}')),
                    format: LogFormat::Syslog,
                });
            }
        }
        let (ts, rest) = if let Some((mo, d, sod, nanos, used)) = time::parse_syslog(&b[i..]) {
            (self.yearless(mo, d, sod, nanos), &line[i + used..])
        } else if let Some((ns, used)) = time::parse_iso(&b[i..]) {
            if i == 0 {
                return None; // plain ISO lines are handled by `iso`
            }
            (Some(ns), &line[i + used..])
        } else {
            return None;
        };
        let rest = rest.strip_prefix(' ')?;
        // host
        let (_host, after_host) = rest.split_once(' ').unwrap_or((rest, ""));
        // tag: first token ending with ':' (e.g. `sshd[123]:`, `kernel:`, `sshd(pam_unix)[1]:`)
        let content = match after_host.split_once(' ') {
            Some((tag, msg)) if tag.ends_with(':') => msg,
            None if after_host.ends_with(':') => "",
            _ => after_host,
        };
        Some(ParsedLine {
            ts,
            level,
            content: Cow::Borrowed(content),
            format: LogFormat::Syslog,
        })
    }

    fn cri<'a>(&mut self, line: &'a str) -> Option<ParsedLine<'a>> {
        let (ns, used) = time::parse_iso(line.as_bytes())?;
        let rest = &line[used..];
        let rest = rest
            .strip_prefix(" stdout ")
            .or_else(|| rest.strip_prefix(" stderr "))?;
        let msg = rest
            .strip_prefix("F ")
            .or_else(|| rest.strip_prefix("P "))
            .or_else(|| (rest == "F" || rest == "P").then_some(""))?;
        let inner = self.parse_any(msg);
        Some(ParsedLine {
            ts: Some(ns),
            level: inner.level,
            content: inner.content,
            format: LogFormat::KubernetesCri,
        })
    }

    fn klog<'a>(&mut self, line: &'a str) -> Option<ParsedLine<'a>> {
        // Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg
        let b = line.as_bytes();
        let level = match b.first()? {
            b'I' => Level::Info,
            b'W' => Level::Warn,
            b'E' => Level::Error,
            b'F' => Level::Fatal,
            _ => return None,
        };
        if b.len() < 22 || !b[1..5].iter().all(u8::is_ascii_digit) || b[5] != b' ' {
            return None;
        }
        let mo = (b[1] - b'0') as u32 * 10 + (b[2] - b'0') as u32;
        let d = (b[3] - b'0') as u32 * 10 + (b[4] - b'0') as u32;
        let (h, mi, s) = (num2(&b[6..8])?, num2(&b[9..11])?, num2(&b[12..14])?);
        if b[8] != b':' || b[11] != b':' {
            return None;
        }
        let close = line.find("] ")?;
        let frac_ns = if b[14] == b'.' {
            let mut v = 0u32;
            let mut n = 0;
            for &c in b[15..].iter().take_while(|c| c.is_ascii_digit()) {
                if n < 9 {
                    v = v * 10 + (c - b'0') as u32;
                    n += 1;
                }
            }
            v * 10u32.pow(9 - n)
        } else {
            0
        };
        let ts = self.yearless(mo, d, h * 3600 + mi * 60 + s, frac_ns);
        Some(ParsedLine {
            ts,
            level: Some(level),
            content: Cow::Borrowed(&line[close + 2..]),
            format: LogFormat::Klog,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Option<i64> {
        Some(s.parse::<jiff::Timestamp>().unwrap().as_nanosecond() as i64)
    }

    fn p(line: &str) -> ParsedLine<'_> {
        LineParser::new(Some(2005)).parse_any(line)
    }

    #[test]
    fn classic_header_layouts() {
        let l = p(
            "Aug 21 09:12:44 lb-west-2 kbd(pam_env)[4410]: reading keymap took 12 ms; retries= 0",
        );
        assert_eq!(l.format, LogFormat::Syslog);
        assert_eq!(l.ts, ts("2005-08-21T09:12:44Z"));
        assert_eq!(l.content, "reading keymap took 12 ms; retries= 0");

        let l = p("[Wed Mar 09 13:05:51 2005] [error] proxy worker pool drained for backend 4");
        assert_eq!(
            (l.format, l.level, l.ts, l.content.as_ref()),
            (
                LogFormat::Apache,
                Some(Level::Error),
                ts("2005-03-09T13:05:51Z"),
                "proxy worker pool drained for backend 4"
            )
        );

        let l = p(
            "090314 071502 2231 INFO store.Replicator$Worker: Worker 3 finished copy of chunk chk_99120455 to rack r7",
        );
        assert_eq!(l.format, LogFormat::Hdfs);
        assert_eq!(l.level, Some(Level::Info));
        assert_eq!(l.ts, ts("2009-03-14T07:15:02Z"));
        assert_eq!(
            l.content,
            "Worker 3 finished copy of chunk chk_99120455 to rack r7"
        );

        let l = p(
            "2019-02-11 06:30:09,118 - INFO  [Elector[node=2]/0:0:0:0:0:0:0:0:7400:LeaderVote@212] - Vote round closed after: 1800",
        );
        assert_eq!(l.format, LogFormat::Log4j);
        assert_eq!(l.level, Some(Level::Info));
        assert_eq!(l.ts, ts("2019-02-11T06:30:09.118Z"));
        assert_eq!(l.content, "Vote round closed after: 1800");
    }

    #[test]
    fn modern_shapes() {
        let l = p(
            r#"{"time":"2024-05-01T10:00:00Z","level":"error","msg":"pool exhausted","error":"timeout"}"#,
        );
        assert_eq!(
            (l.format, l.level, l.ts),
            (
                LogFormat::Json,
                Some(Level::Error),
                ts("2024-05-01T10:00:00Z")
            )
        );
        assert_eq!(l.content, "pool exhausted error=timeout");

        let l = p(r#"ts=2024-05-01T10:00:01Z level=warn msg="slow \"query\"" duration=3s"#);
        assert_eq!(
            (l.format, l.level, l.ts),
            (
                LogFormat::Logfmt,
                Some(Level::Warn),
                ts("2024-05-01T10:00:01Z")
            )
        );
        assert_eq!(l.content, "slow \"query\"");

        let l = p(
            "2024-05-01T10:00:02.123456789Z stderr F 2024-05-01 10:00:02 ERROR [main] com.acme.Db - Connection refused",
        );
        assert_eq!(
            (l.format, l.level),
            (LogFormat::KubernetesCri, Some(Level::Error))
        );
        assert_eq!(l.ts, ts("2024-05-01T10:00:02.123456789Z"));
        assert_eq!(l.content, "Connection refused");

        let l = p("2024-05-01T10:00:03Z ERROR db: connection refused");
        assert_eq!(
            (l.format, l.level),
            (LogFormat::Iso8601, Some(Level::Error))
        );
        assert_eq!(l.content, "db: connection refused");

        let l = p("1714557600 WARN disk 91% full");
        assert_eq!(
            (l.format, l.level, l.ts),
            (
                LogFormat::Epoch,
                Some(Level::Warn),
                ts("2024-05-01T10:00:00Z")
            )
        );

        let l = p("E0501 10:00:04.000001   12345 controller.go:123] failed to sync pod");
        assert_eq!(
            (l.format, l.level, l.ts),
            (
                LogFormat::Klog,
                Some(Level::Error),
                ts("2005-05-01T10:00:04.000001Z")
            )
        );
        assert_eq!(l.content, "failed to sync pod");

        let l = p("<11>Jun 14 15:16:01 web nginx: upstream timed out");
        assert_eq!((l.format, l.level), (LogFormat::Syslog, Some(Level::Error)));
        assert_eq!(l.content, "upstream timed out");

        let l = p("ERROR: something broke");
        assert_eq!(
            (l.format, l.level, l.content.as_ref()),
            (LogFormat::Plain, Some(Level::Error), "something broke")
        );
    }

    #[test]
    fn year_rollover() {
        let mut lp = LineParser::new(Some(2023));
        let a = lp.parse_any("Dec 31 23:59:59 h p: a").ts.unwrap();
        let b = lp.parse_any("Jan  1 00:00:01 h p: b").ts.unwrap();
        assert_eq!(b - a, 2 * time::NS);
    }
}
