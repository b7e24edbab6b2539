//! PEM decoding with the acceptance rules of Go's `encoding/pem.Decode`.
//!
//! Fabric turns `SerializedIdentity.id_bytes` into DER with `pem.Decode`
//! (msp/mspimpl.go `deserializeIdentityInternal`) and ignores the block
//! type. Go's decoder skips leading garbage, tolerates headers, retries at
//! the next `-----BEGIN` when a block is malformed, and decodes base64
//! leniently (CR/LF, spaces and tabs ignored; unused trailing bits allowed),
//! so a stricter RFC 7468 decoder would disagree with Fabric on odd inputs.

/// One decoded PEM block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PemBlock {
    /// The label between `BEGIN ` and `-----`, e.g. `CERTIFICATE`.
    pub label: String,
    /// The base64-decoded contents.
    pub der: Vec<u8>,
}

const BEGIN_NO_NL: &[u8] = b"-----BEGIN ";
const BEGIN: &[u8] = b"\n-----BEGIN ";
const END: &[u8] = b"\n-----END ";
const DASHES: &[u8] = b"-----";

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn trim_right_space_tab(mut s: &[u8]) -> &[u8] {
    while let Some((&last, head)) = s.split_last() {
        if last == b' ' || last == b'\t' {
            s = head;
        } else {
            break;
        }
    }
    s
}

/// Go's `getLine`: the line without its terminator (one CR before the LF is
/// dropped, then trailing spaces/tabs), and what follows the LF.
fn get_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        None => (trim_right_space_tab(data), &data[data.len()..]),
        Some(i) => {
            let end = if i > 0 && data[i - 1] == b'\r' { i - 1 } else { i };
            (trim_right_space_tab(&data[..end]), &data[i + 1..])
        }
    }
}

fn b64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Go's `base64.StdEncoding.Decode` (padded, non-strict): CR and LF are
/// skipped anywhere, padding must complete the final quantum and only CR/LF
/// may follow it, non-zero unused bits are accepted.
fn decode_base64_go(input: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len() / 4 * 3);
    let mut it = input.iter().copied().filter(|&c| c != b'\n' && c != b'\r');
    loop {
        let mut quantum = [0u8; 4];
        let mut filled = 0;
        while filled < 4 {
            let Some(c) = it.next() else {
                // End of input: only allowed on a quantum boundary.
                return if filled == 0 { Some(out) } else { None };
            };
            if c == b'=' {
                // "x=" is never valid; "xx=" must be followed by a second '='.
                if filled < 2 || (filled == 2 && it.next() != Some(b'=')) {
                    return None;
                }
                if it.next().is_some() {
                    return None;
                }
                let v = u32::from(quantum[0]) << 18 | u32::from(quantum[1]) << 12 | u32::from(quantum[2]) << 6;
                out.push((v >> 16) as u8);
                if filled == 3 {
                    out.push((v >> 8) as u8);
                }
                return Some(out);
            }
            quantum[filled] = b64_value(c)?;
            filled += 1;
        }
        let v = u32::from(quantum[0]) << 18
            | u32::from(quantum[1]) << 12
            | u32::from(quantum[2]) << 6
            | u32::from(quantum[3]);
        out.extend_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
    }
}

/// Decodes the first PEM block of `data` the way Go's `pem.Decode` does;
/// `None` when Go would return a nil block.
pub(crate) fn decode(data: &[u8]) -> Option<PemBlock> {
    decode_with_rest(data).map(|(block, _)| block)
}

