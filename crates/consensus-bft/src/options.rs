//! The channel's SmartBFT options (`ConsensusType` metadata, fabric-protos `orderer/smartbft/configuration.proto`)
//! as this engine applies them. SmartBFT's view changes and heartbeats have no counterpart in Tendermint, so only
//! the options with one are applied:
//!
//! | option | here |
//! |---|---|
//! | `RequestForwardTimeout` | how long the others wait for a round's proposal (round 0; each later round waits one `CollectTimeout` more) |
//! | `CollectTimeout` | how long a consenter waits for the prevotes and the precommits of a round |
//! | `RequestPoolSize` | requests pooled at most; beyond it a Broadcast request waits up to 5 s for room, then is answered SERVICE_UNAVAILABLE |
//! | `RequestMaxBytes` | a larger request is refused with BAD_REQUEST |
//! | `RequestBatchMaxCount`, `RequestBatchMaxBytes` | a block's requests at most (SmartBFT cuts blocks with these, not with `BatchSize`) |
//!
//! Not applied: `RequestBatchMaxInterval` (a proposer proposes as soon as it holds a request), `RequestComplainTimeout`,
//! `RequestAutoRemoveTimeout`, `ViewChangeResendInterval`, `ViewChangeTimeout`, `LeaderHeartbeatTimeout`,
//! `LeaderHeartbeatCount`, `IncomingMessageBufferSize`, `SyncOnStart`, `SpeedUpViewChange`, `LeaderRotation`,
//! `DecisionsPerLeader` (proposers rotate every height). A missing, zero or malformed option takes the value of
//! SmartBFT's defaults (`Options` of configtxgen 3.1.5) that this engine runs with.

use std::time::Duration;

use ferrofabric_channelconfig::{parse_go_duration_std, ChannelConfig};
use ferrofabric_protos::orderer::smartbft::Options;
use malachitebft_core_types::{Timeout, TimeoutKind};
use prost::Message;

/// What the chain runs with, from the channel configuration in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Proposal and vote timeouts.
    pub(crate) timeouts: Timeouts,
    /// Requests pooled at most.
    pub(crate) pool_size: usize,
    /// The largest request accepted, in bytes.
    pub(crate) request_max_bytes: usize,
    /// Requests in a block at most.
    pub(crate) batch_max_count: usize,
    /// Bytes of requests in a block at most (a single larger request still gets a block of its own).
    pub(crate) batch_max_bytes: usize,
}

impl Default for Settings {
    fn default() -> Self {
        let collect = Duration::from_secs(1);
        Settings {
            timeouts: Timeouts { propose: Duration::from_secs(2), vote: collect, per_round: collect },
            pool_size: 400,
            request_max_bytes: 10 << 20,
            batch_max_count: 100,
            batch_max_bytes: 10 << 20,
        }
    }
}

impl Settings {
    /// The settings of `config`'s SmartBFT options (the defaults where an option is missing, zero or malformed).
    pub(crate) fn of(config: &ChannelConfig) -> Settings {
        let metadata = config.orderer().map(|o| o.consensus_metadata().clone()).unwrap_or_default();
        Settings::from_options(&Options::decode(metadata).unwrap_or_default())
    }

    fn from_options(o: &Options) -> Settings {
        let d = Settings::default();
        let duration =
            |s: &str, default: Duration| parse_go_duration_std(s).ok().filter(|d| !d.is_zero()).unwrap_or(default);
        let count = |v: u64, default: usize| match usize::try_from(v) {
            Ok(n) if n > 0 => n,
            _ => default,
        };
        let collect = duration(&o.collect_timeout, d.timeouts.vote);
        Settings {
            timeouts: Timeouts {
                propose: duration(&o.request_forward_timeout, d.timeouts.propose),
                vote: collect,
                per_round: collect,
            },
            pool_size: count(o.request_pool_size, d.pool_size),
            request_max_bytes: count(o.request_max_bytes, d.request_max_bytes),
            batch_max_count: count(o.request_batch_max_count, d.batch_max_count),
            batch_max_bytes: count(o.request_batch_max_bytes, d.batch_max_bytes),
        }
    }
}

/// Timeouts of round 0 and their growth per round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeouts {
    pub(crate) propose: Duration,
    pub(crate) vote: Duration,
    pub(crate) per_round: Duration,
}

impl Timeouts {
    /// How long `t` runs: the round-0 timeout of its kind, plus `per_round` for each round after the first.
    pub(crate) fn of(&self, t: &Timeout) -> Duration {
        let round = u32::try_from(t.round.as_i64()).unwrap_or(0).min(64);
        let base = match t.kind {
            TimeoutKind::Propose => self.propose,
            TimeoutKind::Prevote | TimeoutKind::Precommit => self.vote,
            TimeoutKind::Rebroadcast => self.propose + self.vote * 2,
        };
        base + self.per_round * round
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_map_to_the_engine_and_bad_values_fall_back_to_the_defaults() {
        let o = Options {
            request_forward_timeout: "3s".into(),
            collect_timeout: "500ms".into(),
            request_pool_size: 400,
            request_max_bytes: 0,
            request_batch_max_count: 50,
            request_batch_max_bytes: 1 << 20,
            ..Options::default()
        };
        let s = Settings::from_options(&o);
        assert_eq!(s.timeouts.propose, Duration::from_secs(3));
        assert_eq!((s.timeouts.vote, s.timeouts.per_round), (Duration::from_millis(500), Duration::from_millis(500)));
        assert_eq!((s.pool_size, s.batch_max_count, s.batch_max_bytes), (400, 50, 1 << 20));
        assert_eq!(s.request_max_bytes, Settings::default().request_max_bytes, "zero takes the default");
        let garbled = Options { request_forward_timeout: "soon".into(), ..Options::default() };
        assert_eq!(Settings::from_options(&garbled), Settings::default());
    }
}
