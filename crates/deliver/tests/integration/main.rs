//! Integration tests of `ferrofabric-deliver`, one test binary for the crate.

mod server;
