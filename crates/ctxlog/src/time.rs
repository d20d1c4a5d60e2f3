//! Event times in JSON (docs/design.md#l10-event-times): an RFC 3339 string or an integer of
//! milliseconds since the Unix epoch on input; RFC 3339 in UTC with milliseconds
//! (`2023-05-08T13:56:00.000Z`) on output, which reads back to the same millisecond.

use serde_json::Value;

/// Milliseconds since the epoch of a `"ts"` value: an integer (ms) or an RFC 3339 string
/// (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; fractions beyond milliseconds are cut).
///
/// # Errors
/// A one-line reason naming what was expected.
pub fn parse_ts(value: &Value) -> Result<i64, String> {
    match value {
        Value::Number(n) => n.as_i64().ok_or_else(|| {
            format!("\"ts\" {n} is not a whole number of milliseconds since the epoch")
        }),
        Value::String(s) => parse_rfc3339(s),
        other => Err(format!(
            "\"ts\" must be an RFC 3339 string or milliseconds since the epoch, not {other}"
        )),
    }
}

/// Parses an RFC 3339 date-time to milliseconds since the epoch.
///
/// # Errors
/// A one-line reason quoting the text.
pub fn parse_rfc3339(s: &str) -> Result<i64, String> {
    let bad = || format!("\"ts\" {s:?} is not an RFC 3339 time such as 2023-05-08T13:56:00Z");
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Result<i64, String> {
        let part = b.get(from..from + len).ok_or_else(bad)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        Ok(part.iter().fold(0, |acc, d| acc * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, allowed: &[u8]| -> Result<(), String> {
        match b.get(at) {
            Some(c) if allowed.contains(c) => Ok(()),
            _ => Err(bad()),
        }
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    sep(4, b"-")?;
    sep(7, b"-")?;
    sep(10, b"Tt ")?;
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    sep(13, b":")?;
    sep(16, b":")?;
    let mut i = 19;
    let mut millis = 0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
        let digits = &s[start..i.min(start + 3)];
        millis = format!("{digits:0<3}").parse::<i64>().map_err(|_| bad())?;
    }
    let offset_min = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() => {
            sep(i + 3, b":")?;
            let (h, m) = (num(i + 1, 2)?, num(i + 4, 2)?);
            if h > 23 || m > 59 {
                return Err(bad());
            }
            let total = h * 60 + m;
            if *sign == b'-' { -total } else { total }
        }
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return Err(bad());
    }
    let days = days_from_civil(year, month, day);
    let secs = ((days * 24 + hour) * 60 + minute) * 60 + second - offset_min * 60;
    Ok(secs * 1000 + millis)
}

/// `ms` since the epoch as RFC 3339 in UTC with milliseconds, e.g. `2023-05-08T13:56:00.000Z`.
pub fn format_rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_and_offsets_apply() {
        let may = 1_683_554_160_000;
        assert_eq!(format_rfc3339(may), "2023-05-08T13:56:00.000Z");
        assert_eq!(parse_rfc3339("2023-05-08T13:56:00Z"), Ok(may));
        assert_eq!(parse_rfc3339("2023-05-08T15:56:00.000+02:00"), Ok(may));
        assert_eq!(parse_rfc3339("2023-05-08t13:56:00.1234z"), Ok(may + 123));
        for ms in [0, -1, 1, may, -86_400_001, 253_402_300_799_999] {
            assert_eq!(parse_rfc3339(&format_rfc3339(ms)), Ok(ms), "{ms}");
        }
        for bad in [
            "2023-05-08",
            "2023-02-29T00:00:00Z",
            "2023-05-08T13:56:00",
            "2023-05-08T13:56:00+2:00",
            "2023-13-01T00:00:00Z",
            "yesterday",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_ts(&Value::from(5)), Ok(5));
        assert!(parse_ts(&Value::from(1.5)).is_err());
        assert!(parse_ts(&Value::Bool(true)).is_err());
    }
}
