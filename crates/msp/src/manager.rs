//! The MSPs of a channel and the identity cache (msp/mspmgrimpl.go plus
//! the caching of msp/cache/cache.go).

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use ferrofabric_protos::common::MspPrincipal;
use ferrofabric_protos::msp::SerializedIdentity;
use prost::Message;

use crate::error::MspError;
use crate::msp::{Identity, Msp};

/// Cache size above which the cache is emptied before inserting: bounds
/// memory against floods of distinct (e.g. garbage) creators.
const CACHE_LIMIT: usize = 100_000;

/// All MSPs of a channel, plus the identity cache keyed by the exact
/// SerializedIdentity bytes (deserialise + validate + pre-parse the key
/// once). Cheap to share as `Arc<MspManager>`; `&self` methods are
/// thread-safe.
#[derive(Debug)]
pub struct MspManager {
    msps: HashMap<String, Msp>,
    cache: DashMap<Vec<u8>, Result<Arc<Identity>, MspError>>,
}

impl MspManager {
    /// A manager over `msps`, keyed by MSP name (a later MSP with the same
    /// name replaces an earlier one, as in Fabric's `Setup`).
    pub fn new(msps: Vec<Msp>) -> MspManager {
        MspManager { msps: msps.into_iter().map(|m| (m.name().to_owned(), m)).collect(), cache: DashMap::new() }
    }

    /// The MSP named `mspid`, if part of this manager.
    pub fn msp(&self, mspid: &str) -> Option<&Msp> {
        self.msps.get(mspid)
    }

    /// Names of all MSPs (unordered).
    pub fn mspids(&self) -> impl Iterator<Item = &str> {
        self.msps.keys().map(String::as_str)
    }

    /// Fabric's `mspManagerImpl.DeserializeIdentity`: decode the
    /// SerializedIdentity, find its MSP by `mspid`, parse the PEM
    /// certificate; cached by the exact input bytes, errors included.
    ///
    /// Errors: [`MspError::Decode`] (bad protobuf), [`MspError::UnknownMsp`],
    /// [`MspError::Pem`], [`MspError::Certificate`],
    /// [`MspError::UnsupportedKey`] (not ECDSA P-256). A certificate that
    /// does not validate (e.g. no chain to the MSP's roots) is returned as
    /// an identity whose [`Identity::validate`] fails.
    pub fn deserialize_identity(&self, serialized_identity: &[u8]) -> Result<Arc<Identity>, MspError> {
        if let Some(hit) = self.cache.get(serialized_identity) {
            return hit.clone();
        }
        let result = self.deserialize_uncached(serialized_identity);
        if self.cache.len() >= CACHE_LIMIT {
            self.cache.clear();
        }
        self.cache.entry(serialized_identity.to_vec()).or_insert(result).clone()
    }

    fn deserialize_uncached(&self, bytes: &[u8]) -> Result<Arc<Identity>, MspError> {
        let sid = SerializedIdentity::decode(bytes)
            .map_err(|e| MspError::Decode(format!("could not deserialize a SerializedIdentity: {e}")))?;
        let msp = self.msps.get(&sid.mspid).ok_or_else(|| MspError::UnknownMsp(sid.mspid.clone()))?;
        msp.identity_from_id_bytes(&sid.id_bytes).map(Arc::new)
    }

    /// Fabric's `identity.SatisfiesPrincipal` with MSP v1.4.3 semantics, as
    /// used by every Fabric 2.5 channel: ROLE (member, admin, client, peer,
    /// orderer), IDENTITY, ORGANIZATION_UNIT, COMBINED (all must hold) and
    /// ANONYMITY (X.509 identities are nominal). The identity's own MSP
    /// judges it, so a principal naming another MSP is not satisfied.
    ///
    /// Errors: [`MspError::Principal`] when not satisfied,
    /// [`MspError::Validation`] when it requires a valid identity and `id`
    /// is not, [`MspError::Decode`] for undecodable principal bytes.
    pub fn satisfies_principal(&self, id: &Identity, principal: &MspPrincipal) -> Result<(), MspError> {
        id.msp.satisfies_principal(id, principal, &|bytes| self.deserialize_identity(bytes))
    }

    /// Number of cached deserialisation results.
    pub fn cached_identities(&self) -> usize {
        self.cache.len()
    }
}
