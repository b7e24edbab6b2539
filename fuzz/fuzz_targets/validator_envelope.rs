//! One fuzzed transaction in a correctly chained block signed by the network's orderer: the validator must give it
//! a code (the block itself is refused only for a correctly signed CONFIG transaction that is no valid
//! configuration, as a Fabric peer stops on it) and never panic.
//!
//! The network, the channel (block 1 defines chaincode `transfer` through `_lifecycle`), the validator and one valid
//! template transaction are built once per process: building them per input (certificates, the channel's MSPs, a
//! validation thread pool) held the target to a few dozen inputs a second. Each input then commits one block to the
//! same validator, so the ledger grows across inputs (only the unmodified template can be VALID, once; afterwards
//! it is a DUPLICATE_TXID).
//!
//! Input: `[mode, rest...]`. Modes re-sign what they change, so that mutations reach past the creator's signature
//! into the header checks, the proposal hashes, the endorsements and the read/write set:
//! * 0: `rest` is the envelope (arbitrary bytes, any length);
//! * 1: `rest` is the payload, signed by the template's creator;
//! * 2, 3, 4: `rest` is an edit script (see [`edit`]) applied to the template's envelope bytes, payload bytes
//!   (re-signed) or `Transaction` bytes (re-signed), so that an empty script is the valid transaction.
#![no_main]
use std::sync::{LazyLock, Mutex};

use bytes::Bytes;
use ferrofabric_protos::common::{Block, BlockHeader, ChannelHeader, Envelope, HeaderType, Payload};
use ferrofabric_testkit::{
    channel_policy_reference, commit_definition, BlockBuilder, ChaincodeDefinition, Network, SigningIdentity,
    TxBuilder, DEFAULT_ENDORSEMENT_POLICY,
};
use ferrofabric_validator::{Validator, ValidatorError, ValidatorOptions};
use libfuzzer_sys::fuzz_target;
use prost::Message;

static NETWORK: LazyLock<Network> = LazyLock::new(|| Network::generate(11).expect("network"));

/// The valid template transaction: a read and writes of chaincode `transfer`, endorsed by both peers.
static TEMPLATE: LazyLock<Bytes> = LazyLock::new(|| {
    TxBuilder::new(&NETWORK)
        .chaincode("transfer", "1.0")
        .read("transfer", "never-written", None)
        .write("transfer", "fuzzed", "after")
        .chaincode_event("fuzz", b"payload")
        .build()
        .expect("template transaction")
        .envelope
});

/// The validator and the header of the last block it accepted.
struct Ledger {
    validator: Validator,
    last: BlockHeader,
}

static LEDGER: LazyLock<Mutex<Ledger>> = LazyLock::new(|| {
    let net = &*NETWORK;
    let validator = Validator::new(net.genesis_block(), ValidatorOptions { threads: 1 }).expect("validator");
    let last = Block::decode(net.genesis_block()).expect("genesis").header.expect("genesis header");
    let mut ledger = Ledger { validator, last };
    let definition = ChaincodeDefinition::new("transfer", 1, channel_policy_reference(DEFAULT_ENDORSEMENT_POLICY));
    let envelope = commit_definition(net, &definition).expect("definition").envelope;
    ledger.commit(&envelope).expect("the chaincode definition block is accepted");
    Mutex::new(ledger)
});

impl Ledger {
    /// Cuts the next orderer-signed block holding `envelope` and commits it; the chain advances if it is accepted.
    fn commit(&mut self, envelope: &Bytes) -> Result<Vec<ferrofabric_validator::TxValidationCode>, ValidatorError> {
        let block = BlockBuilder::new(NETWORK.orderer(), Some(&self.last)).build(std::slice::from_ref(envelope));
        let header = block.header.clone().expect("built blocks have a header");
        let result = self.validator.commit_block(Bytes::from(block.encode_to_vec()))?;
        self.last = header;
        Ok(result.codes)
    }
}

/// Applies an edit script to `bytes`: 3-byte steps `[op, position (2 bytes, LE, modulo the length), value]`; op % 4
/// is 0 = XOR (value | 1), 1 = set, 2 = insert, 3 = remove.
fn edit(bytes: &[u8], script: &[u8]) -> Bytes {
    let mut v = bytes.to_vec();
    for step in script.chunks_exact(3) {
        let (op, pos, value) = (step[0] % 4, u16::from_le_bytes([step[1], step[2]]) as usize, step[2]);
        match op {
            0 if !v.is_empty() => {
                let i = pos % v.len();
                v[i] ^= value | 1;
            }
            1 if !v.is_empty() => {
                let i = pos % v.len();
                v[i] = value;
            }
            2 => {
                let i = pos % (v.len() + 1);
                v.insert(i, value);
            }
            3 if !v.is_empty() => {
                let i = pos % v.len();
                v.remove(i);
            }
            _ => {}
        }
    }
    Bytes::from(v)
}

/// `Envelope{payload, signature = creator's signature over payload}`, marshaled.
fn sign_payload(creator: &SigningIdentity, payload: Bytes) -> Bytes {
    let signature = Bytes::from(creator.sign(&payload));
    Bytes::from(Envelope { payload, signature }.encode_to_vec())
}

/// Whether the envelope is a correctly formed CONFIG transaction header-wise (the one case a block may be refused).
fn claims_config(envelope: &Bytes) -> bool {
    let header = Envelope::decode(envelope.clone()).ok().and_then(|e| Payload::decode(e.payload).ok()?.header);
    header
        .and_then(|h| ChannelHeader::decode(h.channel_header).ok())
        .is_some_and(|c| c.r#type == HeaderType::Config as i32)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let creator = NETWORK.client(0);
    let template = &*TEMPLATE;
    let template_env = || Envelope::decode(template.clone()).expect("template envelope");
    let envelope = match mode % 5 {
        0 => Bytes::copy_from_slice(rest),
        1 => sign_payload(creator, Bytes::copy_from_slice(rest)),
        2 => edit(template, rest),
        3 => sign_payload(creator, edit(&template_env().payload, rest)),
        _ => {
            let mut payload = Payload::decode(template_env().payload).expect("template payload");
            payload.data = edit(&payload.data, rest);
            sign_payload(creator, Bytes::from(payload.encode_to_vec()))
        }
    };
    let mut ledger = LEDGER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    match ledger.commit(&envelope) {
        Ok(codes) => assert_eq!(codes.len(), 1),
        Err(ValidatorError::Execution { .. } | ValidatorError::Config(_)) if claims_config(&envelope) => {}
        Err(e) => panic!("a well-formed, signed block was refused: {e}"),
    }
});
