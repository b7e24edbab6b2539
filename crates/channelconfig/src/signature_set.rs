//! Signature sets with per-item caches, evaluated lazily.
//!
//! Fabric (`common/policies/policy.go`, `SignatureSetToValidIdentities`) turns a list of signed items into a
//! list of "accepted" identities before any rule is looked at: every item is deserialised, dropped if an
//! item with the same identity (MSP ID + certificate hash) was already accepted, and dropped if its
//! signature does not verify. Only then does the rule tree run over that list.
//!
//! Here the rule tree asks for acceptance only of items it is about to use, so signatures of items no rule
//! needs are never verified. The verdicts are the same as Fabric's because acceptance of item `j` is a pure
//! function of the items up to `j`:
//!
//! `accepted(j) = deserialises(j) && verifies(j) && no k < j with the same identifier verifies`
//!
//! (the first verifying item of an identifier is the one Fabric keeps; Fabric records the identifier only
//! after a successful verify, so earlier non-verifying duplicates do not block it). Accepted items keep
//! their relative order, so "first unused accepted identity" picks the same identity whether positions are
//! counted in Fabric's compacted list or in item indices, which is what [`crate::Policy`] uses.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use ferrofabric_msp::{Identity, MspManager};

/// One signed item: Fabric's `protoutil.SignedData` (`protoutil/signeddata.go`).
///
/// `data` is the exact byte string that was signed (the hash is computed by the verifier), `identity` a
/// marshaled `msp.SerializedIdentity`, `signature` a DER-encoded ECDSA signature. Where the items come
/// from is the caller's business, e.g. for an endorsement `data = proposal_response_payload ‖ endorser`,
/// for a block signature `data = metadata.value ‖ signature_header ‖ DER(block header)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SignedData {
    /// The signed bytes.
    pub data: Bytes,
    /// Marshaled `msp.SerializedIdentity` of the signer.
    pub identity: Bytes,
    /// DER-encoded ECDSA (r, s) signature over `data`.
    pub signature: Bytes,
}

/// Per-item caches. `OnceLock` makes each computation happen at most once even when several threads
/// evaluate policies on the same set.
#[derive(Default)]
struct ItemCache {
    /// `None` inside: the identity did not deserialise (unknown MSP, bad proto, bad certificate).
    identity: OnceLock<Option<Arc<Identity>>>,
    /// Whether the signature verifies under the item's identity.
    signature_ok: OnceLock<bool>,
    /// Whether the item is in Fabric's list of valid, de-duplicated identities.
    accepted: OnceLock<bool>,
}

/// A set of signatures being evaluated against one or more policies.
///
/// Shape: `n` [`SignedData`] items in the order they were given (order matters: it decides which of two
/// items of the same identity counts and which identity a principal consumes). Each item's
/// deserialisation, signature check and acceptance are cached, so the several sub-policies of an implicit
/// meta policy, or several policies evaluated on the same set, verify each signature at most once.
///
/// [`SignatureSet::new`] verifies nothing up front; [`SignatureSet::new_verify_all`] runs Fabric's eager
/// pass (`SignatureSetToValidIdentities`, `common/policies/policy.go`). Both give identical verdicts for
/// every policy. The set is `Sync`: share it by reference across threads.
///
/// Identities are resolved with the `MspManager` given here, so build the set with the channel's manager
/// ([`crate::ChannelConfig::msp_manager`]).
pub struct SignatureSet<'m> {
    items: Vec<SignedData>,
    cache: Vec<ItemCache>,
    msps: &'m MspManager,
    verifications: AtomicUsize,
}

impl std::fmt::Debug for SignatureSet<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignatureSet")
            .field("items", &self.items.len())
            .field("verifications", &self.verifications())
            .finish_non_exhaustive()
    }
}

impl<'m> SignatureSet<'m> {
    /// A lazy set: signatures are verified only when a policy needs the item (see module docs).
    pub fn new(items: Vec<SignedData>, msps: &'m MspManager) -> Self {
        let cache = items.iter().map(|_| ItemCache::default()).collect();
        SignatureSet { items, cache, msps, verifications: AtomicUsize::new(0) }
    }

