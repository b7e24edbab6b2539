//! The consenter set of one channel as this node applies it, and the links to the other consenters (Fabric
//! `orderer/consensus/etcdraft/chain.go` `configureComm` and the `Consenters` / `BlockMetadata` it keeps).
//!
//! The set changes when a config block is applied: the block's `etcdraft.BlockMetadata.consenter_ids` name
//! the Raft IDs of the new configuration's consenters, in configuration order (the leader computed them with
//! [`compute_membership_changes`] before signing the block). Links to consenters that
//! are gone stop, new consenters are dialed, and a consenter whose entry changed (a rotated certificate, a
//! new endpoint) is dialed again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::membership::{compute_membership_changes, raft_consenters};
use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_comm::pem_cert_der;
use ferrofabric_orderer::{Metrics, PullSource};
use ferrofabric_protos::common::Envelope;
use ferrofabric_protos::etcdraft::{BlockMetadata, Consenter};
use prost::Message;
use tokio::sync::watch;

use super::transport::{endpoint, ClusterTls, LinkEvent, PeerLink};

/// One consenter set, immutable; replaced as a whole.
pub(crate) struct Members {
    /// `consenter_ids` in configuration order and `next_consenter_id` (its `raft_index` is not used).
    pub(crate) metadata: BlockMetadata,
    /// The consenters by Raft ID.
    pub(crate) consenters: BTreeMap<u64, Consenter>,
    /// Links to the other consenters by Raft ID.
    pub(crate) peers: HashMap<u64, PeerLink>,
    /// DER of every consenter's client and server TLS certificate → Raft ID.
    pub(crate) certs: Vec<(Vec<u8>, u64)>,
    /// The other consenters, to pull blocks from.
    pub(crate) sources: Vec<PullSource>,
}

impl Members {
    /// Whether `id` is a consenter.
    pub(crate) fn contains(&self, id: u64) -> bool {
        self.consenters.contains_key(&id)
    }

    /// Followers that must acknowledge a backup before the leader answers SUCCESS (`(n - 1) / 2`).
    pub(crate) fn backups(&self) -> usize {
        self.consenters.len().saturating_sub(1) / 2
    }

    /// The Raft ID of the consenter presenting the TLS certificate `der`.
    pub(crate) fn id_of(&self, der: &[u8]) -> Option<u64> {
        self.certs.iter().find(|(c, _)| c == der).map(|(_, id)| *id)
    }
}

/// The consenters of `consenters` (configuration order) by Raft ID, as `metadata.consenter_ids` names them;
/// `None` when the counts differ.
pub(crate) fn by_id(metadata: &BlockMetadata, consenters: &[Consenter]) -> Option<BTreeMap<u64, Consenter>> {
    (metadata.consenter_ids.len() == consenters.len())
        .then(|| metadata.consenter_ids.iter().copied().zip(consenters.iter().cloned()).collect())
}

/// The consenter set that follows `old` when the configuration's consenters become `consenters`: the IDs of
/// `recorded` (the config block's metadata) when it names one per consenter, else computed as the leader
/// does.
///
/// Errors: the change is not one Fabric accepts (see [`compute_membership_changes`]).
pub(crate) fn next_set(
    old: &Members,
    recorded: Option<BlockMetadata>,
    consenters: &[Consenter],
) -> Result<(BlockMetadata, BTreeMap<u64, Consenter>), String> {
    if let Some(md) = recorded {
        if let Some(map) = by_id(&md, consenters) {
            return Ok((md, map));
        }
    }
    let changes = compute_membership_changes(&old.metadata, &old.consenters, consenters).map_err(|e| e.to_string())?;
    Ok((changes.new_metadata, changes.new_consenters))
}

/// What is needed to open links to consenters: shared by every consenter set of a channel.
pub(crate) struct Dialer {
    /// This node's cluster TLS (None: only a single-consenter channel can be served).
    pub(crate) tls: Option<ClusterTls>,
    /// Largest message accepted.
    pub(crate) max_message: usize,
    /// Receives link events (to the Raft thread).
    pub(crate) report: Arc<dyn Fn(LinkEvent) + Send + Sync>,
    /// Turns true when the chain halts.
    pub(crate) halt: watch::Receiver<bool>,
    /// Counters.
    pub(crate) metrics: Arc<Metrics>,
}

impl Dialer {
    /// The consenter set `consenters` (by Raft ID, `metadata` naming them) seen from node `self_id`: links to
    /// the others, reusing those of `old` whose consenter entry did not change. `extra_roots` are the TLS CA
    /// roots of the channel configuration.
    ///
    /// Errors: another consenter to reach but no cluster TLS; a consenter with a bad port or endpoint.
    pub(crate) fn members(
        &self,
        self_id: u64,
        metadata: BlockMetadata,
        consenters: BTreeMap<u64, Consenter>,
        old: Option<&Members>,
        extra_roots: &[Vec<u8>],
    ) -> Result<Members, String> {
        let mut peers = HashMap::new();
        let mut certs = Vec::new();
        let mut sources = Vec::new();
        for (id, c) in &consenters {
            for pem in [&c.client_tls_cert, &c.server_tls_cert] {
                if let Some(der) = pem_cert_der(pem) {
                    certs.push((der, *id));
                }
            }
            if *id == self_id {
                continue;
            }
            let port = u16::try_from(c.port).map_err(|_| format!("consenter {}:{} has a bad port", c.host, c.port))?;
            sources.push(PullSource { id: *id, host: c.host.clone(), port });
            let kept = old.filter(|o| o.consenters.get(id) == Some(c)).and_then(|o| o.peers.get(id));
            if let Some(link) = kept {
                peers.insert(*id, link.clone());
                continue;
            }
            let tls = self.tls.as_ref().ok_or_else(|| {
                "the channel has more than one consenter: cluster TLS is needed (General.Cluster.ClientCertificate and \
                 ClientPrivateKey, or General.TLS)"
                    .to_owned()
            })?;
            let ep = endpoint(&c.host, port, tls, extra_roots)
                .map_err(|e| format!("consenter {}:{}: {e}", c.host, c.port))?;
            let link = PeerLink::spawn(
                *id,
                ep,
                self.max_message,
                self.report.clone(),
                self.halt.clone(),
                self.metrics.clone(),
            );
            peers.insert(*id, link);
        }
        Ok(Members { metadata, consenters, peers, certs, sources })
    }
}

/// The Raft metadata and consenters after the CONFIG envelope `env`, when its configuration is etcdraft's
/// and its consenter set differs from `consenters`.
///
/// Errors: the envelope does not decode, or the change is not one Fabric accepts.
#[allow(clippy::type_complexity)]
pub(crate) fn membership_after(
    env: &Bytes,
    metadata: &BlockMetadata,
    consenters: &BTreeMap<u64, Consenter>,
) -> Result<Option<(BlockMetadata, BTreeMap<u64, Consenter>)>, String> {
    let env = Envelope::decode(env.clone()).map_err(|e| format!("config envelope: {e}"))?;
    let config = ChannelConfig::from_envelope(&env).map_err(|e| e.to_string())?;
    let Some(next) = raft_consenters(&config).map_err(|e| e.to_string())? else { return Ok(None) };
    let changes = compute_membership_changes(metadata, consenters, &next).map_err(|e| e.to_string())?;
    if !changes.changed() && changes.new_metadata.consenter_ids == metadata.consenter_ids {
        return Ok(None);
    }
    tracing::info!(change = %changes, consenters = ?changes.new_metadata.consenter_ids, "etcdraft: config block changes the consenter set");
    Ok(Some((changes.new_metadata, changes.new_consenters)))
}