/// Like [`decode`], also returning the bytes after the block (Go's `rest`).
pub(crate) fn decode_with_rest(data: &[u8]) -> Option<(PemBlock, &[u8])> {
    let mut rest = data;
    loop {
        if rest.starts_with(BEGIN_NO_NL) {
            rest = &rest[BEGIN_NO_NL.len()..];
        } else if let Some(i) = find(rest, BEGIN) {
            rest = &rest[i + BEGIN.len()..];
        } else {
            return None;
        }

        let (type_line, after) = get_line(rest);
        rest = after;
        let Some(label) = type_line.strip_suffix(DASHES) else {
            continue;
        };

        let mut has_headers = false;
        loop {
            if rest.is_empty() {
                return None;
            }
            let (line, next) = get_line(rest);
            if !line.contains(&b':') {
                break;
            }
            has_headers = true;
            rest = next;
        }

        let (end_index, end_trailer_index) = if !has_headers && rest.starts_with(&END[1..]) {
            (0, END.len() - 1)
        } else {
            match find(rest, END) {
                Some(i) => (i, i + END.len()),
                None => continue,
            }
        };

        let end_trailer = &rest[end_trailer_index..];
        let trailer_len = label.len() + DASHES.len();
        if end_trailer.len() < trailer_len {
            continue;
        }
        let (trailer, rest_of_end_line) = end_trailer.split_at(trailer_len);
        if !trailer.starts_with(label) || !trailer.ends_with(DASHES) {
            continue;
        }
        if !get_line(rest_of_end_line).0.is_empty() {
            continue;
        }

        let b64: Vec<u8> = rest[..end_index].iter().copied().filter(|&c| c != b' ' && c != b'\t').collect();
        let Some(der) = decode_base64_go(&b64) else {
            continue;
        };
        let after_block = get_line(&rest[end_index + END.len() - 1..]).1;
        return Some((PemBlock { label: String::from_utf8_lossy(label).into_owned(), der }, after_block));
    }
}

/// Go's `pem.EncodeToMemory` for a header-less block: 64-column base64 body.
#[cfg(test)]
pub(crate) fn encode(label: &str, der: &[u8]) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = Vec::with_capacity(der.len().div_ceil(3) * 4);
    for chunk in der.chunks(3) {
        let v = u32::from(chunk[0]) << 16
            | u32::from(chunk.get(1).copied().unwrap_or(0)) << 8
            | u32::from(chunk.get(2).copied().unwrap_or(0));
        b64.push(ALPHABET[(v >> 18) as usize & 63]);
        b64.push(ALPHABET[(v >> 12) as usize & 63]);
        b64.push(if chunk.len() > 1 { ALPHABET[(v >> 6) as usize & 63] } else { b'=' });
        b64.push(if chunk.len() > 2 { ALPHABET[v as usize & 63] } else { b'=' });
    }
    let mut out = Vec::with_capacity(b64.len() + b64.len() / 64 + 2 * label.len() + 40);
    out.extend_from_slice(b"-----BEGIN ");
    out.extend_from_slice(label.as_bytes());
    out.extend_from_slice(b"-----\n");
    for line in b64.chunks(64) {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out.extend_from_slice(b"-----END ");
    out.extend_from_slice(label.as_bytes());
    out.extend_from_slice(b"-----\n");
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_go_leniency() {
        let der: Vec<u8> = (0u8..=200).collect();
        let pem = encode("CERTIFICATE", &der);
        let block = decode(&pem).unwrap();
        assert_eq!(block.label, "CERTIFICATE");
        assert_eq!(block.der, der);

        // Leading garbage, CRLF line ends, spaces inside the body, headers.
        let mut odd = b"garbage\n".to_vec();
        let text = String::from_utf8(pem.clone()).unwrap().replace('\n', "\r\n");
        let text = text.replacen("-----\r\n", "-----\r\nProc-Type: 4\r\n\r\n", 1);
        odd.extend_from_slice(text.replace("AAEC", "AA EC").as_bytes());
        assert_eq!(decode(&odd).unwrap().der, der);

        // Mismatched END label -> no block; broken base64 -> no block.
        let bad = String::from_utf8(pem.clone()).unwrap().replace("END CERTIFICATE", "END KEY");
        assert!(decode(bad.as_bytes()).is_none());
        let bad = String::from_utf8(pem).unwrap().replacen("AAEC", "AA*C", 1);
        assert!(decode(bad.as_bytes()).is_none());
        assert!(decode(b"").is_none());
        assert!(decode(b"-----BEGIN X-----").is_none());
    }

    #[test]
    fn base64_padding_rules() {
        assert_eq!(decode_base64_go(b"QQ==").unwrap(), b"A");
        assert_eq!(decode_base64_go(b"QUI=").unwrap(), b"AB");
        assert_eq!(decode_base64_go(b"QR==").unwrap(), b"A"); // non-strict trailing bits
        assert!(decode_base64_go(b"QQ").is_none());
        assert!(decode_base64_go(b"QQ=").is_none());
        assert!(decode_base64_go(b"QQ==QQ==").is_none());
        assert!(decode_base64_go(b"Q===").is_none());
    }
}
