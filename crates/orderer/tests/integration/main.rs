//! Integration tests of `ferrofabric-orderer`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

mod support;

mod bad_input;
mod broadcast_deliver;
mod config_update;
mod participation;
