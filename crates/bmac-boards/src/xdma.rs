//! The card on an Alveo board behind AMD's XDMA driver (hw/alveo/README.md, hw/DESIGN.md §8).
//!
//! The driver gives each board a set of character devices named after one prefix, e.g. `/dev/xdma0`:
//!
//! * `<prefix>_user` maps the AXI-Lite BAR: a 4-byte `pread`/`pwrite` at a register's byte address (§4) is one
//!   register access;
//! * `<prefix>_h2c_0` is the host-to-card AXI-Stream channel: one `write` is one frame, ended with `tlast`.
//!
//! [`XdmaCard`] writes each section's frame (§2.1) to the stream and polls STATUS for block results. A frame write
//! blocks while the card's input is full, and the card holds its input while a result waits to be read; so frames
//! are written by a thread of their own, and the caller reads results meanwhile.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::any::Any;

use ferrofabric_bmac::wire::Section;
use ferrofabric_bmac::{read_block_result, regs, CardLink, CardResult, LinkError, Registers, STICKY_ERRORS};

/// Frames queued for the stream writer before [`XdmaCard::send`] waits.
const QUEUED_FRAMES: usize = 1024;

/// How long [`XdmaCard::next_result`] sleeps between two STATUS reads that found nothing.
const POLL_EVERY: Duration = Duration::from_micros(200);

/// Why the XDMA link failed.
#[derive(Debug, thiserror::Error)]
pub enum XdmaError {
    /// A device file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The device file.
        path: PathBuf,
        /// What the driver said.
        source: std::io::Error,
    },
    /// The user BAR does not hold the BMac register map (MAGIC differs).
    #[error("{0}: not a BMac card (MAGIC {1:#010x})")]
    NotACard(PathBuf, u32),
    /// The stream accepted part of a frame only.
    #[error("{0}: short write of a frame ({1} of {2} bytes)")]
    ShortWrite(PathBuf, usize, usize),
    /// No block result came within the deadline.
    #[error("no block result within {0:?}")]
    Deadline(Duration),
    /// The card's STATUS reports a sticky error (bit 2: KV-store overflow, bit 3: protocol error).
    #[error("card STATUS {0:#x}: KV-store overflow or protocol error")]
    Status(u32),
    /// The stream writer stopped (after an error it reported, or because the link was closed).
    #[error("the stream writer stopped")]
    WriterGone,
}

/// The user BAR: one register access per 4-byte `pread`/`pwrite`.
struct UserBar {
    file: File,
    path: PathBuf,
}

impl Registers for UserBar {
    type Error = XdmaError;

    fn read_reg(&mut self, addr: u16) -> Result<u32, XdmaError> {
        let mut word = [0u8; 4];
        self.file
            .read_exact_at(&mut word, u64::from(addr))
            .map_err(|source| XdmaError::Io { path: self.path.clone(), source })?;
        Ok(u32::from_le_bytes(word))
    }

    fn write_reg(&mut self, addr: u16, value: u32) -> Result<(), XdmaError> {
        self.file
            .write_all_at(&value.to_le_bytes(), u64::from(addr))
            .map_err(|source| XdmaError::Io { path: self.path.clone(), source })
    }
}

/// The host's end of a card behind the XDMA driver.
pub struct XdmaCard {
    bar: UserBar,
    frames: Option<SyncSender<Vec<u8>>>,
    writer_errors: Receiver<XdmaError>,
    writer: Option<JoinHandle<()>>,
    deadline: Duration,
    results: VecDeque<CardResult>,
    config: (u32, u32),
}

