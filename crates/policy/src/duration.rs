//! Go `time.ParseDuration` syntax, used by the orderer's `BatchTimeout` value
//! (Fabric `common/channelconfig/orderer.go`).

/// Parse a Go duration string (`"2s"`, `"500ms"`, `"1h30m"`, `"1.5s"`, `"-3us"`, `"0"`) into signed
/// nanoseconds.
///
/// Grammar: optional sign, then one or more `number unit` pairs, where number is `digits[.digits]` or
/// `.digits` and unit is one of `ns us µs μs ms s m h`; the bare string `0` is allowed. Errors on empty
/// input, missing units, unknown units and on results outside `i64` nanoseconds (Go's limit). Fractions
/// are computed exactly and truncated toward zero (Go goes through a float for the fractional part, which
/// can differ in the last nanosecond for fractions with more than ~15 significant digits).
pub(crate) fn parse_go_duration(input: &str) -> Result<i64, String> {
    let err = |what: &str| format!("invalid duration {input:?}: {what}");
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
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_digits = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_digits = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            frac_digits = &after_dot[..frac_len];
            rest = &after_dot[frac_len..];
        }
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(err("expected a number"));
        }
        let unit_len =
            rest.char_indices().find(|(_, c)| *c == '.' || c.is_ascii_digit()).map_or(rest.len(), |(i, _)| i);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let unit_ns: i128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit")),
        };
        let int_value: i128 = if int_digits.is_empty() {
            0
        } else if int_digits.len() > 20 {
            return Err(err("out of range"));
        } else {
            int_digits.parse().map_err(|_| err("bad number"))?
        };
        // Digits beyond 1 ns resolution of the largest unit cannot change the result; cap to keep i128 exact.
        let frac = &frac_digits[..frac_digits.len().min(20)];
        let frac_ns = if frac.is_empty() {
            0
        } else {
            let value: i128 = frac.parse().map_err(|_| err("bad fraction"))?;
            value * unit_ns / 10i128.pow(frac.len() as u32)
        };
        total += int_value * unit_ns + frac_ns;
        if total > i128::from(i64::MAX) + 1 {
            return Err(err("out of range"));
        }
    }
    let signed = if negative { -total } else { total };
    i64::try_from(signed).map_err(|_| err("out of range"))
}

#[cfg(test)]
mod tests {
    use super::parse_go_duration;

    #[test]
    fn parses_go_duration_examples() {
        assert_eq!(parse_go_duration("2s"), Ok(2_000_000_000));
        assert_eq!(parse_go_duration("500ms"), Ok(500_000_000));
        assert_eq!(parse_go_duration("1h30m"), Ok(5_400_000_000_000));
        assert_eq!(parse_go_duration("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_go_duration(".5s"), Ok(500_000_000));
        assert_eq!(parse_go_duration("1.s"), Ok(1_000_000_000));
        assert_eq!(parse_go_duration("-3us"), Ok(-3_000));
        assert_eq!(parse_go_duration("3\u{b5}s"), Ok(3_000));
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(parse_go_duration("+0"), Ok(0));
        assert_eq!(parse_go_duration("1m0.000000001s"), Ok(60_000_000_001));
    }

    #[test]
    fn rejects_malformed_durations() {
        for bad in ["", "2", "s", ".s", "1x", "-", "1s2", "9999999999999999999h", "2 s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should fail");
        }
    }
}
