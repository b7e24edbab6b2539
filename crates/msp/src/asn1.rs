//! A minimal DER reader that follows Go's `encoding/asn1` tag/length rules.
//!
//! Fabric decodes ECDSA signatures with Go's `asn1.Unmarshal`
//! (bccsp/utils/ecdsa.go `UnmarshalECDSASignature`), whose acceptance rules
//! differ from a strict DER parser: bytes after the outer SEQUENCE and extra
//! elements inside it are ignored. Verdicts must match Fabric bit for bit, so
//! that parse is done here by hand. The same reader also walks certificates
//! (already checked by `x509-cert`) to recover raw sub-slices (TBS, names,
//! extension values) that Fabric hashes or compares byte-wise.

/// Universal tag of SEQUENCE (constructed).
pub(crate) const TAG_SEQUENCE: u8 = 0x30;
/// Universal tag of SET (constructed).
pub(crate) const TAG_SET: u8 = 0x31;
/// Universal tag of INTEGER.
pub(crate) const TAG_INTEGER: u8 = 0x02;
/// Universal tag of BIT STRING.
pub(crate) const TAG_BIT_STRING: u8 = 0x03;
/// Universal tag of OCTET STRING.
pub(crate) const TAG_OCTET_STRING: u8 = 0x04;
/// Universal tag of OBJECT IDENTIFIER.
pub(crate) const TAG_OID: u8 = 0x06;
/// Universal tag of BOOLEAN.
pub(crate) const TAG_BOOLEAN: u8 = 0x01;

/// One tag-length-value element.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tlv<'a> {
    /// The single identifier octet (class, constructed bit, tag number).
    pub tag: u8,
    /// The whole element, header included.
    pub full: &'a [u8],
    /// The contents octets.
    pub value: &'a [u8],
}

/// Reads one element from the front of `input` and returns it with the rest.
///
/// Length rules are Go's `parseTagAndLength`: no indefinite length, no
/// leading zero length octets, long form only for lengths >= 128, lengths
/// below 2^31. Multi-octet (high-number) tags are rejected: none of the
/// structures we read use them, and Go would reject them at these positions.
pub(crate) fn read_tlv(input: &[u8]) -> Result<(Tlv<'_>, &[u8]), &'static str> {
    let (&tag, after_tag) = input.split_first().ok_or("truncated tag")?;
    if tag & 0x1f == 0x1f {
        return Err("high-number tag form not supported");
    }
    let (&first, mut rest) = after_tag.split_first().ok_or("truncated length")?;
    let length: usize = if first & 0x80 == 0 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 {
            return Err("indefinite length found (not DER)");
        }
        let mut length: usize = 0;
        for _ in 0..count {
            let (&b, r) = rest.split_first().ok_or("truncated tag or length")?;
            rest = r;
            if length >= 1 << 23 {
                return Err("length too large");
            }
            length = (length << 8) | usize::from(b);
            if length == 0 {
                return Err("superfluous leading zeros in length");
            }
        }
        if length < 0x80 {
            return Err("non-minimal length");
        }
        length
    };
    if length > rest.len() {
        return Err("data truncated");
    }
    let header_len = input.len() - rest.len();
    let (value, rest) = rest.split_at(length);
    Ok((Tlv { tag, full: &input[..header_len + length], value }, rest))
}

/// Sequential reader over the contents of a constructed element.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads the elements of `contents` one by one.
    pub(crate) fn new(contents: &'a [u8]) -> Self {
        Reader { rest: contents }
    }

    /// True when nothing is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The identifier octet of the next element, if any.
    pub(crate) fn peek_tag(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// Reads the next element, whatever its tag.
    pub(crate) fn next_any(&mut self) -> Result<Tlv<'a>, &'static str> {
        let (tlv, rest) = read_tlv(self.rest)?;
        self.rest = rest;
        Ok(tlv)
    }

    /// Reads the next element and requires its identifier octet to be `tag`.
    pub(crate) fn next_tag(&mut self, tag: u8) -> Result<Tlv<'a>, &'static str> {
        match self.peek_tag() {
            None => Err("sequence truncated"),
            Some(t) if t != tag => Err("unexpected tag"),
            Some(_) => self.next_any(),
        }
    }

    /// Reads the next element if its identifier octet is `tag`.
    pub(crate) fn next_optional(&mut self, tag: u8) -> Result<Option<Tlv<'a>>, &'static str> {
        if self.peek_tag() == Some(tag) {
            self.next_any().map(Some)
        } else {
            Ok(None)
        }
    }
}

/// Go's `checkInteger`: non-empty and minimally encoded two's complement.
pub(crate) fn check_integer(value: &[u8]) -> Result<(), &'static str> {
    match value {
        [] => Err("empty integer"),
        [_] => Ok(()),
        [0x00, b, ..] if b & 0x80 == 0 => Err("integer not minimally-encoded"),
        [0xff, b, ..] if b & 0x80 != 0 => Err("integer not minimally-encoded"),
        _ => Ok(()),
    }
}

