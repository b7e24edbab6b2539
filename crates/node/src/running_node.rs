//! A node running in this process ([`RunningNode`]): what `ferrofabric node` started in-process answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ferrofabric_blockstore_service::RunningBlockstore;
use ferrofabric_chaincode_support::ChaincodeSupport;
use ferrofabric_committer::RunningCommitter;
use ferrofabric_endorser::Endorser;
use ferrofabric_orderer::RunningOrderer;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::layout::Layout;
use crate::profile::NodeInfo;

/// A running node. Dropping it does not stop it; call [`RunningNode::shutdown`].
pub struct RunningNode {
    /// What `node.json` says.
    pub info: NodeInfo,
    /// The node directory.
    pub layout: Layout,
    /// The committer (its status, store and internal Deliver address).
    pub committer: RunningCommitter,
    /// The endorsers of Org1 and Org2, in that order.
    pub endorsers: Vec<Endorser>,
    /// The chaincode support of Org1's and Org2's peers (their installed packages and chaincode streams).
    pub chaincodes: Vec<Arc<ChaincodeSupport>>,
    pub(crate) orderer: RunningOrderer,
    pub(crate) blockstore: RunningBlockstore,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for RunningNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningNode").field("info", &self.info).finish_non_exhaustive()
    }
}

impl RunningNode {
    /// Stops the peer listeners and the replicas' followers, then the block-store service, the committer (which
    /// leaves a final state checkpoint) and the orderer. Clients should close their streams first: an open
    /// Deliver stream keeps the committer's ledger open (this waits up to 5 s for them).
    ///
    /// Errors: the committer's or the block-store service's pipeline had failed.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.shutdown.send_replace(true);
        // The peer listeners close gracefully, which waits for clients' open streams (an SDK's commit-event
        // stream never ends by itself): give them a moment, then cut them off.
        let aborts: Vec<_> = self.tasks.iter().map(JoinHandle::abort_handle).collect();
        if tokio::time::timeout(Duration::from_secs(2), futures::future::join_all(self.tasks)).await.is_err() {
            aborts.iter().for_each(|a| a.abort());
        }
        let stored = self.blockstore.shutdown().await;
        let ledger = Arc::downgrade(&self.committer.store);
        let committed = self.committer.shutdown().await;
        self.orderer.shutdown().await;
        // Deliver streams still open on the peer ports hold the committer's ledger until their clients go away;
        // wait a little so that a node restarted in this process can open it again.
        let deadline = Instant::now() + Duration::from_secs(15);
        while ledger.strong_count() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        committed.context("committer")?;
        stored.context("block-store service")
    }

    /// Waits until both endorser replicas have applied every block the committer has stored.
    ///
    /// Errors: they did not within `timeout`.
    pub async fn wait_for_replicas(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let height = self.committer.store.height();
            if self.endorsers.iter().all(|e| e.replica().height() >= height) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the endorser replicas did not reach height {height} within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
