//! Integration tests of `ferrofabric-validator`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

mod support;

mod attested;
mod fabric_hang;
mod fuzz_envelopes;
mod lazy_signatures;
mod resume;
mod tx_codes;
