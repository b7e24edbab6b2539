//! The consenter set of one channel configuration as this node sees it (the Orderer group's
//! `Orderers.consenter_mapping`): the consenters' keys, the TLS certificates that name each of them on the cluster
//! service, this node's own id, and where to reach the others. Built when the chain starts and again after every
//! config block, so that consenters added or removed by a config update take part from the next block on.

use std::collections::HashMap;

use bytes::Bytes;
use ferrofabric_channelconfig::{bft_block_validation_policy, ChannelConfig};
use ferrofabric_comm::pem_cert_der;
use ferrofabric_orderer::PullSource;
use ferrofabric_protos::msp::SerializedIdentity;
use prost::Message;

use crate::context::{Consenter, ConsenterId, ConsenterKey, Consenters};

/// One configuration's consenters, seen from this node.
pub(crate) struct Membership {
    /// Every consenter with its enrollment key, sorted by id.
    pub(crate) consenters: Consenters,
    /// The consenter each client or server TLS certificate (DER) names.
    pub(crate) by_cert: HashMap<Vec<u8>, ConsenterId>,
    /// This node's consenter id: the consenter whose `identity` is this node's signing certificate; `None` if this
    /// node is not (or no longer) a consenter.
    pub(crate) self_id: Option<ConsenterId>,
    /// The other consenters' cluster endpoints (id, host, port).
    pub(crate) others: Vec<PullSource>,
}

/// Reads the consenter set of `config` for the node whose serialized signing identity is `ours`.
///
/// Errors: no Orderer group, no consenters, a consenter identity that does not deserialize, a bad port.
pub(crate) fn membership(config: &ChannelConfig, ours: &Bytes) -> Result<Membership, String> {
    let channel = config.channel_id();
    let orderer = config.orderer().ok_or("the channel configuration has no Orderer group")?;
    let mapping = orderer.consenters();
    if mapping.is_empty() {
        return Err(format!("BFT channel {channel} has no consenters (Orderers.consenter_mapping)"));
    }
    let ours = SerializedIdentity::decode(ours.clone()).map_err(|e| format!("this node's signing identity: {e}"))?;
    let mut consenters = Vec::new();
    let mut by_cert = HashMap::new();
    let mut self_id = None;
    let mut others = Vec::new();
    for c in mapping {
        let serialized = SerializedIdentity { mspid: c.msp_id.clone(), id_bytes: c.identity.clone() };
        let identity = config
            .msp_manager()
            .deserialize_identity(&serialized.encode_to_vec())
            .map_err(|e| format!("consenter {} identity: {e}", c.id))?;
        let id = ConsenterId(c.id);
        consenters.push(Consenter { id, key: ConsenterKey(std::sync::Arc::new(identity.public_key().clone())) });
        for pem in [&c.client_tls_cert, &c.server_tls_cert] {
            if let Some(der) = pem_cert_der(pem) {
                by_cert.insert(der, id);
            }
        }
        if c.identity == ours.id_bytes && c.msp_id == ours.mspid {
            self_id = Some(id);
        } else {
            let port = u16::try_from(c.port).map_err(|_| format!("consenter {}:{} has a bad port", c.host, c.port))?;
            others.push(PullSource { id: u64::from(c.id), host: c.host.clone(), port });
        }
    }
    Ok(Membership { consenters: Consenters::new(consenters), by_cert, self_id, others })
}

/// Checks that `config`'s `BlockValidation` policy is the one its consenter set implies (Fabric 3's SmartBFT
/// `ConfigBlockValidator.checkConsentersMatchPolicy`, `orderer/consensus/smartbft/configverifier.go`): a config
/// update that adds or removes a consenter must rewrite the policy with it, or blocks signed by the new set could
/// not be verified by peers.
///
/// Errors: Fabric's message, naming the expected and the actual policy.
pub(crate) fn check_block_validation(config: &ChannelConfig) -> Result<(), String> {
    let orderer = config.orderer().ok_or("no 'Orderer' group in channel groups")?;
    let expected = bft_block_validation_policy(orderer.consenters());
    let actual = config
        .config()
        .channel_group
        .as_ref()
        .and_then(|g| g.groups.get("Orderer"))
        .and_then(|o| o.policies.get("BlockValidation"))
        .and_then(|p| p.policy.clone())
        .ok_or("block validation policy is not found in the policies of 'Orderer' group")?;
    if actual != expected {
        return Err(format!(
            "block validation policy should be a signature policy: {expected:?} but it is {actual:?} instead"
        ));
    }
    Ok(())
}
