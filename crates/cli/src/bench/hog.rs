//! The co-located work of `ferrofabric bench isolation`: `ferrofabric bench hog --kind K` processes, each in a
//! cgroup of its own with the default CPU share, as every co-located container is on QiOi's host (Kim et al.,
//! Applied Sciences 2021, §5: sysbench containers beside Fabric's). Three kinds:
//!
//! * [`HogKind::Cpu`]: SHA-256 over a 64-byte block, over and over (sysbench's `cpu` test in spirit);
//! * [`HogKind::Memory`]: copies one 128 MiB buffer into another, larger than the last-level cache, so that
//!   every byte goes to DRAM and back (STREAM's copy kernel): it takes memory bandwidth, and a core;
//! * [`HogKind::Disk`]: writes 64 KiB at rotating offsets of a 64 MiB file and `fdatasync`s after each write (a
//!   database's log), in the directory it is given (the node's, so that both share a file system).
//!
//! Each hog prints its cumulative count of work units every 100 ms on stdout until killed; [`Hogs`] starts them,
//! reads the counts and turns them into a rate over the measured window.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use ferrofabric_isolation::{Cgroup, CpuHierarchy};
use tokio::io::AsyncBufReadExt;

/// A kind of co-located work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HogKind {
    /// CPU-bound: SHA-256 in a loop.
    Cpu,
    /// Memory-bandwidth-bound: a 128 MiB copy in a loop (and one core).
    Memory,
    /// Disk-bound: 64 KiB writes, each followed by `fdatasync`.
    Disk,
}

impl HogKind {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            HogKind::Cpu => "cpu",
            HogKind::Memory => "memory",
            HogKind::Disk => "disk",
        }
    }

    /// The unit of its work rate.
    pub fn unit(self) -> &'static str {
        match self {
            HogKind::Cpu => "SHA-256 blocks/s",
            HogKind::Memory => "MiB copied/s",
            HogKind::Disk => "fdatasyncs/s",
        }
    }
}

/// Arguments of `ferrofabric bench hog`.
#[derive(Debug, Clone, clap::Args)]
pub struct HogArgs {
    /// The kind of work.
    #[arg(long, value_enum, default_value_t = HogKind::Cpu)]
    pub kind: HogKind,
    /// Where the disk hog writes its file (default: the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// `ferrofabric bench hog`: does `args.kind`'s work until killed, printing the cumulative count of work units
/// (SHA-256 blocks, MiB copied, fdatasyncs) every 100 ms on stdout.
///
/// Errors: the disk hog's file cannot be created or written.
pub fn hog(args: &HogArgs) -> anyhow::Result<()> {
    let mut counter = Counter::new();
    match args.kind {
        HogKind::Cpu => {
            use sha2::Digest;
            let mut block = [0u8; 64];
            loop {
                for _ in 0..1_000 {
                    let d = sha2::Sha256::digest(block);
                    block[..32].copy_from_slice(&d);
                }
                if !counter.add(1_000) {
                    return Ok(());
                }
            }
        }
        HogKind::Memory => {
            const BUFFER: usize = 128 << 20;
            const CHUNK: usize = 1 << 20;
            // Touch every page up front, so that the loop measures copying, not page faults.
            let src = vec![0x5au8; BUFFER];
            let mut dst = vec![0u8; BUFFER];
            loop {
                for (d, s) in dst.chunks_exact_mut(CHUNK).zip(src.chunks_exact(CHUNK)) {
                    d.copy_from_slice(s);
                    if !counter.add(1) {
                        return Ok(());
                    }
                }
                std::hint::black_box(&dst);
            }
        }
        HogKind::Disk => {
            use std::os::unix::fs::FileExt;
            const WRITE: usize = 64 << 10;
            const FILE: u64 = 64 << 20;
            let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
            let file = tempfile::tempfile_in(&dir).with_context(|| format!("a file in {}", dir.display()))?;
            let data = vec![0xa5u8; WRITE];
            let mut offset = 0u64;
            loop {
                file.write_all_at(&data, offset).context("write")?;
                file.sync_data().context("fdatasync")?;
                offset = (offset + WRITE as u64) % FILE;
                if !counter.add(1) {
                    return Ok(());
                }
            }
        }
    }
}

/// The cumulative count and its printing every 100 ms.
struct Counter {
    count: u64,
    next: Instant,
}

impl Counter {
    fn new() -> Counter {
        Counter { count: 0, next: Instant::now() + Duration::from_millis(100) }
    }

