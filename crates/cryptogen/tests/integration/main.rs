//! Integration tests of `ferrofabric-cryptogen`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

mod fixture;
mod roundtrip;
