//! Benchmark workloads: FastFabric's two-key transfer (Gorenflo et al.,
//! "FastFabric", §5: each transaction reads and writes two accounts) and
//! Caliper's smallbank (keys `332514` + account id, JSON account values,
//! `send_payment(amount, dest, source)`), shaped like the fixture ledger's
//! `transfer` and `smallbank` transactions.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use ferrofabric_protos::common::Block;
use ferrofabric_protos::peer::{application_policy, ApplicationPolicy};

use crate::lifecycle::commit_definition_with;
use crate::{
    channel_policy_reference, Built, Chain, ChaincodeDefinition, Network, SigningIdentity, TestkitError, TxBuilder,
    DEFAULT_ENDORSEMENT_POLICY,
};

/// Namespace of the two-key transfer workload.
pub const TRANSFER_CHAINCODE: &str = "transfer";
/// Namespace of the smallbank workload.
pub const SMALLBANK_CHAINCODE: &str = "smallbank";
/// Caliper's smallbank key prefix: the first 6 hex digits of SHA-512("smallbank").
pub const SMALLBANK_PREFIX: &str = "332514";

/// Key of transfer account `i`: `k` + 8 zero-padded digits (sorts numerically).
pub fn transfer_key(i: u64) -> String {
    format!("k{i:08}")
}

/// Key of smallbank account `id`: `332514<id>`.
pub fn smallbank_key(id: u64) -> String {
    format!("{SMALLBANK_PREFIX}{id}")
}

/// One smallbank account as the Caliper chaincode stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmallbankAccount {
    /// Customer id (the key suffix).
    pub id: u64,
    /// Savings balance.
    pub savings: i64,
    /// Checking balance.
    pub checking: i64,
}

impl SmallbankAccount {
    /// State key, see [`smallbank_key`].
    pub fn key(&self) -> String {
        smallbank_key(self.id)
    }

    /// The chaincode's JSON value:
    /// `{"CustomId":"<id>","CustomName":"cust<id>","SavingsBalance":s,"CheckingBalance":c}`.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"CustomId\":\"{id}\",\"CustomName\":\"cust{id}\",\"SavingsBalance\":{s},\"CheckingBalance\":{c}}}",
            id = self.id,
            s = self.savings,
            c = self.checking
        )
    }
}

/// Deterministic transaction factory: creator `User1@org<creator_org+1>`,
/// endorsers peer0 of both orgs, nonces SHA-256(seed ‖ counter)[..24] and
/// timestamps 2025-01-01T00:00:00Z + counter ms, so the same seed and call
/// sequence yields the same transactions (signatures are deterministic when
/// the MSP signer uses RFC 6979).
pub struct Workload<'n> {
    net: &'n Network,
    seed: u64,
    counter: AtomicU64,
    creator_org: usize,
    /// A creator from outside the network (an operator's own MSP), instead of `User1@org<creator_org+1>`.
    creator: Option<&'n SigningIdentity>,
    /// Channel other than the network's own.
    channel: Option<String>,
    definition_version: Option<(u64, u64)>,
}

/// 2025-01-01T00:00:00Z in Unix seconds.
const BASE_TIME: i64 = 1_735_689_600;

impl<'n> Workload<'n> {
    /// A workload over `net` seeded with `seed`, creator org 0, no
    /// `_lifecycle` definition read.
    pub fn new(net: &'n Network, seed: u64) -> Self {
        Workload {
            net,
            seed,
            counter: AtomicU64::new(0),
            creator_org: 0,
            creator: None,
            channel: None,
            definition_version: None,
        }
    }

    /// Signs every transaction's header and payload with `creator` (any MSP's identity, e.g. one loaded from an
    /// operator's MSP directory) instead of the network's client; the endorsements stay the network's peers'.
    pub fn creator(mut self, creator: &'n SigningIdentity) -> Self {
        self.creator = Some(creator);
        self
    }

    /// Addresses every transaction to `channel_id` instead of the network's channel.
    pub fn channel(mut self, channel_id: impl Into<String>) -> Self {
        self.channel = Some(channel_id.into());
        self
    }

    /// Version `(block, tx)` of the chaincode definition commit: every
    /// transaction then carries Fabric's `_lifecycle` read of
    /// `namespaces/fields/<cc>/Sequence` at that version.
    pub fn definition_version(mut self, version: (u64, u64)) -> Self {
        self.definition_version = Some(version);
        self
    }