    /// Adds `n`; prints the count when 100 ms have passed. False when stdout is gone (the bench has ended).
    fn add(&mut self, n: u64) -> bool {
        use std::io::Write;
        self.count += n;
        if Instant::now() < self.next {
            return true;
        }
        self.next += Duration::from_millis(100);
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        writeln!(out, "{}", self.count).and_then(|()| out.flush()).is_ok()
    }
}

/// Running hogs of one kind, each a `ferrofabric bench hog` process in a cgroup of its own; killed, and their
/// cgroups removed, on [`Hogs::stop`] or drop.
pub(crate) struct Hogs {
    children: Vec<tokio::process::Child>,
    cgroups: Vec<Cgroup>,
    samples: Arc<Mutex<Vec<HogSamples>>>,
}

/// One hog's (time, cumulative count) lines.
type HogSamples = Vec<(Instant, u64)>;

impl Hogs {
    /// Starts `n` hogs of `kind` (the disk hog writing in `dir`), hog `i` in the cgroup
    /// `ferrofabric-bench-hog-PID-i` of `hierarchy` with CPU share `share`.
    ///
    /// Errors: a process cannot be started or moved, a cgroup cannot be made.
    pub(crate) fn start(
        exe: &std::path::Path,
        kind: HogKind,
        n: usize,
        dir: &std::path::Path,
        hierarchy: &CpuHierarchy,
        share: u64,
    ) -> anyhow::Result<Hogs> {
        let samples = Arc::new(Mutex::new(vec![Vec::new(); n]));
        let mut hogs = Hogs { children: Vec::new(), cgroups: Vec::new(), samples: samples.clone() };
        for h in 0..n {
            let cgroup = hierarchy.cgroup(&format!("ferrofabric-bench-hog-{}-{h}", std::process::id()))?;
            cgroup.set_share(share)?;
            hogs.cgroups.push(cgroup.clone());
            let mut child = tokio::process::Command::new(exe)
                .args(["bench", "hog", "--kind", kind.name(), "--dir"])
                .arg(dir)
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .context("starting a hog")?;
            let out = child.stdout.take().ok_or_else(|| anyhow!("hog without stdout"))?;
            let pid = child.id().unwrap_or(0);
            hogs.children.push(child);
            cgroup.add_process(pid)?;
            let samples = samples.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(out).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(count) = line.trim().parse::<u64>() {
                        samples.lock().unwrap_or_else(|e| e.into_inner())[h].push((Instant::now(), count));
                    }
                }
            });
        }
        Ok(hogs)
    }

    /// Kills the hogs, removes their cgroups and returns their summed work rate (units per second) over
    /// `window`.
    pub(crate) async fn stop(mut self, window: (Instant, Instant)) -> f64 {
        for c in &mut self.children {
            let _ = c.kill().await;
        }
        for g in &self.cgroups {
            g.remove();
        }
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let at = |s: &[(Instant, u64)], t: Instant| {
            s.iter().rev().find(|(when, _)| *when <= t).or(s.first()).copied().unwrap_or((t, 0))
        };
        samples
            .iter()
            .map(|s| {
                let (a, b) = (at(s, window.0), at(s, window.1));
                (b.1.saturating_sub(a.1)) as f64 / (b.0 - a.0).as_secs_f64().max(1e-3)
            })
            .sum()
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.start_kill();
        }
        for g in &self.cgroups {
            g.remove();
        }
    }
}
