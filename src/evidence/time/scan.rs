//! [`scan_stamp`]: a timestamp at the start of a line in any layout it knows, told apart from
//! the first bytes (hot path: no regex, no allocation).

use super::*;

/// A timestamp found by [`scan_stamp`], before a year is supplied for year-less layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    /// Absolute epoch nanoseconds (full date and time, or epoch seconds/ms/µs/ns).
    Abs(i64),
    /// Month, day, seconds of day and nanoseconds without a year (`Jun 14 15:16:01`,
    /// `11-04 09:27:51.406`, `07.14 22:03:19`).
    YearLess(u32, u32, u32, u32),
    /// A calendar date alone (`2013.02.28`): epoch nanoseconds of its midnight, UTC.
    Date(i64),
    /// A time of day alone (`16:49:06`): seconds of day.
    TimeOfDay(u32),
}

impl Stamp {
    /// How much of an instant the stamp pins down (higher = more): full instant 3, year-less 2,
    /// date 1, time of day 0.
    pub fn precision(self) -> u8 {
        match self {
            Stamp::Abs(_) => 3,
            Stamp::YearLess(..) => 2,
            Stamp::Date(_) => 1,
            Stamp::TimeOfDay(_) => 0,
        }
    }
}

#[inline]
pub(super) fn run_digits(b: &[u8], at: usize) -> usize {
    let mut i = at;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i - at
}

#[inline]
pub(super) fn num(b: &[u8], at: usize, n: usize) -> u32 {
    b[at..at + n].iter().fold(0u32, |v, &c| {
        v.wrapping_mul(10).wrapping_add((c - b'0') as u32)
    })
}

/// A byte that may follow a timestamp: whitespace, end, or closing punctuation of a header field.
#[inline]
pub(super) fn boundary(b: &[u8], at: usize) -> bool {
    match b.get(at) {
        None => true,
        Some(c) => c.is_ascii_whitespace() || matches!(c, b'|' | b',' | b']' | b')' | b';' | b'>'),
    }
}

/// `HH:MM:SS` or `HH.MM.SS` (or `HHMMSS` when `compact`), then an optional fraction after `.`, `,`
/// or `:` (1-9 digits) and an optional zone (`Z`, `±HH:MM`, `±HHMM`). Returns (seconds of day,
/// nanos, zone offset seconds, bytes).
pub(super) fn scan_clock(b: &[u8], at: usize, compact: bool) -> Option<(u32, u32, i64, usize)> {
    let (h, mi, s, mut i) = if compact && run_digits(b, at) == 6 {
        (num(b, at, 2), num(b, at + 2, 2), num(b, at + 4, 2), at + 6)
    } else {
        if run_digits(b, at) != 2 {
            return None;
        }
        let sep = *b.get(at + 2)?;
        if sep != b':' && sep != b'.' {
            return None;
        }
        if run_digits(b, at + 3) != 2 || b.get(at + 5) != Some(&sep) || run_digits(b, at + 6) != 2 {
            return None;
        }
        (num(b, at, 2), num(b, at + 3, 2), num(b, at + 6, 2), at + 8)
    };
    if h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut nanos = 0;
    if matches!(b.get(i), Some(b'.' | b',' | b':')) {
        let n = run_digits(b, i + 1);
        if (1..=9).contains(&n) {
            let mut v = num(b, i + 1, n);
            for _ in n..9 {
                v *= 10;
            }
            nanos = v;
            i += 1 + n;
        }
    }
    let mut offset = 0i64;
    match b.get(i) {
        Some(b'Z' | b'z') => i += 1,
        Some(&c @ (b'+' | b'-')) if run_digits(b, i + 1) >= 2 => {
            let oh = num(b, i + 1, 2) as i64;
            let (om, used) = if b.get(i + 3) == Some(&b':') && run_digits(b, i + 4) == 2 {
                (num(b, i + 4, 2) as i64, 6)
            } else if run_digits(b, i + 1) == 4 {
                (num(b, i + 3, 2) as i64, 5)
            } else {
                (0, 3)
            };
            let sign = if c == b'-' { -1 } else { 1 };
            offset = sign * (oh * 3600 + om * 60);
            i += used;
        }
        _ => {}
    }
    Some((h * 3600 + mi * 60 + s, nanos, offset, i - at))
}

pub(super) fn plausible_year(y: u32) -> bool {
    (1970..=2100).contains(&y)
}