    /// Creator organisation (0 or 1) for subsequent transactions.
    pub fn creator_org(mut self, org: usize) -> Self {
        self.creator_org = org;
        self
    }

    /// A builder preset with this workload's creator, endorsers, chaincode,
    /// definition read and the nonce/timestamp of counter value `n`.
    fn builder_at(&self, chaincode: &str, n: u64) -> TxBuilder<'n> {
        let (nonce, (secs, nanos)) = self.nonce_and_time(n);
        let mut b = TxBuilder::new(self.net)
            .creator(self.creator.unwrap_or_else(|| self.net.client(self.creator_org)))
            .chaincode(chaincode, "1.0")
            .nonce(nonce)
            .timestamp(secs, nanos);
        if let Some(channel) = &self.channel {
            b = b.channel(channel.clone());
        }
        match self.definition_version {
            Some(v) => b.lifecycle_read(Some(v)),
            None => b,
        }
    }

    /// Nonce SHA-256(seed ‖ n)[..24] and timestamp BASE_TIME + n ms.
    fn nonce_and_time(&self, n: u64) -> (Bytes, (i64, i32)) {
        let mut h = Sha256::new();
        h.update(self.seed.to_le_bytes());
        h.update(n.to_le_bytes());
        let nonce = Bytes::copy_from_slice(&h.finalize()[..24]);
        let ms = i64::try_from(n % (1 << 40)).unwrap_or(0);
        (nonce, (BASE_TIME + ms / 1000, ((ms % 1000) * 1_000_000) as i32))
    }

    /// A [`TxBuilder`] preset like every workload transaction (creator,
    /// endorsers, chaincode `<chaincode>`/`1.0`, definition read, next
    /// deterministic nonce and timestamp); use it to add further
    /// reads/writes or tampering to a workload-shaped transaction.
    pub fn builder(&self, chaincode: &str) -> TxBuilder<'n> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        self.builder_at(chaincode, n)
    }

    /// `payload_size` ASCII digits (at least the digits of `n`), unique per `n`.
    fn value(n: u64, payload_size: usize) -> String {
        format!("{n:0>payload_size$}")
    }

    fn transfer_at(
        &self,
        n: u64,
        from_key: &str,
        to_key: &str,
        versions: [Option<(u64, u64)>; 2],
        payload_size: usize,
    ) -> Result<Built, TestkitError> {
        self.builder_at(TRANSFER_CHAINCODE, n)
            .args([b"transfer".as_slice(), from_key.as_bytes(), to_key.as_bytes(), b"1"])
            .read(TRANSFER_CHAINCODE, from_key, versions[0])
            .read(TRANSFER_CHAINCODE, to_key, versions[1])
            .write(TRANSFER_CHAINCODE, from_key, Self::value(2 * n, payload_size))
            .write(TRANSFER_CHAINCODE, to_key, Self::value(2 * n + 1, payload_size))
            .build()
    }

    /// FastFabric transfer: args `transfer <from> <to> 1`; reads both keys at
    /// `versions` (`[from, to]`) and writes both with `payload_size`-byte values.
    ///
    /// Errors: as [`TxBuilder::build`].
    pub fn transfer_tx(
        &self,
        from_key: &str,
        to_key: &str,
        versions: [Option<(u64, u64)>; 2],
        payload_size: usize,
    ) -> Result<Built, TestkitError> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        self.transfer_at(n, from_key, to_key, versions, payload_size)
    }

    /// Blind-write transactions (args `init <first> <count>`) creating
    /// transfer accounts `0..n_keys` with `payload_size`-byte values,
    /// `keys_per_tx` accounts per transaction (the last may hold fewer).
    ///
    /// Errors: as [`TxBuilder::build`]; [`TestkitError::Builder`] if
    /// `keys_per_tx` is 0.
    pub fn transfer_init_txs(
        &self,
        n_keys: u64,
        keys_per_tx: u64,
        payload_size: usize,
    ) -> Result<Vec<Built>, TestkitError> {
        if keys_per_tx == 0 {
            return Err(TestkitError::Builder("keys_per_tx must be positive".into()));
        }
        let n_txs = n_keys.div_ceil(keys_per_tx);
        let base = self.counter.fetch_add(n_txs, Ordering::Relaxed);
        (0..n_txs)
            .into_par_iter()
            .map(|t| {
                let first = t * keys_per_tx;
                let last = (first + keys_per_tx).min(n_keys);
                let mut b = self.builder_at(TRANSFER_CHAINCODE, base + t).args([
                    "init".to_string(),
                    first.to_string(),
                    (last - first).to_string(),
                ]);
                for i in first..last {
                    b = b.write(TRANSFER_CHAINCODE, &transfer_key(i), Self::value(i, payload_size));
                }
                b.build()
            })
            .collect()
    }

    /// `n` conflict-free transfers: transaction `i` moves from account `2i`
    /// to `2i + 1`, reading each account `k` at `version_of(k)` (the version
    /// its last write was committed at). Signed in parallel on the rayon
    /// pool; output order and bytes do not depend on the thread count.
    ///
    /// Errors: as [`TxBuilder::build`].
    pub fn transfer_txs<F>(&self, n: u64, payload_size: usize, version_of: F) -> Result<Vec<Built>, TestkitError>
    where
        F: Fn(u64) -> Option<(u64, u64)> + Sync,
    {
        let base = self.counter.fetch_add(n, Ordering::Relaxed);
        (0..n)
            .into_par_iter()
            .map(|i| {
                self.transfer_at(
                    base + i,
                    &transfer_key(2 * i),
                    &transfer_key(2 * i + 1),
                    [version_of(2 * i), version_of(2 * i + 1)],
                    payload_size,
                )
            })
            .collect()
    }

    /// A `_lifecycle` commit of `name` (sequence 1, default endorsement
    /// policy) with this workload's deterministic nonce and timestamp; see
    /// [`crate::commit_definition`].
    ///
    /// Errors: as [`TxBuilder::build`].
    pub fn define_chaincode(&self, name: &str) -> Result<Built, TestkitError> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let (nonce, (secs, nanos)) = self.nonce_and_time(n);
        let base = TxBuilder::new(self.net).nonce(nonce).timestamp(secs, nanos);
        let def = ChaincodeDefinition::new(name, 1, channel_policy_reference(DEFAULT_ENDORSEMENT_POLICY));
        commit_definition_with(base, self.net, &def)
    }

    /// Caliper `create_account <id> cust<id> <checking> <savings>`: a blind
    /// write of the account's JSON.
    ///
    /// Errors: as [`TxBuilder::build`].
    pub fn smallbank_create_account(&self, account: &SmallbankAccount) -> Result<Built, TestkitError> {
        self.builder(SMALLBANK_CHAINCODE)
            .args([
                "create_account".to_string(),
                account.id.to_string(),
                format!("cust{}", account.id),
                account.checking.to_string(),
                account.savings.to_string(),
            ])
            .write(SMALLBANK_CHAINCODE, &account.key(), account.to_json())
            .build()
    }

    /// Caliper `send_payment <amount> <dest> <source>`: reads both accounts at
    /// `versions` (`[dest, source]`) and writes them with `amount` moved from
    /// `source`'s to `dest`'s checking balance (`dest`/`source` are the
    /// states before the payment).
    ///
    /// Errors: as [`TxBuilder::build`].
    pub fn smallbank_send_payment(
        &self,
        amount: i64,
        dest: &SmallbankAccount,
        source: &SmallbankAccount,
        versions: [Option<(u64, u64)>; 2],
    ) -> Result<Built, TestkitError> {
        let new_dest = SmallbankAccount { checking: dest.checking + amount, ..dest.clone() };
        let new_source = SmallbankAccount { checking: source.checking - amount, ..source.clone() };
        self.builder(SMALLBANK_CHAINCODE)
            .args(["send_payment".to_string(), amount.to_string(), dest.id.to_string(), source.id.to_string()])
            .read(SMALLBANK_CHAINCODE, &dest.key(), versions[0])
            .read(SMALLBANK_CHAINCODE, &source.key(), versions[1])
            .write(SMALLBANK_CHAINCODE, &new_dest.key(), new_dest.to_json())
            .write(SMALLBANK_CHAINCODE, &new_source.key(), new_source.to_json())
            .build()
    }
}

