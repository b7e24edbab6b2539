//! Integration tests of `ferrofabric-consensus-etcdraft`, one test binary for the crate.

mod fabric_recording;
mod membership;
mod raft;