impl XdmaCard {
    /// Opens the card whose device files start with `prefix` (e.g. `/dev/xdma0`); each block result must come
    /// within `deadline`. The card must be fresh: loaded or reset since its last host session.
    ///
    /// Errors: [`XdmaError::Io`] if a device file cannot be opened or read, [`XdmaError::NotACard`] if MAGIC is
    /// not the BMac value.
    pub fn open(prefix: &Path, deadline: Duration) -> Result<XdmaCard, XdmaError> {
        let user_path = with_suffix(prefix, "_user");
        let h2c_path = with_suffix(prefix, "_h2c_0");
        let open = |path: &PathBuf| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(|source| XdmaError::Io { path: path.clone(), source })
        };
        let mut bar = UserBar { file: open(&user_path)?, path: user_path.clone() };
        let magic = bar.read_reg(regs::REG_MAGIC)?;
        if magic != regs::MAGIC_VALUE {
            return Err(XdmaError::NotACard(user_path, magic));
        }
        let config = bar.read_reg(regs::REG_CONFIG)?;
        let n = (config & regs::CONFIG_N_MASK) >> regs::CONFIG_N_LSB;
        let m = (config & regs::CONFIG_M_MASK) >> regs::CONFIG_M_LSB;
        let h2c = open(&h2c_path)?;
        let (frames, queue) = mpsc::sync_channel::<Vec<u8>>(QUEUED_FRAMES);
        let (report, writer_errors) = mpsc::channel();
        let writer = std::thread::Builder::new()
            .name("xdma-h2c".into())
            .spawn(move || write_frames(h2c, h2c_path, &queue, &report))
            .map_err(|source| XdmaError::Io { path: prefix.to_path_buf(), source })?;
        Ok(XdmaCard {
            bar,
            frames: Some(frames),
            writer_errors,
            writer: Some(writer),
            deadline,
            results: VecDeque::new(),
            config: (n, m),
        })
    }

    /// N×M as the card's CONFIG register reports it.
    pub fn config(&self) -> (u32, u32) {
        self.config
    }

    /// Queues one frame (a section's whole Ethernet frame, §2.1) for the stream.
    ///
    /// Errors: [`XdmaError::WriterGone`] or the writer's own error if an earlier frame failed.
    pub fn send(&mut self, frame: Vec<u8>) -> Result<(), XdmaError> {
        self.writer_failed()?;
        let frames = self.frames.as_ref().ok_or(XdmaError::WriterGone)?;
        frames.send(frame).map_err(|_| self.writer_failed().err().unwrap_or(XdmaError::WriterGone))
    }

    /// Waits for the next block result and releases it on the card.
    ///
    /// Errors: [`XdmaError::Deadline`], [`XdmaError::Status`] on a sticky STATUS error (the result that came with
    /// it is returned by the next call), a device-file error, or the writer's error.
    pub fn next_result(&mut self) -> Result<CardResult, XdmaError> {
        if let Some(r) = self.results.pop_front() {
            return Ok(r);
        }
        let start = Instant::now();
        loop {
            self.writer_failed()?;
            let status = self.bar.read_reg(regs::REG_STATUS)?;
            if status & regs::STATUS_READY_MASK != 0 {
                let (result, status) = read_block_result(&mut self.bar)?;
                if status & STICKY_ERRORS != 0 {
                    self.results.push_back(result);
                    return Err(XdmaError::Status(status));
                }
                return Ok(result);
            }
            if start.elapsed() > self.deadline {
                return Err(XdmaError::Deadline(self.deadline));
            }
            std::thread::sleep(POLL_EVERY);
        }
    }

    /// Reads one register (§4), e.g. the statistics.
    ///
    /// Errors: [`XdmaError::Io`].
    pub fn read_reg(&mut self, addr: u16) -> Result<u32, XdmaError> {
        self.bar.read_reg(addr)
    }

    fn writer_failed(&self) -> Result<(), XdmaError> {
        match self.writer_errors.try_recv() {
            Ok(e) => Err(e),
            Err(TryRecvError::Empty) => Ok(()),
            Err(TryRecvError::Disconnected) => Err(XdmaError::WriterGone),
        }
    }
}

impl Drop for XdmaCard {
    fn drop(&mut self) {
        // Closing the queue ends the writer once the frames already queued are out.
        self.frames = None;
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

/// The stream writer: one `write` per frame, so that the driver ends each with `tlast`.
fn write_frames(mut h2c: File, path: PathBuf, queue: &Receiver<Vec<u8>>, report: &mpsc::Sender<XdmaError>) {
    for frame in queue {
        let failure = match h2c.write(&frame) {
            Ok(n) if n == frame.len() => continue,
            Ok(n) => XdmaError::ShortWrite(path.clone(), n, frame.len()),
            Err(source) => XdmaError::Io { path: path.clone(), source },
        };
        let _ = report.send(failure);
        return;
    }
}

/// `/dev/xdma0` + `_user` → `/dev/xdma0_user`.
fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

impl CardLink for XdmaCard {
    fn kind(&self) -> &'static str {
        "alveo"
    }

    fn config(&self) -> (u32, u32) {
        self.config
    }

    fn send_section(&mut self, section: &Section) -> Result<(), LinkError> {
        self.send(section.to_frame()?).map_err(LinkError::new)
    }

    fn result_of(&mut self, _number: u64) -> Result<Option<CardResult>, LinkError> {
        self.next_result().map(Some).map_err(LinkError::new)
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
