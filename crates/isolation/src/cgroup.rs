//! CPU-share cgroups, v2 (`cpu.weight`) or v1 (`cpu.shares`): which hierarchy this host lets us write
//! ([`CpuHierarchy::detect`]), and one cgroup's directory ([`Cgroup`]).
//!
//! Shares are given in cgroup v1 units everywhere in Ferrofabric (`cpu.shares`: default 1024, range 2–262,144, a
//! process group's CPU time under contention is proportional to it). On cgroup v2 a share `s` is written as
//! `cpu.weight = clamp(round(s · 100 / 1024), 1, 10000)`, so the default share 1024 is v2's default weight 100.

use std::path::{Path, PathBuf};

use crate::error::IsolationError;

/// The default CPU share (cgroup v1's default `cpu.shares`; v2 weight 100).
pub const DEFAULT_SHARE: u64 = 1024;
/// The smallest share the kernel accepts (v1).
pub const MIN_SHARE: u64 = 2;
/// The largest share the kernel accepts (v1).
pub const MAX_SHARE: u64 = 262_144;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> IsolationError + '_ {
    move |source| IsolationError::Io { path: path.to_path_buf(), source }
}

/// Which cgroup interface a hierarchy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// cgroup v1: the `cpu` controller's own hierarchy, `cpu.shares`, `cgroup.procs`.
    V1,
    /// cgroup v2: the unified hierarchy with `cpu` enabled in `cgroup.subtree_control`, `cpu.weight`.
    V2,
}

/// A writable hierarchy with the `cpu` controller, and the cgroup of this process in it (where our cgroups go).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuHierarchy {
    /// The interface.
    pub version: CgroupVersion,
    /// The directory our cgroups are created under: this process's own cgroup in that hierarchy.
    pub base: PathBuf,
}

impl CpuHierarchy {
    /// Finds a hierarchy we can write, from `/proc/self/mounts` and `/proc/self/cgroup`: cgroup v2 when its
    /// root lists `cpu` in `cgroup.controllers` (Fabric hosts under systemd), else a v1 mount with the `cpu`
    /// controller (as on this project's build machines: `/sys/fs/cgroup/cpu`), and checks that a child cgroup
    /// can be created under this process's cgroup there.
    ///
    /// Errors: [`IsolationError::Unavailable`] with what was found, e.g. a v2 hierarchy without controllers and no v1
    /// `cpu` mount, or a read-only mount (no root).
    pub fn detect() -> Result<CpuHierarchy, IsolationError> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").map_err(io(Path::new("/proc/self/mounts")))?;
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut reasons = Vec::new();
        for candidate in candidates(&mounts, &own) {
            match probe(&candidate) {
                Ok(()) => return Ok(candidate),
                Err(e) => reasons.push(format!("{:?} at {}: {e}", candidate.version, candidate.base.display())),
            }
        }
        if reasons.is_empty() {
            reasons.push("neither a cgroup v2 hierarchy with the cpu controller nor a cgroup v1 cpu mount".into());
        }
        Err(IsolationError::Unavailable(reasons.join("; ")))
    }

    /// The cgroup `name` directly under [`CpuHierarchy::base`], created if missing.
    ///
    /// Errors: the directory cannot be created, or (v2) the `cpu` controller cannot be enabled for its children.
    pub fn cgroup(&self, name: &str) -> Result<Cgroup, IsolationError> {
        Cgroup { version: self.version, path: self.base.clone() }.child(name)
    }
}

/// One cgroup mount of `/proc/self/mounts`.
struct CgroupMount<'a> {
    /// The mount point.
    dir: &'a str,
    version: CgroupVersion,
    /// The mount options (v1 names its controllers there).
    opts: &'a str,
}

impl CgroupMount<'_> {
    /// Whether a v2 hierarchy's root offers `controller` (its `cgroup.controllers`).
    fn offers(&self, controller: &str) -> bool {
        let controllers = std::fs::read_to_string(Path::new(self.dir).join("cgroup.controllers")).unwrap_or_default();
        controllers.split_whitespace().any(|c| c == controller)
    }
}

/// The cgroup (v1) and cgroup2 mounts in `mounts`, the text of `/proc/self/mounts`.
fn cgroup_mounts(mounts: &str) -> impl Iterator<Item = CgroupMount<'_>> {
    mounts.lines().filter_map(|line| {
        let mut f = line.split_whitespace().skip(1);
        let (dir, fstype, opts) = (f.next()?, f.next()?, f.next()?);
        let version = match fstype {
            "cgroup2" => CgroupVersion::V2,
            "cgroup" => CgroupVersion::V1,
            _ => return None,
        };
        Some(CgroupMount { dir, version, opts })
    })
}

