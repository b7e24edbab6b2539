//! Integration tests of `ferrofabric-chaincode-support`, one test binary for the crate: real Fabric shims against
//! the peer side of the chaincode protocol.

mod dial_in;
