//! A protobuf wire-format scanner that reports where each field's bytes are.
//!
//! The BMac annotations are byte offsets into the original marshaled envelope (hw/DESIGN.md §2.4). prost
//! decodes values, not positions, so the encoder walks the envelope with this scanner instead. It follows the
//! protobuf encoding rules (varint keys, wire types 0, 1, 2, 5). Groups are refused. Every error is a value.

use std::ops::Range;

/// A field of a message: its number, wire type and the byte range of its value.
///
/// The range is relative to the buffer given to [`scan`]. For length-delimited fields (wire type 2) it
/// covers the content without the length prefix; for varints it covers the varint bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    /// Field number.
    pub number: u32,
    /// Wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
    pub wire_type: u8,
    /// Where the value is.
    pub range: Range<usize>,
    /// The decoded varint (wire type 0 only; 0 otherwise).
    pub varint: u64,
}

/// Why a buffer is not a well-formed protobuf message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("protobuf scan at byte {offset}: {reason}")]
pub struct ScanError {
    /// Offset of the problem within the scanned buffer.
    pub offset: usize,
    /// What is wrong.
    pub reason: &'static str,
}

/// Reads a varint at `pos`. Returns its value and the position after it.
pub(crate) fn read_varint(buf: &[u8], mut pos: usize) -> Result<(u64, usize), ScanError> {
    let start = pos;
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let b = *buf.get(pos).ok_or(ScanError { offset: start, reason: "truncated varint" })?;
        pos += 1;
        if shift == 63 && b > 1 {
            return Err(ScanError { offset: start, reason: "varint overflows 64 bits" });
        }
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok((value, pos));
        }
    }
    Err(ScanError { offset: start, reason: "varint longer than 10 bytes" })
}

/// Lists the fields of one message, in wire order.
///
/// Errors: truncation, a bad wire type (3, 4, 6, 7), field number 0.
pub(crate) fn scan(buf: &[u8]) -> Result<Vec<Field>, ScanError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let at = pos;
        let (key, p) = read_varint(buf, pos)?;
        pos = p;
        let number = u32::try_from(key >> 3).map_err(|_| ScanError { offset: at, reason: "field number too large" })?;
        if number == 0 {
            return Err(ScanError { offset: at, reason: "field number 0" });
        }
        let wire_type = (key & 7) as u8;
        let (range, varint) = match wire_type {
            0 => {
                let (v, p) = read_varint(buf, pos)?;
                let r = pos..p;
                pos = p;
                (r, v)
            }
            1 | 5 => {
                let n = if wire_type == 1 { 8 } else { 4 };
                if pos + n > buf.len() {
                    return Err(ScanError { offset: at, reason: "truncated fixed field" });
                }
                pos += n;
                (pos - n..pos, 0)
            }
            2 => {
                let (len, p) = read_varint(buf, pos)?;
                let len = usize::try_from(len).map_err(|_| ScanError { offset: at, reason: "length too large" })?;
                if len > buf.len() - p {
                    return Err(ScanError { offset: at, reason: "length runs past the end" });
                }
                pos = p + len;
                (p..pos, 0)
            }
            _ => return Err(ScanError { offset: at, reason: "unsupported wire type" }),
        };
        out.push(Field { number, wire_type, range, varint });
    }
    Ok(out)
}

/// The fields of a message, with lookups that insist on a simple layout.
pub(crate) struct Message<'a> {
    buf: &'a [u8],
    base: usize,
    fields: Vec<Field>,
}

impl<'a> Message<'a> {
    /// Scans `buf`, which starts at absolute offset `base` of the outer buffer. Ranges returned by the accessors
    /// are absolute.
    pub(crate) fn new(buf: &'a [u8], base: usize) -> Result<Self, ScanError> {
        let fields = scan(buf).map_err(|e| ScanError { offset: e.offset + base, reason: e.reason })?;
        Ok(Message { buf, base, fields })
    }

    /// The singular length-delimited field `n`: `Ok(None)` if absent.
    ///
    /// Errors: the field appears more than once (prost would merge the copies, which the annotations cannot
    /// express) or has another wire type.
    pub(crate) fn bytes(&self, n: u32) -> Result<Option<Range<usize>>, ScanError> {
        let mut found = None;
        for f in self.fields.iter().filter(|f| f.number == n) {
            if f.wire_type != 2 {
                return Err(ScanError { offset: self.base + f.range.start, reason: "wrong wire type" });
            }
            if found.is_some() {
                return Err(ScanError { offset: self.base + f.range.start, reason: "singular field repeated" });
            }
            found = Some(f.range.start + self.base..f.range.end + self.base);
        }
        Ok(found)
    }

    /// Every occurrence of the repeated length-delimited field `n`, in order (absolute ranges).
    pub(crate) fn repeated(&self, n: u32) -> Result<Vec<Range<usize>>, ScanError> {
        self.fields
            .iter()
            .filter(|f| f.number == n)
            .map(|f| {
                if f.wire_type != 2 {
                    Err(ScanError { offset: self.base + f.range.start, reason: "wrong wire type" })
                } else {
                    Ok(f.range.start + self.base..f.range.end + self.base)
                }
            })
            .collect()
    }

    /// A sub-message at an absolute range of the same outer buffer.
    pub(crate) fn sub(&self, r: &Range<usize>) -> Result<Message<'a>, ScanError> {
        let rel = r.start - self.base..r.end - self.base;
        let buf = self.buf.get(rel).ok_or(ScanError { offset: r.start, reason: "range outside the message" })?;
        Message::new(buf, r.start)
    }

    /// Whether field `n` occurs at all.
    pub(crate) fn has(&self, n: u32) -> bool {
        self.fields.iter().any(|f| f.number == n)
    }

    /// Every field.
    pub(crate) fn fields(&self) -> &[Field] {
        &self.fields
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scans_nested_fields_with_absolute_offsets() {
        // field 1: bytes "ab"; field 2: varint 300; field 3: message { field 1: bytes "x" }
        let buf = [0x0a, 2, b'a', b'b', 0x10, 0xac, 0x02, 0x1a, 3, 0x0a, 1, b'x'];
        let m = Message::new(&buf, 0).unwrap();
        assert_eq!(m.bytes(1).unwrap(), Some(2..4));
        assert_eq!(m.fields()[1].varint, 300);
        let inner = m.sub(&m.bytes(3).unwrap().unwrap()).unwrap();
        assert_eq!(inner.bytes(1).unwrap(), Some(11..12));
        assert_eq!(m.bytes(7).unwrap(), None);
    }

    #[test]
    fn refuses_truncation_groups_and_repeated_singulars() {
        assert!(scan(&[0x0a, 5, 1]).is_err());
        assert!(scan(&[0x0b]).is_err());
        assert!(scan(&[0x08]).is_err());
        assert!(scan(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
        let twice = [0x0a, 0, 0x0a, 0];
        assert!(Message::new(&twice, 0).unwrap().bytes(1).is_err());
        assert_eq!(Message::new(&twice, 0).unwrap().repeated(1).unwrap().len(), 2);
    }
}