/// Date then an optional clock (after `T`, ` `, `-`, `_` or `:`) starting at `at`.
pub(super) fn date_then_clock(
    b: &[u8],
    y: u32,
    mo: u32,
    d: u32,
    at: usize,
) -> Option<(Stamp, usize)> {
    if !plausible_year(y) || !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    if let Some(&sep) = b.get(at)
        && matches!(sep, b'T' | b't' | b' ' | b'-' | b'_' | b':')
        && let Some((sod, nanos, off, used)) = scan_clock(b, at + 1, sep != b':')
        && boundary(b, at + 1 + used)
    {
        let ns = civil_to_ns(y as i64, mo, d, 0, 0, 0, nanos)? + sod as i64 * NS - off * NS;
        return Some((Stamp::Abs(ns), at + 1 + used));
    }
    if boundary(b, at) {
        return Some((Stamp::Date(civil_to_ns(y as i64, mo, d, 0, 0, 0, 0)?), at));
    }
    None
}

/// Find a timestamp at the start of `b` in any common layout, without knowing the layout in
/// advance. Recognised: ISO 8601 / RFC 3339 (`T` or space, `.`/`,` fraction, zone), `yyyy.mm.dd`
/// and `yyyy/mm/dd` dates with or without a clock, `yyyy-mm-dd-HH.MM.SS.ffffff`, `yyyyMMdd`
/// (+ `-HH:mm:ss:SSS` or `HHmmss`), `yy/MM/dd HH:mm:ss`, `yyMMdd HHmmss`, `MM/dd/yyyy` and
/// `dd/MM/yyyy` (day > 12), `dd/Mon/yyyy:HH:mm:ss ±zzzz`, `dd Mon yyyy HH:mm:ss[.SSS]`, year-less `MM-dd HH:mm:ss[.SSS]` and
/// `MM.dd HH:mm:ss`, syslog `Mon dd HH:MM:SS`, ctime `Www Mon dd HH:MM:SS yyyy`, a clock alone,
/// and epoch seconds (10 digits, optional fraction), ms (13), µs (16), ns (19) between 2001 and
/// 2100. The stamp must end at whitespace, the end, or `|,]);>`. Returns the stamp and the
/// bytes used. No allocation.
pub fn scan_stamp(b: &[u8]) -> Option<(Stamp, usize)> {
    let c0 = *b.first()?;
    if c0.is_ascii_alphabetic() {
        if let Some((ns, used)) = parse_ctime(b)
            && boundary(b, used)
        {
            return Some((Stamp::Abs(ns), used));
        }
        let (mo, d, sod, nanos, used) = parse_syslog(b)?;
        if !boundary(b, used) {
            return None;
        }
        return Some((Stamp::YearLess(mo, d, sod, nanos), used));
    }
    if !c0.is_ascii_digit() {
        return None;
    }
    let n1 = run_digits(b, 0);
    let next = b.get(n1).copied();
    match n1 {
        4 => {
            let y = num(b, 0, 4);
            let sep = next?;
            if !matches!(sep, b'-' | b'/' | b'.') {
                return None;
            }
            let n2 = run_digits(b, 5);
            if !(1..=2).contains(&n2) || b.get(5 + n2) != Some(&sep) {
                return None;
            }
            let n3 = run_digits(b, 6 + n2);
            if !(1..=2).contains(&n3) {
                return None;
            }
            date_then_clock(b, y, num(b, 5, n2), num(b, 6 + n2, n3), 6 + n2 + n3)
        }
        8 => {
            let (y, mo, d) = (num(b, 0, 4), num(b, 4, 2), num(b, 6, 2));
            date_then_clock(b, y, mo, d, 8)
        }
        14 => {
            let (y, mo, d) = (num(b, 0, 4), num(b, 4, 2), num(b, 6, 2));
            let (sod, _, _, _) = scan_clock(b, 8, true)?;
            if !plausible_year(y) || !boundary(b, 14) {
                return None;
            }
            let ns = civil_to_ns(y as i64, mo, d, 0, 0, 0, 0)? + sod as i64 * NS;
            Some((Stamp::Abs(ns), 14))
        }
        6 if next == Some(b' ') => {
            let (ns, used) = parse_yymmdd(b)?;
            Some((Stamp::Abs(ns), used))
        }
        10 | 13 | 16 | 19 => {
            let (ns, used) = parse_epoch_prefix(b)?;
            if ns > 4_102_444_800 * NS {
                return None;
            }
            Some((Stamp::Abs(ns), used))
        }
        1 | 2 => scan_day_or_month_first(b, n1),
        _ => None,
    }
}