/// The hierarchies to try, best first: v2 when its root offers `cpu`, then v1's `cpu` mount. `mounts` is
/// `/proc/self/mounts`, `own` is `/proc/self/cgroup`.
fn candidates(mounts: &str, own: &str) -> Vec<CpuHierarchy> {
    let mut out = Vec::new();
    for m in cgroup_mounts(mounts) {
        let (dir, opts) = (m.dir, m.opts);
        let root = PathBuf::from(dir);
        if m.version == CgroupVersion::V2 {
            if m.offers("cpu") {
                let rel = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap_or("/");
                out.insert(0, CpuHierarchy { version: CgroupVersion::V2, base: under(&root, rel) });
            }
        } else if opts.split(',').any(|o| o == "cpu") {
            let rel = own
                .lines()
                .find_map(|l| {
                    let mut parts = l.splitn(3, ':');
                    let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                    controllers.split(',').any(|c| c == "cpu").then_some(path)
                })
                .unwrap_or("/");
            out.push(CpuHierarchy { version: CgroupVersion::V1, base: under(&root, rel) });
        }
    }
    out
}

fn under(root: &Path, rel: &str) -> PathBuf {
    let rel = rel.trim().trim_start_matches('/');
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

/// Creates and removes a probe cgroup under `h.base`.
fn probe(h: &CpuHierarchy) -> Result<(), IsolationError> {
    let dir = h.base.join(format!("ferrofabric-probe-{}", std::process::id()));
    std::fs::create_dir(&dir).map_err(io(&dir))?;
    let share_file = dir.join(share_file(h.version));
    let ok = share_file.exists();
    let _ = std::fs::remove_dir(&dir);
    if ok {
        Ok(())
    } else {
        Err(IsolationError::Unavailable(format!("{} has no {}", dir.display(), share_file.display())))
    }
}

fn share_file(version: CgroupVersion) -> &'static str {
    match version {
        CgroupVersion::V1 => "cpu.shares",
        CgroupVersion::V2 => "cpu.weight",
    }
}

/// A share (v1 units) as cgroup v2's `cpu.weight`.
pub fn share_to_weight(share: u64) -> u64 {
    ((share * 100 + 512) / 1024).clamp(1, 10_000)
}

/// Whether this host divides disk time between cgroups by weight — what would steer a neighbour's I/O as CPU
/// shares steer its CPU: cgroup v2's `io.weight` (the `io` controller at the root), or v1's `blkio.weight` /
/// `blkio.bfq.weight` (present only under a proportional I/O scheduler, CFQ or BFQ). On `Ok`, which file; on
/// `Err`, what was found instead (e.g. a v1 blkio hierarchy with throttling files only, under the `none` or
/// `mq-deadline` scheduler, which have no weights).
pub fn io_weight_support() -> Result<String, IsolationError> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").map_err(io(Path::new("/proc/self/mounts")))?;
    let mut found = Vec::new();
    for m in cgroup_mounts(&mounts) {
        let dir = m.dir;
        let root = Path::new(dir);
        if m.version == CgroupVersion::V2 {
            if m.offers("io") {
                return Ok(format!("io.weight under {dir}"));
            }
            found.push(format!("cgroup v2 at {dir} without the io controller"));
        } else if m.opts.split(',').any(|o| o == "blkio") {
            for file in ["blkio.weight", "blkio.bfq.weight"] {
                if root.join(file).exists() {
                    return Ok(format!("{file} under {dir}"));
                }
            }
            found.push(format!(
                "cgroup v1 blkio at {dir} with throttling files only (no blkio.weight, no blkio.bfq.weight)"
            ));
        }
    }
    let mut schedulers: Vec<String> = std::fs::read_dir("/sys/block")
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let s = std::fs::read_to_string(e.path().join("queue/scheduler")).ok()?;
                    let active =
                        s.split_whitespace().find(|w| w.starts_with('['))?.trim_matches(['[', ']']).to_string();
                    Some(active)
                })
                .collect()
        })
        .unwrap_or_default();
    schedulers.sort();
    schedulers.dedup();
    if !schedulers.is_empty() {
        found.push(format!("the disks' I/O schedulers: {} (none divides by weight)", schedulers.join(", ")));
    }
    if found.is_empty() {
        found.push("no cgroup hierarchy with an I/O controller".into());
    }
    Err(IsolationError::NoIoWeight(found.join("; ")))
}

/// One cgroup: its directory and interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    version: CgroupVersion,
    path: PathBuf,
}

impl Cgroup {
    /// The cgroup at `path` (which must exist) in a hierarchy of `version`.
    pub fn at(version: CgroupVersion, path: PathBuf) -> Cgroup {
        Cgroup { version, path }
    }

