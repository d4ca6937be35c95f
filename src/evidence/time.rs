//! Timestamps in log lines and structured values. Layouts jiff reads are read by jiff: the
//! RFC 3339 / ISO 8601 date and clock ([`parse_iso`], through `jiff::fmt::temporal`), and the
//! strptime-style ones through `jiff::fmt::strtime` (`BrokenDownTime::parse_prefix`): ctime
//! (Apache), `yyMMdd HHmmss` (HDFS), `dd/Mon/yyyy:HH:mm:ss ±zzzz` (access logs) and
//! `dd Mon yyyy HH:mm:ss` (RFC 2822 dates, Redis). What jiff has no layout for stays small
//! explicit code here: the year-less syslog stamp (`Mon dd HH:MM:SS`, RFC 3164), the Loghub
//! shapes (`yyyy-mm-dd-HH.MM.SS.ffffff`, `yyyyMMdd-HH:mm:ss:SSS`, `MM-dd HH:mm:ss.SSS`, …),
//! epoch numbers, and [`scan_stamp`], which tells the layouts apart from the first bytes
//! without knowing the layout in advance (hot path: no regex, no allocation).
//!
//! All functions return nanoseconds since the Unix epoch (UTC) as `i64` plus the number of bytes
//! consumed, so the caller can continue parsing the rest of the line. A time without a zone is taken
//! as UTC. [`civil_to_ns`], the conversion the explicit layouts use, is Howard Hinnant's
//! `days_from_civil` (<https://howardhinnant.github.io/date_algorithms.html>): it costs a few
//! integer operations per line and keeps a day past the month's end rolling over, as a year
//! guessed for a year-less `Feb 29` needs.
//!
//! The layout scanner [`scan_stamp`] is in `scan`.

use jiff::fmt::strtime::BrokenDownTime;

mod scan;

pub use scan::{Stamp, scan_stamp};
use scan::{num, run_digits};

/// Nanoseconds per second.
pub const NS: i64 = 1_000_000_000;

