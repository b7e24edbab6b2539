//! The BMac card back ends a production host uses, each a [`ferrofabric_bmac::CardLink`]:
//!
//! * the card on the network (hw/DESIGN.md §7): [`UdpCard`] is the host's end of the link (sequence numbers,
//!   NACKs, retransmission), [`UdpCardReader`] that of a host which only reads results while a relay beside the
//!   orderer feeds the card; [`udp`] holds the datagram protocol both ends share (the card's end is
//!   `ferrofabric_bmac_sim::serve_card`);
//! * the card on an Alveo board (hw/DESIGN.md §8): [`XdmaCard`] drives it through the XDMA driver's device files.

// A public module: the datagram protocol of the card on the network (kinds, results, retry timing) is a namespace
// of its own, shared with the card's end in the simulation crate.
pub mod udp;
mod xdma;

pub use udp::{Impairment, LinkStats, NetCardError, UdpCard, UdpCardReader, REORDER_WINDOW};
pub use xdma::{XdmaCard, XdmaError};
