//! `AtomicBroadcast/Deliver` (Fabric `common/deliver/deliver.go` over `common/ledger/blockledger/fileledger`):
//! the orderer's channels and access rule plugged into the one Deliver server of `ferrofabric-deliver` (see
//! [`ferrofabric_deliver::DeliverHandler`] for the order of checks, the statuses and the streaming of stored block
//! bytes).
//!
//! What the orderer supplies: its channels ([`Registrar`] as the chain manager; a channel's ledger, configuration
//! and errored state — a channel whose consensus failed answers SERVICE_UNAVAILABLE unless the request is
//! `BEST_EFFORT`), the access rule [`ChannelReaders`] (`/Channel/Readers`, as Fabric's orderer), and its
//! `deliver_streams_opened` / `deliver_blocks_sent` counters.

use std::sync::Arc;
use std::time::Duration;

use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_comm::Shutdown;
use ferrofabric_deliver::{
    AccessDenied, BlockSource, Chain, ChainManager, DeliverHandler, DeliverObserver, PolicyChecker, RequestKind,
};
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::registrar::{Channel, Registrar};

/// The orderer's Deliver access rule: the request's signed data must satisfy the channel's `/Channel/Readers`
/// (Fabric's orderer `deliver.NewPolicyChecker(policies.ChannelReaders, ...)`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ChannelReaders;

impl PolicyChecker for ChannelReaders {
    fn check(&self, config: &ChannelConfig, _kind: RequestKind, signed: &SignedData) -> Result<(), AccessDenied> {
        const READERS: &str = "/Channel/Readers";
        let policy = config.policy(READERS).ok_or_else(|| AccessDenied::NoPolicy(READERS.to_owned()))?;
        let set = SignatureSet::new(vec![signed.clone()], config.msp_manager());
        policy.evaluate(&set).map_err(|source| AccessDenied::NotSatisfied { path: READERS.to_owned(), source })
    }
}

impl Chain for Channel {
    fn reader(&self) -> &dyn BlockSource {
        &**self.support.store()
    }
    fn config(&self) -> Option<Arc<ChannelConfig>> {
        Some(self.support.config())
    }
    fn errored(&self) -> Option<watch::Receiver<Option<String>>> {
        Some(self.support.subscribe_errored())
    }
}

/// The channels of a [`Registrar`], for the Deliver server.
#[derive(Clone)]
pub(crate) struct RegistrarChains(pub Arc<Registrar>);

impl ChainManager for RegistrarChains {
    fn chain(&self, channel_id: &str) -> Option<Arc<dyn Chain>> {
        self.0.channel(channel_id).map(|c| c as Arc<dyn Chain>)
    }
}

/// Counts Deliver streams and blocks in the node's [`Metrics`].
#[derive(Debug, Clone)]
pub(crate) struct DeliverCounters(pub Arc<Metrics>);

impl DeliverObserver for DeliverCounters {
    fn stream_opened(&self) {
        self.0.deliver_stream_opened();
    }
    fn block_sent(&self, _kind: RequestKind) {
        self.0.deliver_block_sent();
    }
}

/// The Deliver handler of a node: all channels of `registrar`, `/Channel/Readers`, request timestamps within
/// `time_window` of the server clock (`General.Authentication.TimeWindow`), streams ended when `shutdown` fires.
pub(crate) fn handler(registrar: Arc<Registrar>, time_window: Duration, shutdown: Shutdown) -> DeliverHandler {
    let counters = DeliverCounters(registrar.metrics().clone());
    DeliverHandler::new(Arc::new(RegistrarChains(registrar)), Arc::new(ChannelReaders), time_window)
        .with_observer(Arc::new(counters))
        .with_shutdown(shutdown)
}