/// Days since 1970-01-01 for a proleptic Gregorian date (Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Civil date/time (UTC) to epoch nanoseconds; `None` when a field is out of range.
pub fn civil_to_ns(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32, nanos: u32) -> Option<i64> {
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    if !(1678..=2261).contains(&y) {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + (h as i64) * 3600 + (mi as i64) * 60 + s as i64;
    Some(secs * NS + nanos as i64)
}

/// Convert epoch nanoseconds into a `jiff::Timestamp`.
pub fn to_timestamp(ns: i64) -> Option<jiff::Timestamp> {
    jiff::Timestamp::from_nanosecond(ns as i128).ok()
}

/// A jiff instant as epoch nanoseconds, when it fits an `i64` (1677 to 2262).
fn ns_of(ts: jiff::Timestamp) -> Option<i64> {
    i64::try_from(ts.as_nanosecond()).ok()
}

/// The strptime `format` read by jiff at the start of `b`: the instant (a time without a zone
/// is UTC) and the bytes read. With `date_only`, the format has no clock: midnight, UTC.
fn strtime_prefix(format: &str, b: &[u8], date_only: bool) -> Option<(i64, usize)> {
    let (tm, used) = BrokenDownTime::parse_prefix(format, b).ok()?;
    let datetime = if date_only {
        tm.to_date()
            .ok()?
            .to_datetime(jiff::civil::Time::midnight())
    } else {
        tm.to_datetime().ok()?
    };
    let offset = tm.offset().unwrap_or(jiff::tz::Offset::UTC);
    Some((ns_of(offset.to_timestamp(datetime).ok()?)?, used))
}

#[inline]
fn digits(b: &[u8], at: usize, n: usize) -> Option<u32> {
    if at + n > b.len() {
        return None;
    }
    let mut v = 0u32;
    for &c in &b[at..at + n] {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u32;
    }
    Some(v)
}

/// Month abbreviation (`Jan`..`Dec`, case-insensitive on the first three bytes) to 1..=12.
pub fn month_abbrev(b: &[u8]) -> Option<u32> {
    if b.len() < 3 {
        return None;
    }
    // one integer compare per month instead of byte-string matches
    let k = u32::from(b[0] | 0x20) << 16 | u32::from(b[1] | 0x20) << 8 | u32::from(b[2] | 0x20);
    const fn m(n: &[u8; 3]) -> u32 {
        (n[0] as u32) << 16 | (n[1] as u32) << 8 | n[2] as u32
    }
    const MONTHS: [u32; 12] = [
        m(b"jan"),
        m(b"feb"),
        m(b"mar"),
        m(b"apr"),
        m(b"may"),
        m(b"jun"),
        m(b"jul"),
        m(b"aug"),
        m(b"sep"),
        m(b"oct"),
        m(b"nov"),
        m(b"dec"),
    ];
    if !b[..3].iter().all(u8::is_ascii_alphabetic) {
        return None;
    }
    MONTHS.iter().position(|&x| x == k).map(|i| i as u32 + 1)
}

/// Fraction after `.` or `,`: returns (nanoseconds, bytes consumed including the separator).
fn fraction(b: &[u8], at: usize) -> (u32, usize) {
    if at < b.len() && (b[at] == b'.' || b[at] == b',') {
        let mut i = at + 1;
        let mut v: u64 = 0;
        let mut n = 0;
        while i < b.len() && b[i].is_ascii_digit() {
            if n < 9 {
                v = v * 10 + (b[i] - b'0') as u64;
                n += 1;
            }
            i += 1;
        }
        if i == at + 1 {
            return (0, 0);
        }
        while n < 9 {
            v *= 10;
            n += 1;
        }
        (v as u32, i - at)
    } else {
        (0, 0)
    }
}

/// ISO-8601 / RFC 3339 style: `YYYY-MM-DD[T ]HH:MM:SS[.frac|,frac][Z|±HH:MM|±HHMM]`; also accepts
/// `/` as the date separator (`2024/01/02 03:04:05`, nginx). Without a zone the time is UTC.
/// jiff reads the date and clock (`YYYY-MM-DDTHH:MM:SS`, the separators written as RFC 3339
/// has them); the fraction after a comma (log4j) and the zone forms RFC 3339 lacks are read here.
pub fn parse_iso(b: &[u8]) -> Option<(i64, usize)> {
    let mut head: [u8; 19] = b.get(..19)?.try_into().ok()?;
    let sep = head[4];
    if !matches!(sep, b'-' | b'/') || head[7] != sep || !matches!(head[10], b'T' | b't' | b' ') {
        return None;
    }
    (head[4], head[7], head[10]) = (b'-', b'-', b'T');
    let datetime = jiff::fmt::temporal::DateTimeParser::new()
        .parse_datetime(head)
        .ok()?;
    let mut i = 19;
    let (nanos, used) = fraction(b, i);
    i += used;
    let mut offset: i64 = 0;
    match b.get(i) {
        Some(b'Z') | Some(b'z') => i += 1,
        Some(&c) if c == b'+' || c == b'-' => {
            if let Some(oh) = digits(b, i + 1, 2) {
                let (om, used) = if b.get(i + 3) == Some(&b':') {
                    (digits(b, i + 4, 2), 6)
                } else {
                    (digits(b, i + 3, 2), 5)
                };
                if let Some(om) = om {
                    let sign = if c == b'-' { -1 } else { 1 };
                    offset = sign * (oh as i64 * 3600 + om as i64 * 60);
                    i += used;
                }
            }
        }
        _ => {}
    }
    let utc = jiff::tz::Offset::UTC.to_timestamp(datetime).ok()?;
    Some((ns_of(utc)? + nanos as i64 - offset * NS, i))
}

/// Year-less syslog (RFC 3164): `Mmm dd HH:MM:SS` (day may be space padded). Returns
/// (month, day, seconds-of-day, nanos, consumed); the caller supplies the year.
pub fn parse_syslog(b: &[u8]) -> Option<(u32, u32, u32, u32, usize)> {
    let mo = month_abbrev(b)?;
    if b.get(3) != Some(&b' ') {
        return None;
    }
    let mut i = 4;
    if b.get(i) == Some(&b' ') {
        i += 1;
    }
    let d = if let Some(d) = digits(b, i, 2) {
        i += 2;
        d
    } else {
        let d = digits(b, i, 1)?;
        i += 1;
        d
    };
    if b.get(i) != Some(&b' ') {
        return None;
    }
    i += 1;
    let h = digits(b, i, 2)?;
    let mi = digits(b, i + 3, 2)?;
    let s = digits(b, i + 6, 2)?;
    if b.get(i + 2) != Some(&b':') || b.get(i + 5) != Some(&b':') || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    i += 8;
    let (nanos, used) = fraction(b, i);
    Some((mo, d, h * 3600 + mi * 60 + s, nanos, i + used))
}

/// ctime style used by Apache 2.x error logs: `Www Mmm dd HH:MM:SS[.uuuuuu] YYYY`, read by jiff
/// (`%b %e %H:%M:%S%.f %Y` after the weekday, which is not checked against the date).
pub fn parse_ctime(b: &[u8]) -> Option<(i64, usize)> {
    if b.len() < 24 || b[3] != b' ' || b.get(4).is_some_and(u8::is_ascii_whitespace) {
        return None;
    }
    let (ns, used) = strtime_prefix("%b %e %H:%M:%S%.f %Y", &b[4..], false)?;
    // The year is four digits, as ctime writes it.
    if run_digits(b, 4 + used - 4) != 4 {
        return None;
    }
    Some((ns, 4 + used))
}

/// HDFS / Hadoop short form: `yyMMdd HHmmss` (years 2000-2099), read by jiff
/// (`%y%m%d %H%M%S`; the two-digit year is always of this century here).
pub fn parse_yymmdd(b: &[u8]) -> Option<(i64, usize)> {
    if run_digits(b, 0) != 6 || b.get(6) != Some(&b' ') || run_digits(b, 7) != 6 {
        return None;
    }
    if b.get(13).is_some_and(|c| !c.is_ascii_whitespace()) {
        return None;
    }
    let (mut tm, used) = BrokenDownTime::parse_prefix("%y%m%d %H%M%S", b).ok()?;
    let year = 2000 + i16::try_from(num(b, 0, 2)).ok()?;
    tm.set_year(Some(year)).ok()?;
    let datetime = tm.to_datetime().ok()?;
    let utc = jiff::tz::Offset::UTC.to_timestamp(datetime).ok()?;
    (used == 13).then_some((ns_of(utc)?, used))
}

/// Epoch number at the start of a line: 10 digits = seconds (optional fraction), 13 = ms,
/// 16 = µs, 19 = ns. Must be followed by whitespace or end. Plausible range 2001-2286.
pub fn parse_epoch_prefix(b: &[u8]) -> Option<(i64, usize)> {
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let n = i;
    let v: i64 = std::str::from_utf8(&b[..n]).ok()?.parse().ok()?;
    let (ns, consumed) = match n {
        10 => {
            let (nanos, used) = fraction(b, n);
            (v.checked_mul(NS)? + nanos as i64, n + used)
        }
        13 => (v.checked_mul(1_000_000)?, n),
        16 => (v.checked_mul(1_000)?, n),
        19 => (v, n),
        _ => return None,
    };
    if b.get(consumed).is_some_and(|c| !c.is_ascii_whitespace()) {
        return None;
    }
    if ns < 1_000_000_000 * NS {
        return None;
    }
    Some((ns, consumed))
}

/// Parse any timestamp value found in structured data (JSON/logfmt/CSV): RFC 3339 / ISO string,
/// `YYYY-MM-DD HH:MM:SS`, an RFC 2822 date (`Tue, 1 Jul 2003 10:52:37 +0200`, by jiff), or an
/// epoch number (seconds, or ms/µs/ns judged by magnitude).
pub fn parse_any(s: &str) -> Option<i64> {
    let s = s.trim().trim_matches('"');
    if let Some((ns, _)) = parse_iso(s.as_bytes()) {
        return Some(ns);
    }
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return ns_of(ts);
    }
    if let Ok(ts) = jiff::fmt::rfc2822::DateTimeParser::new().parse_timestamp(s) {
        return ns_of(ts);
    }
    let v: f64 = s.parse().ok()?;
    epoch_number_to_ns(v)
}