/// Magnitude (big-endian, no leading zeros) of a strictly positive INTEGER
/// body; errors for zero or negative values.
fn positive_magnitude<'a>(value: &'a [u8], what: &'static str) -> Result<&'a [u8], String> {
    check_integer(value).map_err(|e| format!("{what}: {e}"))?;
    if value[0] & 0x80 != 0 {
        return Err(format!("invalid signature, {what} must be larger than zero"));
    }
    let start = value.iter().position(|&b| b != 0).unwrap_or(value.len());
    if start == value.len() {
        return Err(format!("invalid signature, {what} must be larger than zero"));
    }
    Ok(&value[start..])
}

/// Parses an ECDSA signature exactly as Fabric's `UnmarshalECDSASignature`
/// (Go `asn1.Unmarshal` into `struct{R, S *big.Int}`, then R, S > 0).
///
/// Returns the big-endian magnitudes of r and s without leading zeros.
/// Accepted like Go: bytes after the SEQUENCE, and elements inside the
/// SEQUENCE after S. Rejected like Go: non-minimal lengths or integers,
/// indefinite lengths, wrong tags, truncation, zero or negative values.
pub(crate) fn parse_ecdsa_signature(raw: &[u8]) -> Result<(&[u8], &[u8]), String> {
    if raw.is_empty() {
        return Err("sequence truncated".into());
    }
    let (seq, _trailing) = read_tlv(raw).map_err(str::to_owned)?;
    if seq.tag != TAG_SEQUENCE {
        return Err("expected a SEQUENCE".into());
    }
    let mut inner = Reader::new(seq.value);
    let r = inner.next_tag(TAG_INTEGER).map_err(|e| format!("R: {e}"))?;
    let s = inner.next_tag(TAG_INTEGER).map_err(|e| format!("S: {e}"))?;
    // Go parses both fields before checking signs; errors only differ in text.
    check_integer(r.value).map_err(|e| format!("R: {e}"))?;
    check_integer(s.value).map_err(|e| format!("S: {e}"))?;
    Ok((positive_magnitude(r.value, "R")?, positive_magnitude(s.value, "S")?))
}

/// Appends a DER length.
fn push_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len() - 1);
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

/// Appends a complete DER element.
pub(crate) fn push_tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    push_length(out, value.len());
    out.extend_from_slice(value);
}

/// DER of a non-negative INTEGER given its big-endian magnitude.
fn push_unsigned_integer(out: &mut Vec<u8>, magnitude: &[u8]) {
    let start = magnitude.iter().position(|&b| b != 0).unwrap_or(magnitude.len());
    let m = &magnitude[start..];
    let mut body = Vec::with_capacity(m.len() + 1);
    if m.is_empty() || m[0] & 0x80 != 0 {
        body.push(0);
    }
    body.extend_from_slice(m);
    push_tlv(out, TAG_INTEGER, &body);
}

/// Canonical DER `SEQUENCE { INTEGER r, INTEGER s }` (Go `asn1.Marshal` of
/// Fabric's `ECDSASignature`).
pub(crate) fn marshal_ecdsa_signature(r: &[u8], s: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(r.len() + s.len() + 6);
    push_unsigned_integer(&mut body, r);
    push_unsigned_integer(&mut body, s);
    let mut out = Vec::with_capacity(body.len() + 4);
    push_tlv(&mut out, TAG_SEQUENCE, &body);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn go_rules_for_ecdsa_signatures() {
        // SEQUENCE { INTEGER 1, INTEGER 2 }
        let ok = [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02];
        assert_eq!(parse_ecdsa_signature(&ok).unwrap(), (&[1u8][..], &[2u8][..]));
        // trailing bytes after the sequence and after S inside it are ignored
        let mut trailing = ok.to_vec();
        trailing.extend_from_slice(&[0xde, 0xad]);
        assert!(parse_ecdsa_signature(&trailing).is_ok());
        let extra_inside = [0x30, 0x09, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02, 0x02, 0x01, 0x05];
        assert!(parse_ecdsa_signature(&extra_inside).is_ok());
        // zero, negative, non-minimal, long-form short length, truncation
        for bad in [
            &[0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x02][..],
            &[0x30, 0x06, 0x02, 0x01, 0x81, 0x02, 0x01, 0x02][..],
            &[0x30, 0x07, 0x02, 0x02, 0x00, 0x01, 0x02, 0x01, 0x02][..],
            &[0x30, 0x81, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02][..],
            &[0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01][..],
            &[0x30, 0x03, 0x02, 0x01, 0x01][..],
            &[0x31, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02][..],
            &[0x30, 0x80, 0x02, 0x01, 0x01, 0x02, 0x01, 0x02, 0, 0][..],
            &[][..],
        ] {
            assert!(parse_ecdsa_signature(bad).is_err(), "{bad:02x?}");
        }
    }

    #[test]
    fn marshal_is_canonical() {
        assert_eq!(
            marshal_ecdsa_signature(&[0x80], &[0x00, 0x01]),
            vec![0x30, 0x07, 0x02, 0x02, 0x00, 0x80, 0x02, 0x01, 0x01]
        );
        let long = marshal_ecdsa_signature(&[0x7f; 70], &[0x7f; 70]);
        assert_eq!(&long[..3], &[0x30, 0x81, 144]);
    }
}
