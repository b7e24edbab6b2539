//! An emulation of the XDMA driver's device files, backed by the co-simulated card: what the host's
//! `ferrofabric_bmac_boards::XdmaCard` is tested against where there is no Alveo board (hw/DESIGN.md §8).
//!
//! [`emulate`] mounts a FUSE filesystem holding `<name>_user` and `<name>_h2c_0` with the driver's semantics
//! (a 4-byte access to `_user` at a register's address is one AXI-Lite access; one write to `_h2c_0` is one
//! AXI-Stream frame, ended with `tlast`). Both files are opened in direct-I/O mode, so no page cache stands between
//! the host and the card. The card's clock runs while a host holds a device file open, as a board's does; a frame
//! write is answered once the card has taken its last beat, so a host sees the same back-pressure as from a board.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    BackgroundSession, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, LockOwner, MountOption,
    OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request,
    WriteFlags,
};

use crate::card::offer_beat;
use crate::sim::{Port, Sim, SimError};

/// Size of the user BAR the driver maps (the register map's 64 KiB address space, hw/DESIGN.md §4).
const BAR_BYTES: u64 = 1 << 16;

/// Cycles the card runs between two looks at the request queue while it has nothing else to do.
const FREE_RUN: u64 = 2048;

/// Beats fed to the card between two looks at the request queue.
const BEATS_PER_TURN: usize = 64;

/// Cycles a frame may wait for the card's input before its write fails (as a DMA timeout would).
const STREAM_BUDGET: u64 = 400_000_000;

const INO_USER: u64 = 2;
const INO_H2C: u64 = 3;
const TTL: Duration = Duration::from_secs(3600);

/// Why the emulation could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmulationError {
    /// The card model could not be created (not built for this N×M).
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The directory could not be made or mounted.
    #[error("mounting the XDMA emulation at {0}: {1}")]
    Mount(PathBuf, std::io::Error),
}

/// A running emulation; unmounted, and its card stopped, on drop.
pub struct XdmaEmulation {
    session: Option<BackgroundSession>,
    card: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    prefix: PathBuf,
}

impl XdmaEmulation {
    /// The device prefix to open, `<dir>/<name>` (what `/dev/xdma0` is on a host with a board).
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }
}

impl Drop for XdmaEmulation {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
        if let Some(c) = self.card.take() {
            let _ = c.join();
        }
    }
}

/// Mounts the device files of an N×M card as `<dir>/<name>_user` and `<dir>/<name>_h2c_0`; `dir` is created if
/// missing. Needs `/dev/fuse` and the right to mount (root here).
///
/// Errors: [`EmulationError::Sim`] if the model is not built, [`EmulationError::Mount`] if the mount fails.
pub fn emulate(dir: &Path, name: &str, n: u32, m: u32) -> Result<XdmaEmulation, EmulationError> {
    std::fs::create_dir_all(dir).map_err(|e| EmulationError::Mount(dir.to_path_buf(), e))?;
    let (requests, queue) = mpsc::channel::<CardRequest>();
    let (ready, started) = mpsc::channel::<Result<(), SimError>>();
    let stop = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicUsize::new(0));
    let card = {
        let (stop, open) = (stop.clone(), open.clone());
        std::thread::Builder::new()
            .name("xdma-card".into())
            .spawn(move || match Sim::new(n, m) {
                Ok(sim) => {
                    let _ = ready.send(Ok(()));
                    run_card(sim, &queue, &stop, &open);
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            })
            .map_err(|e| EmulationError::Mount(dir.to_path_buf(), e))?
    };
    let sim_result = started.recv().unwrap_or(Err(SimError::NotBuilt(n, m, Vec::new())));
    if let Err(e) = sim_result {
        let _ = card.join();
        return Err(e.into());
    }
    let fs = DeviceFiles { user: format!("{name}_user"), h2c: format!("{name}_h2c_0"), requests, open };
    let mut config = fuser::Config::default();
    config.mount_options = vec![MountOption::FSName("xdma-emulation".into()), MountOption::RW, MountOption::NoExec];
    let session = match fuser::spawn_mount(fs, dir, &config) {
        Ok(s) => s,
        Err(e) => {
            stop.store(true, Ordering::SeqCst);
            let _ = card.join();
            return Err(EmulationError::Mount(dir.to_path_buf(), e));
        }
    };
    Ok(XdmaEmulation { session: Some(session), card: Some(card), stop, prefix: dir.join(name) })
}

