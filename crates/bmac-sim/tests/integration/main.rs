//! Integration tests of `ferrofabric-bmac-sim`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`
//! (which includes the protocol tests' helpers of crates/bmac).

mod support;

mod cli;
mod cosim;
mod model;
mod netcard;
mod xdma;
