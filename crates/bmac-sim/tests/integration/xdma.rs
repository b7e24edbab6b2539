//! The card on an Alveo board (hw/DESIGN.md §8), without a board: the XDMA driver's device files emulated over FUSE
//! and backed by the co-simulated card. Through them the host's XDMA link gives every block the software validator's
//! codes and commit hash, and the files behave as the driver's do.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::os::unix::fs::FileExt;
use std::time::Duration;

use crate::support::*;
use ferrofabric_bmac::{regs, BlockProcessor, CardProcessor};
use ferrofabric_bmac_boards::{XdmaCard, XdmaError};
use ferrofabric_bmac_sim::emulate_xdma;

#[test]
fn a_card_behind_the_xdma_device_files_gives_the_software_codes() {
    let Some((n, m)) = config() else { return };
    let dir = tempfile::tempdir().unwrap();
    let emulation = emulate_xdma(&dir.path().join("dev"), "xdma0", n, m).unwrap();

    // The user BAR answers 4-byte reads at register addresses, as the driver's does.
    let user = std::fs::OpenOptions::new().read(true).write(true).open(dir.path().join("dev/xdma0_user")).unwrap();
    let mut word = [0u8; 4];
    user.read_exact_at(&mut word, u64::from(regs::REG_MAGIC)).unwrap();
    assert_eq!(u32::from_le_bytes(word), regs::MAGIC_VALUE);
    assert!(user.read_exact_at(&mut [0u8; 4], 2).is_err(), "unaligned register reads are refused");
    drop(user);

    let blocks = fixture_blocks();
    let mut hw = CardProcessor::new(
        blocks[0].clone(),
        Box::new(XdmaCard::open(emulation.prefix(), Duration::from_secs(600)).unwrap()),
    )
    .unwrap();
    assert_eq!(hw.name(), format!("alveo {n}x{m}"));
    assert_eq!(fixture_through(&mut hw, &blocks).0, 2);
}

#[test]
fn device_files_that_are_not_a_bmac_card_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Plain files where the driver's would be: MAGIC reads as zero.
    std::fs::write(dir.path().join("xdma0_user"), vec![0u8; 64]).unwrap();
    std::fs::write(dir.path().join("xdma0_h2c_0"), b"").unwrap();
    let err = XdmaCard::open(&dir.path().join("xdma0"), Duration::from_secs(1)).err().unwrap();
    assert!(matches!(err, XdmaError::NotACard(_, 0)), "{err}");
    let missing = XdmaCard::open(&dir.path().join("xdma1"), Duration::from_secs(1)).err().unwrap();
    assert!(matches!(missing, XdmaError::Io { .. }), "{missing}");
}
