//! Integration tests of `ferrofabric-testkit`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

mod support;

mod blocks;
mod network;
mod tx;
mod validation;
mod workload;