/// Accounts written per initialisation transaction by [`transfer_ledger`].
pub const TRANSFER_KEYS_PER_INIT_TX: u64 = 500;

/// A complete, valid ledger for the transfer workload, deterministic in
/// `(net, seed, ...)`:
///
/// - block 0: [`Network::genesis_block`];
/// - block 1: the `transfer` chaincode definition (default policy
///   `/Channel/Application/Endorsement`);
/// - blocks 2..: accounts `0..2n` created by
///   [`Workload::transfer_init_txs`] ([`TRANSFER_KEYS_PER_INIT_TX`] per
///   transaction), `block_size` transactions per block;
/// - then `n` conflict-free transfers ([`Workload::transfer_txs`], reading
///   each account at its creation version and the definition at `(1, 0)`),
///   `block_size` per block.
///
/// Every transaction is endorsed by both peers and created by User1@org1;
/// every one of them is VALID under Fabric's rules. Blocks are signed by the
/// network's orderer with seeded nonces.
///
/// Errors: as [`TxBuilder::build`]; [`TestkitError::Builder`] if
/// `block_size` is 0.
pub fn transfer_ledger(
    net: &Network,
    seed: u64,
    n: u64,
    block_size: usize,
    payload_size: usize,
) -> Result<Vec<Block>, TestkitError> {
    if block_size == 0 {
        return Err(TestkitError::Builder("block_size must be positive".into()));
    }
    let mut chain = Chain::with_seed(net, seed)?;
    let setup = Workload::new(net, seed);
    chain.append(&[setup.define_chaincode(TRANSFER_CHAINCODE)?.envelope]);
    let w = Workload::new(net, seed.wrapping_add(1)).definition_version((1, 0));
    let inits = w.transfer_init_txs(2 * n, TRANSFER_KEYS_PER_INIT_TX, payload_size)?;
    for chunk in inits.chunks(block_size) {
        let envs: Vec<Bytes> = chunk.iter().map(|b| b.envelope.clone()).collect();
        chain.append(&envs);
    }
    let bs = block_size as u64;
    let version_of = |key: u64| {
        let t = key / TRANSFER_KEYS_PER_INIT_TX;
        Some((2 + t / bs, t % bs))
    };
    let transfers = w.transfer_txs(n, payload_size, version_of)?;
    for chunk in transfers.chunks(block_size) {
        let envs: Vec<Bytes> = chunk.iter().map(|b| b.envelope.clone()).collect();
        chain.append(&envs);
    }
    Ok(chain.into_blocks())
}