    /// An eager set: deserialises and verifies in Fabric's order right away, skipping (without verifying)
    /// items whose identity was already accepted, exactly like `SignatureSetToValidIdentities`.
    /// Policies then only read the caches.
    pub fn new_verify_all(items: Vec<SignedData>, msps: &'m MspManager) -> Self {
        let set = Self::new(items, msps);
        let mut accepted_ids = HashSet::new();
        for (i, slot) in set.cache.iter().enumerate() {
            let accepted = match set.identity(i) {
                None => false,
                Some(id) if accepted_ids.contains(id.identifier()) => false,
                Some(id) => {
                    let ok = set.signature_ok(i);
                    if ok {
                        accepted_ids.insert(id.identifier().clone());
                    }
                    ok
                }
            };
            // The set is not shared yet, so the cell is empty and this cannot fail; ignore the Result.
            let _ = slot.accepted.set(accepted);
        }
        set
    }

    /// A set of `identities` (marshaled `SerializedIdentity`s) whose signatures count as valid: for asking which
    /// signers *would* satisfy a policy before any of them signs, as an endorsement plan does (Fabric's discovery
    /// evaluates policies on principal sets, `common/policies/inquire`). Nothing is verified; identities are still
    /// deserialised and de-duplicated as in a signed set.
    pub fn presumed_signed(identities: Vec<Bytes>, msps: &'m MspManager) -> Self {
        let items = identities.into_iter().map(|identity| SignedData { identity, ..SignedData::default() }).collect();
        Self::presumed_valid(items, msps)
    }

    /// A set whose signatures count as valid without being verified, because a trusted verifier already checked
    /// them (the BMac card, whose verdicts the host commits with). Identities are still deserialised and
    /// de-duplicated as in [`SignatureSet::new`].
    pub fn presumed_valid(items: Vec<SignedData>, msps: &'m MspManager) -> Self {
        let set = Self::new(items, msps);
        for slot in &set.cache {
            // The set is not shared yet, so the cell is empty and this cannot fail; ignore the Result.
            let _ = slot.signature_ok.set(true);
        }
        set
    }

    /// How many ECDSA signature verifications this set has run so far (each item at most once).
    pub fn verifications(&self) -> usize {
        self.verifications.load(Ordering::Relaxed)
    }

    /// Number of items (valid or not).
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the set has no items.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items, in the order given.
    pub fn items(&self) -> &[SignedData] {
        &self.items
    }

    /// The MSP manager identities are resolved with.
    pub fn msp_manager(&self) -> &'m MspManager {
        self.msps
    }

    /// The deserialised identity of item `i`, `None` if it does not deserialise (or `i` is out of range).
    pub fn identity(&self, i: usize) -> Option<&Arc<Identity>> {
        let (item, slot) = (self.items.get(i)?, self.cache.get(i)?);
        slot.identity.get_or_init(|| self.msps.deserialize_identity(&item.identity).ok()).as_ref()
    }

    /// Whether item `i` is in Fabric's list of valid, de-duplicated identities. Verifies the item's
    /// signature, and those of earlier items of the same identity, only if not known yet.
    pub fn is_accepted(&self, i: usize) -> bool {
        let Some(slot) = self.cache.get(i) else {
            return false;
        };
        *slot.accepted.get_or_init(|| {
            let Some(id) = self.identity(i) else {
                return false;
            };
            // An earlier item of the same identity that verifies was accepted instead of this one.
            let shadowed = (0..i).any(|k| {
                self.identity(k).is_some_and(|other| other.identifier() == id.identifier()) && self.signature_ok(k)
            });
            !shadowed && self.signature_ok(i)
        })
    }

    /// Whether acceptance of item `i` is already known to be false (no work is done).
    pub(crate) fn known_rejected(&self, i: usize) -> bool {
        matches!(self.cache.get(i).and_then(|s| s.accepted.get()), Some(false))
    }

    /// Cached signature check of item `i`; callers make sure it deserialised.
    fn signature_ok(&self, i: usize) -> bool {
        let (Some(item), Some(slot)) = (self.items.get(i), self.cache.get(i)) else {
            return false;
        };
        *slot.signature_ok.get_or_init(|| {
            let Some(id) = self.identity(i) else {
                return false;
            };
            self.verifications.fetch_add(1, Ordering::Relaxed);
            id.verify(&item.data, &item.signature).is_ok()
        })
    }
}
