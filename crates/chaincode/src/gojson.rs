//! The bits of Go's standard library whose exact output the built-in chaincodes must reproduce, because the
//! chaincodes they stand in for are Go programs and their output lands in read/write sets byte for byte:
//! `encoding/json` string quoting and `strconv.Atoi`.

/// Appends `s` as a JSON string the way Go's `json.Marshal` quotes a `string` field (HTML-safe escaping, as is
/// Go's default): `"` and `\` escaped; `\n`, `\r`, `\t`, `\b`, `\f` as short escapes; other control characters,
/// `<`, `>`, `&`, U+2028 and U+2029 as `\u00xx`/`\u20xx`; invalid UTF-8 bytes as `\ufffd`.
pub(crate) fn push_string(out: &mut String, s: &[u8]) {
    out.push('"');
    for chunk in s.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        if !chunk.invalid().is_empty() {
            // Go replaces each invalid byte sequence it stops at with one U+FFFD per byte.
            for _ in chunk.invalid() {
                out.push_str("\\ufffd");
            }
        }
    }
    out.push('"');
}

/// Go's `strconv.Atoi` (64-bit `int`): optional sign, decimal digits, no surrounding space; `None` where Go returns
/// an error (empty, non-digits, out of range, not UTF-8).
pub(crate) fn atoi(s: &[u8]) -> Option<i64> {
    std::str::from_utf8(s).ok()?.parse::<i64>().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn quote(s: &[u8]) -> String {
        let mut out = String::new();
        push_string(&mut out, s);
        out
    }

    #[test]
    fn quoting_matches_go_json_marshal() {
        assert_eq!(quote(b"cust1"), "\"cust1\"");
        assert_eq!(quote(b"a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote(b"<&>"), "\"\\u003c\\u0026\\u003e\"");
        assert_eq!(quote(b"\n\t\x01"), "\"\\n\\t\\u0001\"");
        assert_eq!(quote("\u{2028}é".as_bytes()), "\"\\u2028é\"");
        assert_eq!(quote(b"a\xffb"), "\"a\\ufffdb\"");
    }

    #[test]
    fn atoi_matches_go() {
        assert_eq!(atoi(b"42"), Some(42));
        assert_eq!(atoi(b"-7"), Some(-7));
        assert_eq!(atoi(b"+7"), Some(7));
        assert_eq!(atoi(b"007"), Some(7));
        assert_eq!(atoi(b""), None);
        assert_eq!(atoi(b" 1"), None);
        assert_eq!(atoi(b"1.5"), None);
        assert_eq!(atoi(b"9223372036854775808"), None);
    }
}