/// [`scan_stamp`] for a stamp that starts with one or two digits: `dd Mon yyyy`, a clock alone,
/// slashed dates, `dd-MM-yyyy` / `dd.MM.yyyy` and year-less `MM-dd` / `MM.dd`.
pub(super) fn scan_day_or_month_first(b: &[u8], n1: usize) -> Option<(Stamp, usize)> {
    let next = b.get(n1).copied();
    let g1 = num(b, 0, n1);
    match next? {
        // dd Mon yyyy [HH:MM:SS[.fff]] (RFC 2822 dates, Redis, HTTP dates), read by jiff; other
        // clocks after the date (a comma fraction, a glued zone) like any other date's
        b' ' => {
            let mo = month_abbrev(b.get(n1 + 1..)?)?;
            if b.get(n1 + 4) != Some(&b' ') || run_digits(b, n1 + 5) != 4 {
                return None;
            }
            let y = num(b, n1 + 5, 4);
            if b.get(n1 + 9) == Some(&b' ')
                && run_digits(b, n1 + 10) == 2
                && let Some((ns, used)) = strtime_prefix("%e %b %Y %H:%M:%S%.f", b, false)
                && boundary(b, used)
            {
                return plausible_year(y).then_some((Stamp::Abs(ns), used));
            }
            date_then_clock(b, y, mo, g1, n1 + 9)
        }
        b':' => {
            if n1 != 2 {
                return None;
            }
            let (sod, _, _, used) = scan_clock(b, 0, false)?;
            boundary(b, used).then_some((Stamp::TimeOfDay(sod), used))
        }
        b'/' => scan_slashed(b, n1, g1),
        sep @ (b'-' | b'.') => {
            let at2 = n1 + 1;
            let n2 = run_digits(b, at2);
            if n2 != 2 {
                return None;
            }
            let g2 = num(b, at2, 2);
            let after = at2 + 2;
            if b.get(after) == Some(&sep) {
                // dd-MM-yyyy / dd.MM.yyyy
                if run_digits(b, after + 1) != 4 {
                    return None;
                }
                return date_then_clock(b, num(b, after + 1, 4), g2, g1, after + 5);
            }
            if b.get(after) != Some(&b' ') || !(1..=12).contains(&g1) || !(1..=31).contains(&g2) {
                return None;
            }
            let (sod, nanos, _, used) = scan_clock(b, after + 1, false)?;
            let end = after + 1 + used;
            boundary(b, end).then_some((Stamp::YearLess(g1, g2, sod, nanos), end))
        }
        _ => None,
    }
}

/// [`scan_stamp`] for `g1/…`: `dd/Mon/yyyy:HH:mm:ss ±zzzz`, `MM/dd/yyyy` or `dd/MM/yyyy`
/// (day > 12) and `yy/MM/dd`.
pub(super) fn scan_slashed(b: &[u8], n1: usize, g1: u32) -> Option<(Stamp, usize)> {
    let at2 = n1 + 1;
    if let Some(mo) = month_abbrev(&b[at2.min(b.len())..])
        && b.get(at2 + 3) == Some(&b'/')
        && run_digits(b, at2 + 4) == 4
    {
        // dd/Mon/yyyy:HH:mm:ss ±zzzz (access logs), read by jiff; without the zone (or with a
        // fraction or a glued zone) it is a date and clock like any other.
        if let Some((ns, used)) = strtime_prefix("%d/%b/%Y:%H:%M:%S%.f %z", b, false)
            && b.get(used - 5).is_some_and(|c| matches!(c, b'+' | b'-'))
            && boundary(b, used)
        {
            return plausible_year(num(b, at2 + 4, 4)).then_some((Stamp::Abs(ns), used));
        }
        return date_then_clock(b, num(b, at2 + 4, 4), mo, g1, at2 + 8);
    }
    let n2 = run_digits(b, at2);
    if n2 != 2 && n2 != 1 || b.get(at2 + n2) != Some(&b'/') {
        return None;
    }
    let g2 = num(b, at2, n2);
    let at3 = at2 + n2 + 1;
    let n3 = run_digits(b, at3);
    match n3 {
        4 => {
            let y = num(b, at3, 4);
            let (mo, d) = if g1 > 12 { (g2, g1) } else { (g1, g2) };
            date_then_clock(b, y, mo, d, at3 + 4)
        }
        2 if n1 == 2 => date_then_clock(b, 2000 + g1, g2, num(b, at3, 2), at3 + 2),
        _ => None,
    }
}
