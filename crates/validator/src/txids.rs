//! The ledger's transaction ids, for Fabric's DUPLICATE_TXID check (Fabric's peer asks its block index,
//! `core/ledger/kvledger` `TxIDExists`; here the set lives in memory beside the world state). The validator and
//! the endorsers' replicas of the ledger keep one each.
//!
//! The set only grows, so it must never stop the commit path to grow. One hash set of a million ids doubles in a
//! single insert that moves every entry (≈ 130 ms for 460,000 ids on one core, longer on a loaded host): a stall
//! of the validator thread that clients see as a burst of block latency at every doubling. The ids are therefore
//! kept in a [`ShardMap`]: 256 shards picked by a keyed hash, each doubling on its own at a staggered moment, so
//! that one insert moves at most 1/256 of the ids and the shards' doublings do not fall together.
//!
//! A well-formed txid (64 lowercase hex digits: the hex SHA-256 of nonce ‖ creator that Fabric requires) is kept
//! as its 32 bytes, a third of the memory of the string; any other id the block index would record (an invalid
//! transaction's) is kept as it is.

use ferrofabric_shardmap::ShardMap;

/// A set of transaction ids (Fabric's txid strings, compared exactly), grown without whole-set rehashing: each
/// insert moves at most one of 256 shards. Memory: about 40 bytes per well-formed id plus the hash tables' slack.
#[derive(Debug, Default)]
pub struct TxIds {
    ids: ShardMap<TxId, ()>,
    len: usize,
}

/// One id, compact when it has Fabric's form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TxId {
    /// 64 lowercase hex digits, decoded.
    Sha256([u8; 32]),
    /// Anything else, as given.
    Other(Box<str>),
}

impl TxId {
    fn of(txid: &str) -> TxId {
        let mut bytes = [0u8; 32];
        if txid.len() == 64 && hex_lower(txid.as_bytes(), &mut bytes) {
            TxId::Sha256(bytes)
        } else {
            TxId::Other(txid.into())
        }
    }
}

/// Decodes lowercase hex into `out` (exactly twice its length); false on any other character, so that "AB" and
/// "ab" stay different ids, as they are to Fabric.
fn hex_lower(digits: &[u8], out: &mut [u8]) -> bool {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(hi), Some(lo)) => *byte = hi << 4 | lo,
            _ => return false,
        }
    }
    true
}

impl TxIds {
    /// Whether `txid` is in the set.
    pub fn contains(&self, txid: &str) -> bool {
        self.ids.contains_key(&TxId::of(txid))
    }

    /// Adds `txid`; false if it was there already.
    pub fn insert(&mut self, txid: &str) -> bool {
        let added = self.ids.insert(TxId::of(txid), ()).is_none();
        self.len += usize::from(added);
        added
    }

    /// Ids in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The capacity of the largest shard: what one insert may have to move.
    #[cfg(test)]
    fn largest_shard_capacity(&self) -> usize {
        self.ids.capacities().into_iter().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha_hex(i: u64) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(i.to_le_bytes()))
    }

    #[test]
    fn membership_is_exact_for_every_form_of_id() {
        let mut ids = TxIds::default();
        let well_formed = sha_hex(1);
        for id in [well_formed.as_str(), "", "not-hex", &well_formed.to_uppercase(), &well_formed[..62]] {
            assert!(!ids.contains(id), "{id:?} before insert");
            assert!(ids.insert(id), "{id:?} first insert");
            assert!(ids.contains(id), "{id:?} after insert");
            assert!(!ids.insert(id), "{id:?} second insert");
        }
        assert_eq!(ids.len(), 5);
        // Upper- and lowercase forms of one hash are two ids, as Fabric compares strings.
        assert!(!ids.contains(&sha_hex(2)));
        assert!(!ids.contains(&sha_hex(2).to_uppercase()));
    }

    #[test]
    fn no_insert_moves_more_than_a_small_fraction_of_the_set() {
        let mut ids = TxIds::default();
        let n = 200_000u64;
        for i in 0..n {
            ids.insert(&sha_hex(i));
        }
        assert_eq!(ids.len(), n as usize);
        // Spread evenly, no shard holds more than a few times its fair share, so no doubling moves more than that.
        let fair = n as usize / ferrofabric_shardmap::SHARDS;
        assert!(ids.largest_shard_capacity() <= 8 * fair, "{} vs fair {fair}", ids.largest_shard_capacity());
        assert!((0..n).step_by(997).all(|i| ids.contains(&sha_hex(i))));
    }
}
