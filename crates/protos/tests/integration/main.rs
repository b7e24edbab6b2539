//! Integration tests of `ferrofabric-protos`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

mod support;

mod fabric_fixtures;
mod grpc_services;
