//! Keeping a [`Replica`] up to date by following the committer's peer `Deliver` service
//! (`/protos.Deliver/Deliver`): validated blocks (with TRANSACTIONS_FILTER) from the replica's height on, applied
//! as they arrive; the stream is re-opened after errors, resuming from the replica's height. Each applied block may
//! also be kept in a [`RecentBlocks`] window, for the gateway on the endorser's port.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_comm::ClientTls;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::peer::deliver_client::DeliverClient;
use ferrofabric_protos::peer::deliver_response;
use prost::Message;
use tokio::sync::watch;

use crate::client::seek_envelope;
use crate::gateway::RecentBlocks;
use crate::{Replica, ReplicaError, MAX_MESSAGE_SIZE};

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

/// One Deliver stream: returns how many blocks were applied before it ended.
async fn stream_once(
    replica: &Replica,
    endpoint: &str,
    tls: Option<&ClientTls>,
    signer: &SigningIdentity,
    recent: Option<&RecentBlocks>,
) -> Result<u64, String> {
    let channel = ferrofabric_comm::connect(endpoint, tls).await.map_err(|e| format!("connect: {e:#}"))?;
    let mut client = DeliverClient::new(channel).max_decoding_message_size(MAX_MESSAGE_SIZE);
    let seek = seek_envelope(signer, replica.channel_id(), replica.height());
    let mut stream =
        client.deliver(tokio_stream::iter(vec![seek])).await.map_err(|e| format!("deliver: {e}"))?.into_inner();
    let mut applied = 0;
    while let Some(msg) = stream.message().await.map_err(|e| format!("deliver stream: {e}"))? {
        match msg.r#type {
            Some(deliver_response::Type::Block(block)) => {
                let number = block.header.as_ref().map_or(0, |h| h.number);
                let raw = Bytes::from(block.encode_to_vec());
                match replica.apply_block(raw.clone()) {
                    Ok(()) => {
                        applied += 1;
                        if let Some(r) = recent {
                            r.push(number, raw);
                        }
                    }
                    Err(ReplicaError::OutOfOrder { expected, got }) if got < expected => {}
                    Err(e) => return Err(format!("block {number}: {e}")),
                }
            }
            Some(deliver_response::Type::Status(s)) => {
                let status = Status::try_from(s).map(|s| s.as_str_name()).unwrap_or("UNKNOWN");
                return if s == Status::Success as i32 { Ok(applied) } else { Err(format!("deliver status {status}")) };
            }
            _ => {}
        }
    }
    Ok(applied)
}
