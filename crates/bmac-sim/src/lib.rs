//! Ferrofabric's BMac simulation (hw/DESIGN.md §6–8): the card without a board, for tests, benchmarks and drills.
//!
//! * [`Sim`]: the Verilated RTL (`hw/rtl/bmac_top.sv`) behind a small C ABI ([`available_sim_configs`]); the
//!   build script Verilates one model per N×M of `FERROFABRIC_HW_CONFIGS`, and without Verilator compiles the
//!   backend out;
//! * the co-simulated card, [`Card`], a `ferrofabric_bmac::CardLink`, and the BMac peer with it
//!   ([`cosim_processor`]);
//! * [`Model`]: the reference model of the RTL (protocol processor + block processor) in Rust;
//! * the card on the network: [`serve_card`] runs a co-simulated card behind a UDP socket (the host's end is
//!   `ferrofabric_bmac_boards::UdpCard`);
//! * the card on an Alveo board: [`emulate_xdma`] mounts the XDMA driver's device files backed by the co-simulated
//!   card, for hosts without a board (`ferrofabric_bmac_boards::XdmaCard` drives them);
//! * `ferrofabric hw validate`'s work: [`validate_ledger`] with [`ValidateOptions`] (the flags are parsed in the CLI
//!   crate), which compares the card's codes with the host's software ledger.

mod card;
mod model;
mod server;
mod sim;
mod validate;
mod xdma_emu;

pub use card::{cosim_processor, Card};
pub use model::{Model, ModelBlock};
pub use server::{serve as serve_card, ServeError};
pub use sim::{available as available_sim_configs, Port as SimPort, Sim, SimError};
pub use validate::{parse_config as parse_card_config, run as validate_ledger, ConfigError, ValidateOptions};
pub use xdma_emu::{emulate as emulate_xdma, EmulationError, XdmaEmulation};
