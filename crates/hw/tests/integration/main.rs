//! Integration tests of `ferrofabric-hw`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

mod support;

mod cli;
mod cosim;
mod model;
mod netcard;
mod policy_table;
mod protocol;
mod regmap_gen;
mod xdma;
