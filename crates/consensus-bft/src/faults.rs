//! Fault injection of a consenter (fail-rs fault points, inert unless `FERROFABRIC_FAILPOINTS` configures them),
//! for the Byzantine-consenter and censorship tests.

use bytes::Bytes;
use ferrofabric_protos::common::MetadataSignature;
use prost::Message;

/// Fault injection: whether this consenter is Byzantine (the `bft-byzantine` fault point, inert unless
/// `FERROFABRIC_FAILPOINTS` configures it; the Byzantine consenter test uses it): it equivocates, signs blocks
/// with invalid signatures and sends garbage to the other consenters. It still orders, so the others must both
/// tolerate it and not be misled by it.
pub(crate) fn byzantine() -> bool {
    fail::eval("bft-byzantine", |_| ()).is_some()
}

/// A block signature made invalid: its signature bytes altered (the identifier header kept, so that it still
/// names its consenter).
pub(crate) fn invalid_block_signature(signature: Bytes) -> Bytes {
    let Ok(mut sig) = MetadataSignature::decode(signature.clone()) else { return signature };
    let mut altered = sig.signature.to_vec();
    if let Some(b) = altered.last_mut() {
        *b ^= 0x01;
    }
    sig.signature = Bytes::from(altered);
    Bytes::from(sig.encode_to_vec())
}

/// Fault injection: whether this consenter censors, answering Broadcast SUCCESS but pooling no request, from
/// clients or from the other consenters, so that it never proposes one (the `bft-drop-requests` fault point of
/// TiKV's fail-rs, inert unless `FERROFABRIC_FAILPOINTS` configures it; the censorship test uses it). The
/// others replace it as proposer when their propose timeout expires.
pub(crate) fn censoring() -> bool {
    fail::eval("bft-drop-requests", |_| ()).is_some()
}
