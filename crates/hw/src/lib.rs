//! Ferrofabric's BMac hardware block processor (Javaid et al., "Blockchain Machine: A Network-Attached Hardware
//! Accelerator for Hyperledger Fabric"), as specified in `hw/DESIGN.md`:
//!
//! * [`validate`]: `ferrofabric hw validate`'s work ([`validate::ValidateOptions`], [`validate::run`]; the flags are
//!   parsed in the CLI crate);
//! * [`backend`]: the `BlockProcessor` trait, the software reference and the co-simulated card;
//! * [`wire`]: the BMac protocol's datagrams (Ethernet/IPv4/UDP, L7 header, annotations);
//! * [`encoder`]: the sender, a Fabric block → sections with identities replaced by 16-bit ids;
//! * [`decoder`]: the software decoder (the reference model of the RTL protocol processor);
//! * [`model`]: the reference model of the RTL (protocol processor + block processor) in Rust;
//! * [`host`]: what the host computes before a block goes to the hardware, and which blocks stay in software;
//! * [`policy`]: endorsement policies normalised into circuits, and the generator of `ends_policy_evaluator.sv`;
//! * [`session`]: the host side of a BMac peer (ledger, chain checks, routing, state sync);
//! * [`sim`]: the Verilated RTL (`hw/rtl/bmac_top.sv`) behind a small C ABI.

pub mod backend;
pub mod decoder;
pub mod encoder;
pub mod host;
pub mod model;
pub mod pbscan;
pub mod policy;
pub mod session;
pub mod sim;
pub mod validate;
pub mod wire;
