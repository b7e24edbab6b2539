//! The ledger file format reader on arbitrary files: records or a RecordError naming index and offset, never a panic.
#![no_main]
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for rec in ferrofabric_protoutil::records(Bytes::copy_from_slice(data)) {
        if rec.is_err() {
            break;
        }
    }
});