/// Epoch number of unknown unit to ns, judged by magnitude: < 1e11 seconds, < 1e14 ms, < 1e17 µs,
/// else ns.
pub fn epoch_number_to_ns(v: f64) -> Option<i64> {
    if !v.is_finite() || v <= 0.0 {
        return None;
    }
    let ns = if v < 1e11 {
        v * 1e9
    } else if v < 1e14 {
        v * 1e6
    } else if v < 1e17 {
        v * 1e3
    } else {
        v
    };
    if ns > 9.2e18 {
        return None;
    }
    Some(ns as i64)
}

/// Render epoch nanoseconds as `YYYY-MM-DD HH:MM` UTC (for statements).
pub fn fmt_minute(ns: i64) -> String {
    match to_timestamp(ns) {
        Some(ts) => ts.strftime("%Y-%m-%d %H:%M").to_string(),
        None => String::from("?"),
    }
}

/// An instant as statements write it: `2026-06-02 09:14 UTC` (minutes; epoch nanoseconds in).
/// Pages show it in the viewer's zone through [`mentions`].
pub fn fmt_instant(ns: i64) -> String {
    format!("{} UTC", fmt_minute(ns))
}

/// A time window as statements write it, from epoch nanoseconds: `2026-06-02 09:00 → 09:40
/// UTC` within one day, `2026-06-02 23:50 → 2026-06-03 00:10 UTC` across midnight, `since
/// 2026-06-02 09:00 UTC` without an end. Pages show it in the viewer's zone through
/// [`mentions`].
pub fn fmt_window(first: i64, last: Option<i64>) -> String {
    let a = fmt_minute(first);
    match last {
        None => format!("since {a} UTC"),
        Some(last) => {
            let b = fmt_minute(last);
            let b = if a.get(..10) == b.get(..10) {
                b.get(11..).unwrap_or(&b).to_string()
            } else {
                b
            };
            format!("{a} → {b} UTC")
        }
    }
}

