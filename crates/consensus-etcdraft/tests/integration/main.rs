//! Integration tests of `ferrofabric-consensus-etcdraft`, one test binary for the crate.

mod membership;
mod raft;
