//! Go `time.Duration` text (`time.ParseDuration` and `Duration.String`): the channel config's `BatchTimeout` value
//! (Fabric `common/channelconfig/orderer.go`), configtx.yaml's `BatchTimeout`, and the durations of the daemons'
//! YAML configs, all written the Go way. One parser for all of them.

use crate::error::PolicyError;

/// Parses Go duration syntax (`"2s"`, `"500ms"`, `"1h30m"`, `"1.5s"`, `".5s"`, `"-3us"`, `"0"`) into
/// nanoseconds.
///
/// Units: `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`. Errors on empty input, a number without unit, an
/// unknown unit, or a value outside `i64` nanoseconds. Fractions are truncated to the nanosecond.
pub fn parse(input: &str) -> Result<i64, PolicyError> {
    let err = |what: &str| PolicyError::InvalidDuration { input: input.to_owned(), reason: what.to_owned() };
    let (negative, mut rest) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        _ => (false, input),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(err("empty"));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_digits = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_digits = "";
        let mut had_dot = false;
        if let Some(after) = rest.strip_prefix('.') {
            had_dot = true;
            let frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
            frac_digits = &after[..frac_len];
            rest = &after[frac_len..];
        }
        if int_digits.is_empty() && (frac_digits.is_empty() || !had_dot) {
            return Err(err("expected a number"));
        }
        let unit_len = rest.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(rest.len());
        let unit: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(err("missing unit")),
            other => return Err(err(&format!("unknown unit {other:?}"))),
        };
        rest = &rest[unit_len..];
        let whole: u128 = if int_digits.is_empty() { 0 } else { int_digits.parse().map_err(|_| err("overflow"))? };
        let mut value = whole.checked_mul(unit).ok_or_else(|| err("overflow"))?;
        // Only the first digits can matter at nanosecond resolution; the rest are dropped.
        let frac = &frac_digits[..frac_digits.len().min(30)];
        if !frac.is_empty() {
            let numerator: u128 = frac.parse().map_err(|_| err("overflow"))?;
            value += numerator * unit / 10u128.pow(frac.len() as u32);
        }
        total = total.checked_add(value).ok_or_else(|| err("overflow"))?;
        if total > i64::MAX as u128 + u128::from(negative) {
            return Err(err("overflow"));
        }
    }
    let total = total as i128;
    Ok(if negative { -total } else { total } as i64)
}

/// [`parse`] for a setting that must not be negative (a timeout, an interval), as a [`std::time::Duration`].
///
/// Errors: those of [`parse`], and a negative duration.
pub fn parse_std(input: &str) -> Result<std::time::Duration, PolicyError> {
    let nanos = parse(input.trim())?;
    u64::try_from(nanos)
        .map(std::time::Duration::from_nanos)
        .map_err(|_| PolicyError::InvalidDuration { input: input.to_owned(), reason: "negative".into() })
}

/// Appends `value`'s `digits` lowest decimal places as a fraction without trailing zeros (nothing when
/// they are all zero) and returns the integer part.
fn frac(out: &mut String, value: u64, digits: u32) -> u64 {
    let scale = 10u64.pow(digits);
    let f = value % scale;
    if f != 0 {
        let s = format!("{f:0width$}", width = digits as usize);
        out.push('.');
        out.push_str(s.trim_end_matches('0'));
    }
    value / scale
}

/// Formats nanoseconds as Go's `Duration.String` does: `0s`, `500ms`, `1.5µs`, `2s`, `1m0s`, `1h2m3.5s`.
pub fn format(nanos: i64) -> String {
    let negative = nanos < 0;
    let u = nanos.unsigned_abs();
    let sign = if negative { "-" } else { "" };
    if u == 0 {
        return "0s".to_string();
    }
    if u < 1_000_000_000 {
        let (digits, unit) = match u {
            0..=999 => (0, "ns"),
            1_000..=999_999 => (3, "\u{b5}s"),
            _ => (6, "ms"),
        };
        let mut f = String::new();
        let int = frac(&mut f, u, digits);
        return format!("{sign}{int}{f}{unit}");
    }
    let mut f = String::new();
    let secs = frac(&mut f, u, 9);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}{f}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}{f}s")
    } else {
        format!("{sign}{s}{f}s")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_go_syntax() {
        for (s, ns) in [
            ("0", 0),
            ("2s", 2_000_000_000),
            ("500ms", 500_000_000),
            ("1h30m", 5_400_000_000_000),
            ("1.5s", 1_500_000_000),
            (".5s", 500_000_000),
            ("1.s", 1_000_000_000),
            ("-3us", -3_000),
            ("+7\u{b5}s", 7_000),
            ("1\u{3bc}s", 1_000),
            ("1m0.000000001s", 60_000_000_001),
            ("9223372036854775807ns", i64::MAX),
        ] {
            assert_eq!(parse(s).unwrap(), ns, "{s}");
        }
        for bad in [
            "",
            "-",
            "2",
            "s",
            "2x",
            "1..5s",
            ".s",
            "9223372036854775808ns",
            "3000000h",
            "1s2",
            "2 s",
            "99999999999999999999h",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parse_std_refuses_negative_durations() {
        assert_eq!(parse_std(" 1m30s ").unwrap(), std::time::Duration::from_secs(90));
        assert_eq!(parse_std("0").unwrap(), std::time::Duration::ZERO);
        assert!(parse_std("-1s").is_err());
    }

    #[test]
    fn format_matches_go_strings() {
        for (ns, s) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1\u{b5}s"),
            (2_200_000, "2.2ms"),
            (500_000_000, "500ms"),
            (2_000_000_000, "2s"),
            (60_000_000_000, "1m0s"),
            (3_723_500_000_000, "1h2m3.5s"),
            (-1_500_000_000, "-1.5s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(format(ns), s, "{ns}");
        }
    }
}