/// A ledger that exercises endorsement policies over `net` (any number of peer orgs): one block per chaincode of
/// `chaincodes` defining it — `(name, Some(rule))` with a signature policy in configtxgen's syntax (e.g.
/// `OutOf(2, 'Org1MSP.peer', 'Org2MSP.peer', 'Org3MSP.peer')`), `(name, None)` with the channel's
/// `/Channel/Application/Endorsement` — then `blocks` blocks of `per_block` writes. Transaction `i` of block `b`
/// writes `k{b}-{i}` in chaincode `i % chaincodes.len()`, endorsed by the peers of the orgs (0-based) in
/// `endorsements[(i + b) % endorsements.len()]`, so endorser sets that fall short of a policy give
/// ENDORSEMENT_POLICY_FAILURE. The genesis block is first.
///
/// Errors: a rule that does not parse, an empty `chaincodes` or `endorsements`, or as [`TxBuilder::build`].
pub fn endorsement_ledger(
    net: &Network,
    chaincodes: &[(&str, Option<&str>)],
    endorsements: &[&[usize]],
    blocks: usize,
    per_block: usize,
) -> Result<Vec<Block>, TestkitError> {
    if chaincodes.is_empty() || endorsements.is_empty() {
        return Err(TestkitError::Builder("chaincodes and endorsements must not be empty".into()));
    }
    let mut chain = Chain::with_seed(net, 41)?;
    for (name, rule) in chaincodes {
        let policy = match rule {
            Some(rule) => ApplicationPolicy {
                r#type: Some(application_policy::Type::SignaturePolicy(
                    ferrofabric_configtxgen::signature_policy(rule)
                        .map_err(|e| TestkitError::Builder(format!("policy {rule:?}: {e}")))?,
                )),
            },
            None => channel_policy_reference(DEFAULT_ENDORSEMENT_POLICY),
        };
        chain.append(&[crate::define_chaincode(net, name, 1, policy)?.envelope]);
    }
    for b in 0..blocks {
        let mut envs = Vec::with_capacity(per_block);
        for i in 0..per_block {
            let (cc, _) = chaincodes[i % chaincodes.len()];
            let peers: Vec<_> = endorsements[(i + b) % endorsements.len()].iter().map(|&o| net.peer(o)).collect();
            let built = TxBuilder::new(net)
                .chaincode(cc, "1.0")
                .endorsers(&peers)
                .write(cc, &format!("k{b}-{i}"), format!("v{b}-{i}"))
                .build()?;
            envs.push(built.envelope);
        }
        chain.append(&envs);
    }
    Ok(chain.into_blocks())
}