/// What the filesystem asks of the card.
enum CardRequest {
    Read(u16, Sender<Result<u32, SimError>>),
    Write(u16, u32, Sender<Result<(), SimError>>),
    Frame(Vec<u8>, ReplyWrite),
}

/// The card's thread: register accesses at once, frames beat by beat in between, and the clock running while a
/// host has a file open.
fn run_card(mut sim: Sim, queue: &Receiver<CardRequest>, stop: &AtomicBool, open: &AtomicUsize) {
    let mut frames: VecDeque<(Vec<u8>, usize, u64, ReplyWrite)> = VecDeque::new();
    while !stop.load(Ordering::SeqCst) {
        let busy = !frames.is_empty() || open.load(Ordering::SeqCst) > 0;
        let next = if busy {
            queue.try_recv().map_err(|e| matches!(e, mpsc::TryRecvError::Disconnected))
        } else {
            queue.recv_timeout(Duration::from_millis(50)).map_err(|e| e == RecvTimeoutError::Disconnected)
        };
        match next {
            Ok(CardRequest::Read(addr, answer)) => {
                let _ = answer.send(sim.read_reg(addr));
                continue;
            }
            Ok(CardRequest::Write(addr, value, answer)) => {
                let _ = answer.send(sim.write_reg(addr, value));
                continue;
            }
            Ok(CardRequest::Frame(bytes, reply)) => frames.push_back((bytes, 0, 0, reply)),
            Err(true) => return,
            Err(false) => {}
        }
        if let Some((bytes, pos, waited, _)) = frames.front_mut() {
            match feed(&mut sim, bytes, pos, waited) {
                Feed::More => {}
                Feed::Done => {
                    if let Some((bytes, _, _, reply)) = frames.pop_front() {
                        reply.written(bytes.len() as u32);
                    }
                }
                Feed::Stalled => {
                    if let Some((_, _, _, reply)) = frames.pop_front() {
                        reply.error(Errno::ETIMEDOUT);
                    }
                }
            }
        } else if busy {
            sim.step(FREE_RUN);
        }
    }
    for (_, _, _, reply) in frames {
        reply.error(Errno::EIO);
    }
}

enum Feed {
    More,
    Done,
    Stalled,
}

/// Feeds up to [`BEATS_PER_TURN`] beats of a frame; the input is left idle (`tvalid` low) between turns so that
/// register accesses can run the clock.
fn feed(sim: &mut Sim, frame: &[u8], pos: &mut usize, waited: &mut u64) -> Feed {
    for _ in 0..BEATS_PER_TURN {
        if *pos >= frame.len() {
            return Feed::Done;
        }
        let chunk = &frame[*pos..(*pos + 8).min(frame.len())];
        offer_beat(sim, chunk, *pos + 8 >= frame.len());
        sim.settle();
        let taken = sim.peek(Port::Tready) == 1;
        sim.step(1);
        sim.poke(Port::Tvalid, 0);
        if taken {
            *pos += chunk.len();
            *waited = 0;
        } else {
            *waited += 1;
            if *waited > STREAM_BUDGET {
                return Feed::Stalled;
            }
            // The input is full: let the card work (and the host read results) before trying again.
            sim.step(63);
            *waited += 63;
            return Feed::More;
        }
    }
    if *pos >= frame.len() {
        Feed::Done
    } else {
        Feed::More
    }
}

