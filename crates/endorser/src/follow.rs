//! Keeping a [`Replica`] up to date by following the committer's peer `Deliver` service
//! (`/protos.Deliver/Deliver`): validated blocks (with TRANSACTIONS_FILTER) from the replica's height on, applied
//! as they arrive; the stream is re-opened after errors, resuming from the replica's height. Each applied block may
//! also be kept in a [`RecentBlocks`] window, for the gateway on the endorser's port.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_comm::{ClientTls, DeliverApi, DeliverItem};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Status;
use prost::Message;
use tokio::sync::watch;

use crate::client::seek_envelope;
use crate::gateway::RecentBlocks;
use crate::{Replica, ReplicaError};

/// Follows the committer at `endpoint` (plain text, e.g. `http://127.0.0.1:7052`), signing its seek requests as
/// `signer`, until `shutdown` turns `true`; see [`follow_with`].
pub async fn follow(
    replica: Arc<Replica>,
    endpoint: String,
    signer: Arc<SigningIdentity>,
    shutdown: watch::Receiver<bool>,
) {
    let address = endpoint.trim_start_matches("http://").to_owned();
    follow_with(replica, address, None, signer, None, shutdown).await
}

/// Follows the committer at `address` (`host:port`, TLS if `tls` is given), signing its seek requests as
/// `signer`, until `shutdown` turns `true`; each applied block also goes into `recent` when given. Blocks already
/// applied are skipped; a block that cannot be applied ends the current stream and the follower reconnects after
/// a pause (doubling up to 5 s).
pub async fn follow_with(
    replica: Arc<Replica>,
    address: String,
    tls: Option<ClientTls>,
    signer: Arc<SigningIdentity>,
    recent: Option<Arc<RecentBlocks>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let endpoint = address;
    let mut pause = Duration::from_millis(100);
    loop {
        if *shutdown.borrow() {
            return;
        }
        let result = tokio::select! {
            r = stream_once(&replica, &endpoint, tls.as_ref(), &signer, recent.as_deref()) => r,
            _ = shutdown.changed() => return,
        };
        match result {
            Ok(applied) if applied > 0 => pause = Duration::from_millis(100),
            Ok(_) => {}
            Err(e) => tracing::warn!(endpoint = %endpoint, error = %e, "following the committer"),
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => return,
        }
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

/// [`Replica::apply_block`] on tokio's blocking pool.
async fn apply_blocking(replica: &Arc<Replica>, raw: Bytes) -> Result<Result<Vec<String>, ReplicaError>, String> {
    let replica = replica.clone();
    tokio::task::spawn_blocking(move || replica.apply_block(raw)).await.map_err(|e| format!("applying a block: {e}"))
}

/// One Deliver stream: returns how many blocks were applied before it ended. Blocks arrive as the bytes the
/// committer sent ([`ferrofabric_comm::open_deliver`]): the replica decodes them once, and the gateway's window
/// keeps those same bytes with the transaction IDs the replica read (decoding into prost structs and encoding
/// again cost each endorser a fresh copy of every block; decoding it twice, a second pass over it).
async fn stream_once(
    replica: &Arc<Replica>,
    endpoint: &str,
    tls: Option<&ClientTls>,
    signer: &SigningIdentity,
    recent: Option<&RecentBlocks>,
) -> Result<u64, String> {
    let channel = ferrofabric_comm::connect(endpoint, tls).await.map_err(|e| format!("connect: {e:#}"))?;
    let seek = Bytes::from(seek_envelope(signer, replica.channel_id(), replica.height()).encode_to_vec());
    let mut stream =
        ferrofabric_comm::open_deliver(channel, DeliverApi::Peer, seek).await.map_err(|e| format!("deliver: {e}"))?;
    let mut applied = 0;
    while let Some(item) = stream.message().await.map_err(|e| format!("deliver stream: {e}"))? {
        match item {
            // On a blocking thread: applying waits for the simulations that hold a state view, and a simulation
            // of an external chaincode needs this runtime's tasks to route the chaincode's messages.
            DeliverItem::Block(raw) => match apply_blocking(replica, raw.clone()).await? {
                Ok(ids) => {
                    applied += 1;
                    if let Some(r) = recent {
                        // This task is the replica's only writer: the block just applied is the last one.
                        r.push(replica.height().saturating_sub(1), raw, ids);
                    }
                }
                Err(ReplicaError::OutOfOrder { expected, got }) if got < expected => {}
                Err(e) => return Err(format!("block after height {}: {e}", replica.height())),
            },
            DeliverItem::Status(s) => {
                let status = Status::try_from(s).map(|s| s.as_str_name()).unwrap_or("UNKNOWN");
                return if s == Status::Success as i32 { Ok(applied) } else { Err(format!("deliver status {status}")) };
            }
        }
    }
    Ok(applied)
}
