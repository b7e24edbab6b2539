//! Integration tests of `ferrofabric-committer`, one test binary for the crate (each file under `tests/` used to link
//! its own binary, which dominated build time on two cores); one module per area, sharing `support`.

mod support;

mod accelerator;
mod commit;
mod filtered;
mod tls;
