//! The BFT deliverer's censorship monitor (Fabric 3's `common/deliverclient/blocksprovider/bft_deliverer.go` and
//! `bft_censorship_monitor.go`; the frontends of the BFT-SMaRt ordering service, which trust no single orderer).
//!
//! On a BFT channel one orderer can withhold blocks from a peer while the others go on ordering. So while blocks
//! come from one orderer (the block source), every other orderer is asked for the same blocks as
//! `HEADER_WITH_SIG` attestations: header and metadata, whose quorum of consenter signatures the
//! [`AttestationVerifier`] checks. When a verified attestation is ahead of the blocks received, the source is
//! suspected; if the block does not arrive within [`BftFollow::censorship_timeout`] of that attestation, the
//! follower drops the source and takes the next orderer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use ferrofabric_comm::{open_deliver, DeliverItem};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::orderer::{seek_info, SeekInfo};
use tokio::task::JoinSet;

use crate::config::{AttestationVerifier, BftFollow, FollowConfig};
use crate::connection::{backoff, block_number, connect, seek_envelope};

/// The newest verified attestation of each header source: (block number, when it arrived).
type Attested = Arc<Mutex<HashMap<String, (u64, Instant)>>>;

/// The header receivers of one block-source session: a task per other orderer, all stopped when this is dropped.
pub(crate) struct HeaderReceivers {
    attested: Attested,
    _tasks: JoinSet<()>,
}

impl HeaderReceivers {
    /// Starts a header receiver for every endpoint but `source`, asking for attestations from block `from` on.
    pub(crate) fn start(
        config: &FollowConfig,
        bft: &BftFollow,
        signer: &Arc<SigningIdentity>,
        source: &str,
        from: u64,
    ) -> HeaderReceivers {
        let attested: Attested = Arc::default();
        let mut tasks = JoinSet::new();
        for endpoint in config.endpoints.iter().filter(|e| e.as_str() != source) {
            let receiver = HeaderReceiver {
                endpoint: endpoint.clone(),
                config: config.clone(),
                verifier: bft.verifier.clone(),
                signer: signer.clone(),
                attested: attested.clone(),
            };
            tasks.spawn(receiver.run(from));
        }
        HeaderReceivers { attested, _tasks: tasks }
    }

    /// The attestations that are ahead of the blocks received (`next` is the next block expected): (endpoint,
    /// number, arrival).
    fn ahead_of(&self, next: u64) -> Vec<(String, u64, Instant)> {
        let attested = self.attested.lock().unwrap_or_else(|p| p.into_inner());
        attested.iter().filter(|(_, (n, _))| *n >= next).map(|(e, (n, t))| (e.clone(), *n, *t)).collect()
    }
}

/// One orderer's attestation stream.
struct HeaderReceiver {
    endpoint: String,
    config: FollowConfig,
    verifier: Arc<dyn AttestationVerifier>,
    signer: Arc<SigningIdentity>,
    attested: Attested,
}

impl HeaderReceiver {
    /// Receives attestations until the session drops the task, reconnecting with back-off; an attestation that
    /// fails verification ends the stream (the orderer is not believed until it reconnects).
    async fn run(self, from: u64) {
        let mut failures = 0u32;
        let mut next = from;
        loop {
            if failures > 0 {
                tokio::time::sleep(backoff(failures, self.config.max_backoff)).await;
            }
            match self.stream(&mut next).await {
                Ok(()) => failures = 1,
                Err(e) => {
                    tracing::debug!(endpoint = %self.endpoint, error = format!("{e:#}"), "header receiver");
                    failures = failures.saturating_add(1);
                }
            }
        }
    }

    async fn stream(&self, next: &mut u64) -> anyhow::Result<()> {
        let channel = connect(&self.endpoint, &self.config).await?;
        let request = seek_envelope(&self.config.channel_id, &self.signer, &headers_from(*next));
        let mut stream = open_deliver(channel, self.config.api, request).await.map_err(|e| anyhow!("{e}"))?;
        loop {
            let block = match stream.message().await.map_err(|e| anyhow!("{e}"))? {
                Some(DeliverItem::Block(b)) => b,
                Some(DeliverItem::Status(s)) => return Err(anyhow!("status {s}")),
                None => return Ok(()),
            };
            let claimed = block_number(&block)?;
            let number = self.verifier.verify(&block).map_err(|e| anyhow!("attestation of block {claimed}: {e}"))?;
            let mut attested = self.attested.lock().unwrap_or_else(|p| p.into_inner());
            let entry = attested.entry(self.endpoint.clone()).or_insert((number, Instant::now()));
            if number > entry.0 {
                *entry = (number, Instant::now());
            }
            *next = number + 1;
        }
    }
}

