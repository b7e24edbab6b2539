//! Integration tests of `ferrofabric-channelconfig`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

mod support;

mod bft_attestation;
mod cauthdsl_semantics;
mod channel_config;
mod fixture_signatures;
mod lazy_vs_eager;
