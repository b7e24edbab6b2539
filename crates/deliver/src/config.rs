//! Where and how a follower follows a channel: [`DeliveryConfig`] as configuration files give it, the
//! [`FollowConfig`] a follower runs with, and on BFT channels the censorship monitor's settings ([`BftFollow`]) with
//! the [`AttestationVerifier`] the daemon supplies.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_comm::{parse_duration, ClientTls, DeliverApi};
use serde::Deserialize;

use crate::error::{AttestationError, DeliverError};

/// How a follower talks to its servers, in configuration files (Fabric's `peer.deliveryclient` and
/// `peer.keepalive.deliveryClient`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct DeliveryConfig {
    /// Timeout of one connection attempt (`connTimeout`, Go duration).
    pub connect_timeout: String,
    /// Largest pause between reconnection attempts (`reConnectBackoffThreshold`); pauses start at 100 ms and
    /// double.
    pub reconnect_backoff_threshold: String,
    /// HTTP/2 keepalive ping interval (`peer.keepalive.deliveryClient.interval`); a dead server is detected within
    /// interval + timeout.
    pub keepalive_interval: String,
    /// How long a verified attestation of a BFT channel may stay ahead of the blocks received before the block
    /// source is dropped (`peer.deliveryclient.blockCensorshipTimeoutKey`; see [`BftFollow`]).
    pub block_censorship_timeout: String,
    /// How long a keepalive ping may go unanswered (`peer.keepalive.deliveryClient.timeout`).
    pub keepalive_timeout: String,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            connect_timeout: "3s".into(),
            reconnect_backoff_threshold: "10s".into(),
            keepalive_interval: "10s".into(),
            block_censorship_timeout: "30s".into(),
            keepalive_timeout: "5s".into(),
        }
    }
}

impl DeliveryConfig {
    /// Checks that the five durations parse.
    ///
    /// Errors: a malformed duration.
    pub fn validate(&self) -> Result<(), DeliverError> {
        for d in [
            &self.connect_timeout,
            &self.reconnect_backoff_threshold,
            &self.keepalive_interval,
            &self.keepalive_timeout,
            &self.block_censorship_timeout,
        ] {
            parse_duration(d)?;
        }
        Ok(())
    }

    /// The [`FollowConfig`] following `channel_id` from `endpoints` through `api` with these settings.
    ///
    /// Errors: a malformed duration.
    pub fn follow_config(
        &self,
        endpoints: Vec<String>,
        api: DeliverApi,
        channel_id: String,
        tls: Option<ClientTls>,
    ) -> Result<FollowConfig, DeliverError> {
        Ok(FollowConfig {
            endpoints,
            api,
            channel_id,
            tls,
            connect_timeout: parse_duration(&self.connect_timeout)?,
            max_backoff: parse_duration(&self.reconnect_backoff_threshold)?,
            keepalive_interval: parse_duration(&self.keepalive_interval)?,
            keepalive_timeout: parse_duration(&self.keepalive_timeout)?,
            bft: None,
        })
    }

    /// The BFT deliverer's settings with these timeouts, checking attestations with `verifier`.
    ///
    /// Errors: a malformed duration.
    pub fn bft_follow(&self, verifier: Arc<dyn AttestationVerifier>) -> Result<BftFollow, DeliverError> {
        Ok(BftFollow { censorship_timeout: parse_duration(&self.block_censorship_timeout)?, verifier })
    }
}

/// Where and how to follow a channel.
#[derive(Debug, Clone)]
pub struct FollowConfig {
    /// Server addresses `host:port`, tried in turn.
    pub endpoints: Vec<String>,
    /// The service to call.
    pub api: DeliverApi,
    /// Channel ID put in the seek request.
    pub channel_id: String,
    /// TLS, if the servers speak it.
    pub tls: Option<ClientTls>,
    /// Timeout of one connection attempt.
    pub connect_timeout: Duration,
    /// Largest pause between attempts.
    pub max_backoff: Duration,
    /// HTTP/2 keepalive interval (detects dead servers on idle streams).
    pub keepalive_interval: Duration,
    /// HTTP/2 keepalive ping timeout.
    pub keepalive_timeout: Duration,
    /// On BFT channels: watch the other servers' attestations and drop a block source that withholds blocks.
    pub bft: Option<BftFollow>,
}

/// Checks a block attestation: a `HEADER_WITH_SIG` block (header and metadata; data only for config blocks)
/// whose SIGNATURES metadata must satisfy the channel's `BlockValidation` policy (Fabric's
/// `VerifyBlockAttestation`). The committer implements it over the channel configuration in force.
pub trait AttestationVerifier: Send + Sync + 'static {
    /// The attested block number, or why the attestation is refused.
    ///
    /// Errors: the bytes are not a block, or its signatures do not satisfy the policy.
    fn verify(&self, block: &Bytes) -> Result<u64, AttestationError>;
}

/// The BFT deliverer's settings: present on channels ordered by BFT consenters.
#[derive(Clone)]
pub struct BftFollow {
    /// How long a verified attestation may stay ahead of the blocks received before the block source is dropped
    /// (Fabric's `peer.deliveryclient.blockCensorshipTimeoutKey`, 30 s by default).
    pub censorship_timeout: Duration,
    /// Checks the attestations.
    pub verifier: Arc<dyn AttestationVerifier>,
}

impl std::fmt::Debug for BftFollow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BftFollow").field("censorship_timeout", &self.censorship_timeout).finish_non_exhaustive()
    }
}
