//! Every layer of a transaction decoded from arbitrary envelope bytes, and a block from arbitrary bytes:
//! never a panic, errors name their layer.
#![no_main]
use bytes::Bytes;
use ferrofabric_arena::{BlockArena, TxArena};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let tx = TxArena::new(Bytes::copy_from_slice(data));
    let _ = tx.channel_header();
    let _ = tx.signature_header();
    let _ = tx.header_extension();
    let _ = tx.action();
    let _ = tx.chaincode_action();
    let _ = tx.rwset();
    if let Ok(block) = BlockArena::decode(Bytes::copy_from_slice(data)) {
        let _ = block.computed_data_hash();
        for tx in block.txs() {
            let _ = tx.rwset();
        }
    }
});
