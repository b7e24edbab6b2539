//! Keeping a [`Replica`] up to date by following the committer's peer `Deliver` service
//! (`/protos.Deliver/Deliver`): validated blocks (with TRANSACTIONS_FILTER) from the replica's height on, applied
//! as they arrive; the stream is re-opened after errors, resuming from the replica's height.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::peer::deliver_client::DeliverClient;
use ferrofabric_protos::peer::deliver_response;
use prost::Message;
use tokio::sync::watch;

use crate::client::seek_envelope;
use crate::{Replica, ReplicaError};

/// Follows the committer at `endpoint` (e.g. `http://127.0.0.1:7052`), signing its seek requests as `signer`,
/// until `shutdown` turns `true`. Blocks already applied are skipped; a block that cannot be applied ends the
/// current stream and the follower reconnects after a pause (doubling up to 5 s).
pub async fn follow(
    replica: Arc<Replica>,
    endpoint: String,
    signer: Arc<SigningIdentity>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut pause = Duration::from_millis(100);
    loop {
        if *shutdown.borrow() {
            return;
        }
        let result = tokio::select! {
            r = stream_once(&replica, &endpoint, &signer) => r,
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
async fn stream_once(replica: &Replica, endpoint: &str, signer: &SigningIdentity) -> Result<u64, String> {
    let mut client = DeliverClient::connect(endpoint.to_owned()).await.map_err(|e| format!("connect: {e}"))?;
    let seek = seek_envelope(signer, replica.channel_id(), replica.height());
    let mut stream =
        client.deliver(tokio_stream::iter(vec![seek])).await.map_err(|e| format!("deliver: {e}"))?.into_inner();
    let mut applied = 0;
    while let Some(msg) = stream.message().await.map_err(|e| format!("deliver stream: {e}"))? {
        match msg.r#type {
            Some(deliver_response::Type::Block(block)) => {
                let number = block.header.as_ref().map_or(0, |h| h.number);
                match replica.apply_block(Bytes::from(block.encode_to_vec())) {
                    Ok(()) => applied += 1,
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