/// An instant or window written by [`fmt_instant`] or [`fmt_window`], found in a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeMention {
    /// Byte range of the mention in the text, `UTC` included.
    pub range: std::ops::Range<usize>,
    /// Written with `since` (a window without an end).
    pub since: bool,
    /// The instant, or the window's start.
    pub start: jiff::Timestamp,
    /// The window's end, when it has one.
    pub end: Option<jiff::Timestamp>,
}

/// Mentions of instants and windows in `text` in the forms [`fmt_instant`] and [`fmt_window`]
/// write, in order. Statements are stored with UTC times (the export and the model read them as
/// they are); a page rewrites each mention in its viewer's zone.
pub fn mentions(text: &str) -> Vec<TimeMention> {
    static MENTION: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(since )?(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2})(?: → (\d{4}-\d{2}-\d{2} )?(\d{2}:\d{2}))? UTC\b",
        )
        .unwrap_or_else(|e| unreachable!("the mention pattern is valid: {e}"))
    });
    let at = |date: &str, hm: &str| -> Option<jiff::Timestamp> {
        let civil: jiff::civil::DateTime = format!("{date}T{hm}:00").parse().ok()?;
        civil
            .to_zoned_datetime(jiff::tz::TimeZone::UTC)
            .ok()
            .map(|z| z.timestamp())
    };
    MENTION
        .captures_iter(text)
        .filter_map(|c| {
            let whole = c.get(0)?;
            let date = c.get(2)?.as_str();
            let start = at(date, c.get(3)?.as_str())?;
            let end = match c.get(5) {
                Some(hm) => {
                    let end_date = c.get(4).map_or(date, |d| d.as_str().trim_end());
                    Some(at(end_date, hm.as_str())?)
                }
                None => None,
            };
            Some(TimeMention {
                range: whole.range(),
                since: c.get(1).is_some(),
                start,
                end,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_written_and_found_again() {
        let nine = 1_780_390_800 * NS; // 2026-06-02 09:00 UTC
        let w = fmt_window(nine, Some(nine + 40 * 60 * NS));
        assert_eq!(w, "2026-06-02 09:00 → 09:40 UTC");
        let night = fmt_window(
            nine + 14 * 3600 * NS + 50 * 60 * NS,
            Some(nine + 15 * 3600 * NS + 10 * 60 * NS),
        );
        assert_eq!(night, "2026-06-02 23:50 → 2026-06-03 00:10 UTC");
        let open = fmt_window(nine, None);
        assert_eq!(open, "since 2026-06-02 09:00 UTC");
        let text = format!(
            "12 lines, {w}, and later {night}; alert {open}; first at {}.",
            fmt_instant(nine)
        );
        let found = mentions(&text);
        assert_eq!(found.len(), 4);
        assert_eq!(&text[found[0].range.clone()], w);
        assert_eq!(found[0].start.as_second(), 1_780_390_800);
        assert_eq!(
            found[0].end.map(|e| e.as_second()),
            Some(1_780_390_800 + 2400)
        );
        assert_eq!(&text[found[1].range.clone()], night);
        assert_eq!(
            found[1].end.map(|e| e.as_second()),
            Some(1_780_390_800 + 15 * 3600 + 600)
        );
        assert!(found[2].since && found[2].end.is_none());
        assert_eq!(&text[found[3].range.clone()], "2026-06-02 09:00 UTC");
        assert!(mentions("deploy 2026-06-02 at 09:00 in UTC+2").is_empty());
    }

    fn ts(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>().unwrap().as_nanosecond() as i64
    }

    #[test]
    fn iso_variants() {
        assert_eq!(
            parse_iso(b"2015-07-29 17:41:44,747 - INFO").unwrap(),
            (ts("2015-07-29T17:41:44.747Z"), 23)
        );
        assert_eq!(
            parse_iso(b"2024-03-01T10:00:00.5+02:00 x").unwrap().0,
            ts("2024-03-01T08:00:00.5Z")
        );
        assert_eq!(
            parse_iso(b"2024/03/01 10:00:00 [error]").unwrap().0,
            ts("2024-03-01T10:00:00Z")
        );
        assert!(parse_iso(b"2024-13-01T10:00:00Z").is_none());
        assert!(parse_iso(b"hello").is_none());
    }

    #[test]
    fn scanned_layouts() {
        let abs = |s: &[u8]| match scan_stamp(s) {
            Some((Stamp::Abs(ns), used)) => Some((ns, used)),
            _ => None,
        };
        assert_eq!(
            abs(b"2021-04-13 19:02:57, Info"),
            Some((ts("2021-04-13T19:02:57Z"), 19))
        );
        assert_eq!(
            abs(b"2011-10-22-08.14.06.031975 n17"),
            Some((ts("2011-10-22T08:14:06.031975Z"), 26))
        );
        assert_eq!(
            abs(b"19/03/27 05:48:12 INFO"),
            Some((ts("2019-03-27T05:48:12Z"), 17))
        );
        assert_eq!(
            abs(b"20220705-13:41:08:372|Sync"),
            Some((ts("2022-07-05T13:41:08.372Z"), 21))
        );
        assert_eq!(
            abs(b"1362034670 2013.02.28 x"),
            Some((1_362_034_670 * NS, 10))
        );
        assert_eq!(
            abs(b"10/Oct/2000:13:55:36 -0700 \"GET"),
            Some((ts("2000-10-10T20:55:36Z"), 26))
        );
        assert_eq!(
            abs(b"7 Mar 2031 22:05:01.250 * saved"),
            Some((ts("2031-03-07T22:05:01.25Z"), 23))
        );
        assert_eq!(
            scan_stamp(b"17 Aug 2030 shipped"),
            Some((Stamp::Date(ts("2030-08-17T00:00:00Z")), 11))
        );
        assert_eq!(
            scan_stamp(b"2013.02.28 host9"),
            Some((Stamp::Date(ts("2013-02-28T00:00:00Z")), 10))
        );
        assert_eq!(
            scan_stamp(b"11-04 09:27:51.406  3318"),
            Some((
                Stamp::YearLess(11, 4, 9 * 3600 + 27 * 60 + 51, 406_000_000),
                18
            ))
        );
        assert_eq!(
            scan_stamp(b"16:49:06] chrome"),
            Some((Stamp::TimeOfDay(16 * 3600 + 49 * 60 + 6), 8))
        );
        for not_time in [
            &b"1.2.3.4 x"[..],
            b"12345 x",
            b"v2 x",
            b"2024-13-01 x",
            b"42 apples",
            b"3 Marbles 2030",
            b"12 Jun 99",
        ] {
            assert_eq!(
                scan_stamp(not_time),
                None,
                "{:?}",
                std::str::from_utf8(not_time)
            );
        }
    }

    #[test]
    fn structured_values_may_be_rfc_2822_dates_and_impossible_dates_are_not_times() {
        assert_eq!(
            parse_any("Tue, 1 Jul 2003 10:52:37 +0200"),
            Some(ts("2003-07-01T08:52:37Z"))
        );
        assert_eq!(parse_any("not a date"), None);
        assert!(parse_iso(b"2023-02-30T10:00:00Z").is_none());
        assert_eq!(
            parse_ctime(b"Sun Dec 04 04:47:44.250 2005 x").unwrap(),
            (ts("2005-12-04T04:47:44.25Z"), 28)
        );
        assert!(parse_ctime(b"Sun Dec 04 04:47:44 05 in the log").is_none());
    }

    #[test]
    fn other_shapes() {
        let (mo, d, sod, _, used) = parse_syslog(b"Jun  9 06:06:20 edge4").unwrap();
        assert_eq!((mo, d, sod, used), (6, 9, 6 * 3600 + 6 * 60 + 20, 15));
        assert_eq!(
            parse_ctime(b"Wed Mar 09 13:05:51 2005] x").unwrap(),
            (ts("2005-03-09T13:05:51Z"), 24)
        );
        assert_eq!(
            parse_yymmdd(b"081109 203615 148 INFO").unwrap(),
            (ts("2008-11-09T20:36:15Z"), 13)
        );
        assert_eq!(
            parse_epoch_prefix(b"1700000000.25 hello").unwrap(),
            (1_700_000_000 * NS + 250_000_000, 13)
        );
        assert_eq!(
            parse_epoch_prefix(b"1700000000123 x").unwrap().0,
            1_700_000_000_123_000_000
        );
        assert!(parse_epoch_prefix(b"12345 x").is_none());
        assert_eq!(parse_any("1420452191104"), Some(1_420_452_191_104_000_000));
        assert_eq!(
            parse_any("2021-10-12T09:51:03.157076+02:00"),
            Some(ts("2021-10-12T07:51:03.157076Z"))
        );
    }
}
