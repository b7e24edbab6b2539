//! Integration tests of `ferrofabric-msp`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

mod support;

mod fixtures;
mod fuzz;
mod signing;
mod synthetic_pki;
mod wycheproof;
