//! Integration tests of `ferrofabric-bmac`, one test binary for the crate: the protocol against Fabric blocks, the
//! policy table, and the generated register map; one module per area, sharing `support`.

mod support;

mod policy_table;
mod protocol;
mod regmap_gen;
