//! The library half of the `ferrofabric` command line: the `bench` commands, reachable from the binary and from
//! the integration tests.

pub mod bench;
