//! RFC 3339 timestamps: parsing to an instant, and the UTC text written for
//! PostgreSQL.
//!
//! Accepted: `YYYY-MM-DD(T|t| )HH:MM:SS[.fraction](Z|z|±HH:MM)`, seconds up to
//! 60 (a leap second counts as the next minute's first second, as in
//! PostgreSQL). Instants compare at nanosecond precision (more fraction digits
//! are ignored); the text written keeps microseconds (truncated), which is what
//! `timestamptz` stores. Instants before `0001-01-01T00:00:00Z` or after
//! `9999-12-31T23:59:59.999999Z` are refused (PostgreSQL and Python cannot both
//! represent them).

use std::fmt::Write;

/// Nanoseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(pub i128);

const NANOS_PER_SEC: i128 = 1_000_000_000;
/// 0001-01-01T00:00:00Z and 10000-01-01T00:00:00Z, in seconds since the epoch.
const MIN_SECS: i128 = -62_135_596_800;
const END_SECS: i128 = 253_402_300_800;

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `(year, month, day)` of a day number (inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn digits(b: &[u8], at: usize, n: usize) -> Option<i64> {
    let part = b.get(at..at + n)?;
    part.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

/// Parses an RFC 3339 timestamp; `None` when it is not one or out of range.
pub fn parse_rfc3339(s: &str) -> Option<Instant> {
    let b = s.as_bytes();
    let year = digits(b, 0, 4)?;
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let hour = digits(b, 11, 2)?;
    let minute = digits(b, 14, 2)?;
    let second = digits(b, 17, 2)?;
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut nanos: i128 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + i128::from(b[i] - b'0');
            }
            i += 1;
        }
        let n = i - start;
        if n == 0 {
            return None;
        }
        for _ in n..9 {
            nanos *= 10;
        }
    }
    let offset_secs: i64 = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let oh = digits(&[*h1, *h2], 0, 2)?;
            let om = digits(&[*m1, *m2], 0, 2)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3600 + om * 60;
            if *sign == b'-' {
                -off
            } else {
                off
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs =
        i128::from(days * 86_400 + hour * 3600 + minute * 60 + second) - i128::from(offset_secs);
    if !(MIN_SECS..END_SECS).contains(&secs) {
        return None;
    }
    Some(Instant(secs * NANOS_PER_SEC + nanos))
}

impl Instant {
    /// Whole days since 1970-01-01 (UTC), rounding down.
    pub fn day(self) -> i64 {
        self.0.div_euclid(86_400 * NANOS_PER_SEC) as i64
    }

    fn parts(self) -> (i64, i64, i64, i64, i64, i64, i64) {
        let secs = self.0.div_euclid(NANOS_PER_SEC) as i64;
        let micros = (self.0.rem_euclid(NANOS_PER_SEC) / 1000) as i64;
        let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400);
        (y, mo, d, sod / 3600, sod / 60 % 60, sod % 60, micros)
    }

    /// `YYYY-MM-DD HH:MM:SS.ffffff+00` (COPY text for `timestamptz`).
    pub fn write_pg(self, out: &mut Vec<u8>) {
        let (y, mo, d, h, mi, s, us) = self.parts();
        let mut buf = [0u8; 32];
        let n = write_parts(&mut buf, [y, mo, d, h, mi, s, us], b' ', b"+00");
        out.extend_from_slice(&buf[..n]);
    }

    /// `YYYY-MM-DDTHH:MM:SS.ffffff+00:00` (ISO 8601, readable by Python's
    /// `datetime.fromisoformat`).
    pub fn to_iso(self) -> String {
        let (y, mo, d, h, mi, s, us) = self.parts();
        let mut out = String::with_capacity(32);
        let _ = write!(
            out,
            "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{us:06}+00:00"
        );
        out
    }
}

fn write_parts(buf: &mut [u8; 32], v: [i64; 7], sep: u8, zone: &[u8]) -> usize {
    let mut n = 0;
    let fields: [(i64, usize, Option<u8>); 7] = [
        (v[0], 4, Some(b'-')),
        (v[1], 2, Some(b'-')),
        (v[2], 2, Some(sep)),
        (v[3], 2, Some(b':')),
        (v[4], 2, Some(b':')),
        (v[5], 2, Some(b'.')),
        (v[6], 6, None),
    ];
    for (value, width, after) in fields {
        let mut x = value;
        for k in (0..width).rev() {
            buf[n + k] = b'0' + (x % 10) as u8;
            x /= 10;
        }
        n += width;
        if let Some(c) = after {
            buf[n] = c;
            n += 1;
        }
    }
    buf[n..n + zone.len()].copy_from_slice(zone);
    n + zone.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(s: &str) -> String {
        let mut out = Vec::new();
        parse_rfc3339(s).unwrap().write_pg(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn parses_and_normalizes() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(Instant(0)));
        assert_eq!(pg("2026-04-28T09:00:01Z"), "2026-04-28 09:00:01.000000+00");
        assert_eq!(
            pg("2026-04-28T11:30:01.1234567+02:30"),
            "2026-04-28 09:00:01.123456+00"
        );
        assert_eq!(
            pg("2024-02-29t23:59:60.5-01:00"),
            "2024-03-01 01:00:00.500000+00"
        );
        assert_eq!(pg("0001-01-01 00:00:00Z"), "0001-01-01 00:00:00.000000+00");
        assert_eq!(
            parse_rfc3339("2026-04-28T09:00:01.5+01:00")
                .unwrap()
                .to_iso(),
            "2026-04-28T08:00:01.500000+00:00"
        );
        // Same instant, different spellings.
        assert_eq!(
            parse_rfc3339("2026-04-28T09:00:00Z"),
            parse_rfc3339("2026-04-28T10:00:00.000+01:00")
        );
        assert!(
            parse_rfc3339("2026-04-28T09:00:00.000000001Z") > parse_rfc3339("2026-04-28T09:00:00Z")
        );
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59.5Z").unwrap().day(), -1);
    }

    #[test]
    fn refuses_bad_input() {
        for bad in [
            "",
            "2026-04-28",
            "2026-04-28T09:00:00",
            "2026-04-28T09:00:00+0100",
            "2026-04-28T09:00:00.Z",
            "2026-02-30T09:00:00Z",
            "2025-02-29T09:00:00Z",
            "2026-13-01T09:00:00Z",
            "2026-04-28T24:00:00Z",
            "2026-04-28T09:60:00Z",
            "2026-04-28T09:00:61Z",
            "2026-04-28T09:00:00+24:00",
            "2026-04-28T09:00:00ZZ",
            "2026-04-28X09:00:00Z",
            "+2026-04-28T09:00:00Z",
            "0000-12-31T23:59:59Z",
            "0001-01-01T00:30:00+01:00",
            "9999-12-31T23:30:00-01:00",
            "२०२६-04-28T09:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn civil_round_trip() {
        for z in (-800_000..3_000_000).step_by(997) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }
}