/// `SeekInfo` for attestations from block `start` on (`HEADER_WITH_SIG`, waiting for blocks not yet there).
pub fn headers_from(start: u64) -> SeekInfo {
    SeekInfo {
        content_type: seek_info::SeekContentType::HeaderWithSig as i32,
        ..ferrofabric_protoutil::seek_range(start, None, seek_info::SeekBehavior::BlockUntilReady)
    }
}

/// Fabric's suspicion rule: an attestation ahead of the blocks starts a suspicion dated by the earliest such
/// attestation; the block arriving clears it; its age reaching the timeout is censorship.
#[derive(Debug, Default)]
pub(crate) struct CensorshipMonitor {
    suspicion: Option<(u64, Instant)>,
}

impl CensorshipMonitor {
    /// How often [`CensorshipMonitor::check`] runs: a hundredth of the timeout, as Fabric's monitor.
    pub(crate) fn tick(timeout: Duration) -> Duration {
        (timeout / 100).max(Duration::from_millis(10))
    }

    /// Checks the block source against the attestations; `next` is the next block expected from it. Returns the
    /// censorship, if detected: the attested block it withheld and from which orderer.
    pub(crate) fn check(
        &mut self,
        receivers: &HeaderReceivers,
        next: u64,
        timeout: Duration,
        now: Instant,
    ) -> Option<(String, u64)> {
        self.observe(receivers.ahead_of(next), next, timeout, now)
    }

    fn observe(
        &mut self,
        ahead: Vec<(String, u64, Instant)>,
        next: u64,
        timeout: Duration,
        now: Instant,
    ) -> Option<(String, u64)> {
        if let Some((number, since)) = self.suspicion {
            if next > number {
                self.suspicion = None;
            } else if now.saturating_duration_since(since) >= timeout {
                self.suspicion = None;
                let witness = ahead.iter().find(|(_, n, _)| *n >= number).map_or_else(String::new, |a| a.0.clone());
                return Some((witness, number));
            } else {
                return None;
            }
        }
        let first = ahead.into_iter().min_by_key(|(_, _, t)| *t)?;
        self.suspicion = Some((first.1, first.2));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn censorship_is_declared_only_after_the_timeout_and_cleared_by_the_block() {
        let timeout = Duration::from_secs(3);
        let t0 = Instant::now();
        let ahead = |n: u64| vec![("o2:7050".to_string(), n, t0)];
        let mut m = CensorshipMonitor::default();
        // Nothing ahead: no suspicion.
        assert_eq!(m.observe(vec![], 5, timeout, t0), None);
        // Block 5 attested while 5 is the next expected: suspicion, not yet censorship.
        assert_eq!(m.observe(ahead(5), 5, timeout, t0), None);
        assert_eq!(m.observe(ahead(5), 5, timeout, t0 + Duration::from_secs(2)), None);
        // The block arrives: cleared.
        assert_eq!(m.observe(vec![], 6, timeout, t0 + Duration::from_secs(4)), None);
        assert!(m.suspicion.is_none());
        // Attested again, and withheld past the timeout: censorship, named with the witness.
        assert_eq!(m.observe(ahead(7), 6, timeout, t0), None);
        assert_eq!(m.observe(ahead(7), 6, timeout, t0 + Duration::from_secs(3)), Some(("o2:7050".into(), 7)));
    }

    #[test]
    fn headers_from_asks_for_attestations() {
        let s = headers_from(3);
        assert_eq!(s.content_type, seek_info::SeekContentType::HeaderWithSig as i32);
        assert_eq!(s.behavior, seek_info::SeekBehavior::BlockUntilReady as i32);
    }
}