/// The FUSE side: two files, each access turned into a request to the card's thread.
struct DeviceFiles {
    user: String,
    h2c: String,
    requests: Sender<CardRequest>,
    open: Arc<AtomicUsize>,
}

fn attr(ino: u64) -> FileAttr {
    let (kind, size, perm) = match ino {
        1 => (FileType::Directory, 0, 0o755),
        INO_USER => (FileType::RegularFile, BAR_BYTES, 0o600),
        _ => (FileType::RegularFile, 0, 0o600),
    };
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl DeviceFiles {
    fn read_reg(&self, addr: u64) -> Result<u32, Errno> {
        let (answer, wait) = mpsc::channel();
        let addr = u16::try_from(addr).map_err(|_| Errno::EINVAL)?;
        self.requests.send(CardRequest::Read(addr, answer)).map_err(|_| Errno::EIO)?;
        wait.recv().map_err(|_| Errno::EIO)?.map_err(|_| Errno::EIO)
    }

    fn write_reg(&self, addr: u64, value: u32) -> Result<(), Errno> {
        let (answer, wait) = mpsc::channel();
        let addr = u16::try_from(addr).map_err(|_| Errno::EINVAL)?;
        self.requests.send(CardRequest::Write(addr, value, answer)).map_err(|_| Errno::EIO)?;
        wait.recv().map_err(|_| Errno::EIO)?.map_err(|_| Errno::EIO)
    }
}

impl Filesystem for DeviceFiles {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let ino = match name.to_str() {
            Some(n) if parent == INodeNo::ROOT && n == self.user => INO_USER,
            Some(n) if parent == INodeNo::ROOT && n == self.h2c => INO_H2C,
            _ => return reply.error(Errno::ENOENT),
        };
        reply.entry(&TTL, &attr(ino), fuser::Generation(0));
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match u64::from(ino) {
            1 | INO_USER | INO_H2C => reply.attr(&TTL, &attr(u64::from(ino))),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match u64::from(ino) {
            INO_USER | INO_H2C => {
                self.open.fetch_add(1, Ordering::SeqCst);
                reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
            }
            _ => reply.error(Errno::EISDIR),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.open.fetch_sub(1, Ordering::SeqCst);
        reply.ok();
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Registers are 32-bit words at aligned addresses; the stream has no card-to-host channel here.
        if u64::from(ino) != INO_USER
            || !offset.is_multiple_of(4)
            || !size.is_multiple_of(4)
            || offset + u64::from(size) > BAR_BYTES
        {
            return reply.error(Errno::EINVAL);
        }
        let mut out = Vec::with_capacity(size as usize);
        for addr in (offset..offset + u64::from(size)).step_by(4) {
            match self.read_reg(addr) {
                Ok(v) => out.extend_from_slice(&v.to_le_bytes()),
                Err(e) => return reply.error(e),
            }
        }
        reply.data(&out);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match u64::from(ino) {
            INO_H2C => {
                if data.is_empty() {
                    return reply.written(0);
                }
                // Answered by the card's thread once the frame's last beat is in.
                if let Err(mpsc::SendError(CardRequest::Frame(_, reply))) =
                    self.requests.send(CardRequest::Frame(data.to_vec(), reply))
                {
                    reply.error(Errno::EIO);
                }
            }
            INO_USER => {
                if !offset.is_multiple_of(4) || !data.len().is_multiple_of(4) || offset + data.len() as u64 > BAR_BYTES
                {
                    return reply.error(Errno::EINVAL);
                }
                for (i, word) in data.chunks_exact(4).enumerate() {
                    let value = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
                    if let Err(e) = self.write_reg(offset + 4 * i as u64, value) {
                        return reply.error(e);
                    }
                }
                reply.written(data.len() as u32);
            }
            _ => reply.error(Errno::EINVAL),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (1, FileType::Directory, "."),
            (1, FileType::Directory, ".."),
            (INO_USER, FileType::RegularFile, self.user.as_str()),
            (INO_H2C, FileType::RegularFile, self.h2c.as_str()),
        ];
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }
}
