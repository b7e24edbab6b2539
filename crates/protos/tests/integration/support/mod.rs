//! Shared helpers for the fixture-driven tests: reading the Fabric 2.5
//! fixture ledger, splitting `*.bin` ledgers into block records, and
//! byte-exact decode/re-encode checks.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use ferrofabric_testkit::fabric_fixture;
use prost::Message;

/// Reads a fixture file into one `Bytes` buffer.
pub(crate) fn read_fixture(name: &str) -> Bytes {
    let path = fabric_fixture(name);
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    Bytes::from(data)
}

/// Splits a ledger file made of `[u64 LE length][marshaled common.Block]`
/// records into zero-copy slices of `file`. Panics on a truncated record.
pub(crate) fn split_ledger(file: &Bytes) -> Vec<Bytes> {
    let mut records = Vec::new();
    let mut pos = 0usize;
    while pos < file.len() {
        assert!(pos + 8 <= file.len(), "truncated length prefix at offset {pos}");
        let len_bytes: [u8; 8] = file[pos..pos + 8].try_into().unwrap();
        let len = usize::try_from(u64::from_le_bytes(len_bytes)).unwrap();
        pos += 8;
        assert!(pos + len <= file.len(), "truncated record at offset {pos} (len {len})");
        records.push(file.slice(pos..pos + len));
        pos += len;
    }
    records
}

/// The parsed `expected.json` summary written by the fixture generator.
pub(crate) fn expected() -> serde_json::Value {
    let raw = read_fixture("expected.json");
    serde_json::from_slice(&raw).expect("expected.json is valid JSON")
}

/// Decodes `raw` as `M` and asserts that re-encoding reproduces `raw`
/// byte for byte. Only valid for messages without map fields (map order is
/// not canonical in Go's marshaller).
pub(crate) fn decode_exact<M: Message + Default>(raw: &Bytes, what: &str) -> M {
    let msg = M::decode(raw.clone()).unwrap_or_else(|e| panic!("{what}: decode failed: {e}"));
    let again = msg.encode_to_vec();
    assert!(again == raw[..], "{what}: re-encoding differs from the original ({} vs {} bytes)", again.len(), raw.len());
    msg
}

/// Decodes `raw` as `M` without the round-trip check (for messages that
/// contain map fields).
pub(crate) fn decode<M: Message + Default>(raw: &Bytes, what: &str) -> M {
    M::decode(raw.clone()).unwrap_or_else(|e| panic!("{what}: decode failed: {e}"))
}

/// Hex encoding of a byte string, as used throughout expected.json.
pub(crate) fn hex(bytes: &[u8]) -> String {
    ::hex::encode(bytes)
}

/// Formats a protobuf timestamp as RFC 3339 UTC with nine fractional digits
/// (the form expected.json uses).
pub(crate) fn rfc3339_nanos(ts: &prost_types::Timestamp) -> String {
    let days = ts.seconds.div_euclid(86_400);
    let secs_of_day = ts.seconds.rem_euclid(86_400);
    // Civil-from-days (proleptic Gregorian), Howard Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60,
        ts.nanos
    )
}