    /// Its directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its interface.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The child cgroup `name`, created if missing. On v2 this cgroup's `cgroup.subtree_control` gets `+cpu`
    /// first, so that the child has a `cpu.weight`.
    ///
    /// Errors: file errors.
    pub fn child(&self, name: &str) -> Result<Cgroup, IsolationError> {
        if self.version == CgroupVersion::V2 {
            let control = self.path.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&control).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "cpu") {
                std::fs::write(&control, "+cpu").map_err(io(&control))?;
            }
        }
        let path = self.path.join(name);
        if !path.is_dir() {
            std::fs::create_dir(&path).map_err(io(&path))?;
        }
        Ok(Cgroup { version: self.version, path })
    }

    /// Moves process `pid` (all its threads) into this cgroup.
    ///
    /// Errors: file errors (e.g. the process has exited).
    pub fn add_process(&self, pid: u32) -> Result<(), IsolationError> {
        let procs = self.path.join("cgroup.procs");
        std::fs::write(&procs, pid.to_string()).map_err(io(&procs))
    }

    /// The processes in this cgroup (not in its children).
    ///
    /// Errors: file errors.
    pub fn processes(&self) -> Result<Vec<u32>, IsolationError> {
        let procs = self.path.join("cgroup.procs");
        let text = std::fs::read_to_string(&procs).map_err(io(&procs))?;
        Ok(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// Sets the CPU share (v1 units, clamped to [[`MIN_SHARE`], [`MAX_SHARE`]]).
    ///
    /// Errors: file errors.
    pub fn set_share(&self, share: u64) -> Result<(), IsolationError> {
        let share = share.clamp(MIN_SHARE, MAX_SHARE);
        let file = self.path.join(share_file(self.version));
        let value = match self.version {
            CgroupVersion::V1 => share,
            CgroupVersion::V2 => share_to_weight(share),
        };
        std::fs::write(&file, value.to_string()).map_err(io(&file))
    }

    /// The CPU share (v1 units; on v2 the weight converted back).
    ///
    /// Errors: file errors or an unparsable value.
    pub fn share(&self) -> Result<u64, IsolationError> {
        let file = self.path.join(share_file(self.version));
        let text = std::fs::read_to_string(&file).map_err(io(&file))?;
        let value: u64 = text.trim().parse().map_err(|_| IsolationError::Io {
            path: file.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not a number: {text:?}")),
        })?;
        Ok(match self.version {
            CgroupVersion::V1 => value,
            CgroupVersion::V2 => value * 1024 / 100,
        })
    }

    /// Removes this cgroup after moving any process left in it to the parent (a cgroup with processes cannot be
    /// removed). Best effort: errors are ignored, as this runs at shutdown.
    pub fn remove(&self) {
        if let (Some(parent), Ok(pids)) = (self.path.parent(), self.processes()) {
            let parent = Cgroup { version: self.version, path: parent.to_path_buf() };
            for pid in pids {
                let _ = parent.add_process(pid);
            }
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn v1_cpu_mount_is_found_when_v2_has_no_controllers() {
        let mounts = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                      cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified-does-not-exist cgroup2 rw 0 0\n";
        let own = "4:memory:/x\n1:cpu:/jobs/7\n0::/\n";
        let c = candidates(mounts, own);
        assert_eq!(c, vec![CpuHierarchy { version: CgroupVersion::V1, base: "/sys/fs/cgroup/cpu/jobs/7".into() }]);
        assert!(candidates("proc /proc proc rw 0 0\n", own).is_empty());
    }

    #[test]
    fn combined_v1_controllers_are_recognised() {
        let mounts = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n";
        let c = candidates(mounts, "3:cpu,cpuacct:/\n");
        assert_eq!(c[0].base, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"));
    }

    #[test]
    fn share_maps_to_v2_weight_with_the_default_kept() {
        assert_eq!(share_to_weight(DEFAULT_SHARE), 100);
        assert_eq!(share_to_weight(2), 1);
        assert_eq!(share_to_weight(4096), 400);
        assert_eq!(share_to_weight(MAX_SHARE), 10_000);
    }

    #[test]
    fn a_plain_directory_stands_in_for_a_cgroup_file_layout() {
        // Not a kernel cgroup: checks the file names and formats written.
        let dir = tempfile::tempdir().unwrap();
        let g = Cgroup::at(CgroupVersion::V1, dir.path().to_path_buf());
        g.set_share(1 << 30).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("cpu.shares")).unwrap(), "262144");
        assert_eq!(g.share().unwrap(), MAX_SHARE);
        let v2 = Cgroup::at(CgroupVersion::V2, dir.path().to_path_buf());
        v2.set_share(2048).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("cpu.weight")).unwrap(), "200");
        assert_eq!(v2.share().unwrap(), 2048);
    }
}
