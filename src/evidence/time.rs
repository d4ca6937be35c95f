//! Hand-written timestamp parsers for the common log shapes (hot path: no regex, no allocation).
//!
//! All functions return nanoseconds since the Unix epoch (UTC) as `i64` plus the number of bytes
//! consumed, so the caller can continue parsing the rest of the line. A time without a zone is taken
//! as UTC. Conversion from a civil date uses Howard Hinnant's `days_from_civil` algorithm
//! (<https://howardhinnant.github.io/date_algorithms.html>).

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
    let m = [
        b[0].to_ascii_lowercase(),
        b[1].to_ascii_lowercase(),
        b[2].to_ascii_lowercase(),
    ];
    Some(match &m {
        b"jan" => 1,
        b"feb" => 2,
        b"mar" => 3,
        b"apr" => 4,
        b"may" => 5,
        b"jun" => 6,
        b"jul" => 7,
        b"aug" => 8,
        b"sep" => 9,
        b"oct" => 10,
        b"nov" => 11,
        b"dec" => 12,
        _ => return None,
    })
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
pub fn parse_iso(b: &[u8]) -> Option<(i64, usize)> {
    let y = digits(b, 0, 4)?;
    let sep = *b.get(4)?;
    if sep != b'-' && sep != b'/' {
        return None;
    }
    let mo = digits(b, 5, 2)?;
    if b.get(7) != Some(&sep) {
        return None;
    }
    let d = digits(b, 8, 2)?;
    let t = *b.get(10)?;
    if t != b'T' && t != b' ' && t != b't' {
        return None;
    }
    let h = digits(b, 11, 2)?;
    if b.get(13) != Some(&b':') {
        return None;
    }
    let mi = digits(b, 14, 2)?;
    if b.get(16) != Some(&b':') {
        return None;
    }
    let s = digits(b, 17, 2)?;
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
    let ns = civil_to_ns(y as i64, mo, d, h, mi, s, nanos)?;
    Some((ns - offset * NS, i))
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

/// ctime style used by Apache 2.x error logs: `Www Mmm dd HH:MM:SS[.uuuuuu] YYYY`.
pub fn parse_ctime(b: &[u8]) -> Option<(i64, usize)> {
    if b.len() < 24 || b[3] != b' ' {
        return None;
    }
    let (mo, d, sod, nanos, used) = parse_syslog(&b[4..])?;
    let i = 4 + used;
    if b.get(i) != Some(&b' ') {
        return None;
    }
    let y = digits(b, i + 1, 4)?;
    let ns = civil_to_ns(y as i64, mo, d, 0, 0, 0, nanos)? + sod as i64 * NS;
    Some((ns, i + 5))
}

/// HDFS / Hadoop short form: `yyMMdd HHmmss` (years 2000-2099).
pub fn parse_yymmdd(b: &[u8]) -> Option<(i64, usize)> {
    let y = digits(b, 0, 2)?;
    let mo = digits(b, 2, 2)?;
    let d = digits(b, 4, 2)?;
    if b.get(6) != Some(&b' ') {
        return None;
    }
    let h = digits(b, 7, 2)?;
    let mi = digits(b, 9, 2)?;
    let s = digits(b, 11, 2)?;
    if b.get(13).is_some_and(|c| !c.is_ascii_whitespace()) {
        return None;
    }
    Some((civil_to_ns(2000 + y as i64, mo, d, h, mi, s, 0)?, 13))
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
/// `YYYY-MM-DD HH:MM:SS`, or an epoch number (seconds, or ms/µs/ns judged by magnitude).
pub fn parse_any(s: &str) -> Option<i64> {
    let s = s.trim().trim_matches('"');
    if let Some((ns, _)) = parse_iso(s.as_bytes()) {
        return Some(ns);
    }
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return i64::try_from(ts.as_nanosecond()).ok();
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

/// Render epoch nanoseconds as `HH:MM` UTC.
pub fn fmt_hm(ns: i64) -> String {
    match to_timestamp(ns) {
        Some(ts) => ts.strftime("%H:%M").to_string(),
        None => String::from("?"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn other_shapes() {
        let (mo, d, sod, _, used) = parse_syslog(b"Jun  9 06:06:20 combo").unwrap();
        assert_eq!((mo, d, sod, used), (6, 9, 6 * 3600 + 6 * 60 + 20, 15));
        assert_eq!(
            parse_ctime(b"Sun Dec 04 04:47:44 2005] x").unwrap(),
            (ts("2005-12-04T04:47:44Z"), 24)
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
