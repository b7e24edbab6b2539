//! Short scheduler slices for a component's threads ([`set_slice`]): what a CPU share cannot give.
//!
//! A CPU share divides CPU time between groups that all want it; it does not say how soon a thread that wakes gets
//! a CPU that a neighbour's thread is running on. Linux's EEVDF scheduler (6.6 and later) lets the running thread
//! finish its slice (0.7 ms × (1 + log2 CPUs) by default) before a waking one of any weight preempts it, unless the
//! waking thread asked for a shorter slice (`sched_setattr` with `SCHED_OTHER` and `sched_runtime`, Linux 6.12 and
//! later; Documentation/scheduler/sched-eevdf.rst). A block crosses the orderer, the committer and the client in
//! a dozen wake-ups, each of which can wait out a neighbour's slice: beside sixteen CPU hogs that was +20 ms of
//! block latency at the median and +60 ms at p99 with every share at the largest, and about a third of it with
//! 0.1 ms slices (docs/PERFORMANCE.md). Kernels before 6.12 ignore `sched_runtime` for `SCHED_OTHER`, so there
//! this changes nothing.

use std::path::Path;

/// The shortest slice the kernel grants (it clamps `sched_runtime` to 0.1–100 ms), in nanoseconds.
pub const SHORT_SLICE_NS: u64 = 100_000;

/// `struct sched_attr` of `sched_setattr(2)`, its first version (56 bytes).
#[repr(C)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// Asks for slices of `slice_ns` nanoseconds (0: the kernel's default slice) for thread `tid`, keeping its policy
/// `SCHED_OTHER` and its nice value.
///
/// Errors: the kernel's (no such thread, no permission: another user's thread needs `CAP_SYS_NICE`).
fn set_thread_slice(tid: u32, slice_ns: u64) -> std::io::Result<()> {
    let nice = std::fs::read_to_string(format!("/proc/{tid}/stat"))
        .ok()
        .and_then(|s| {
            // Field 19 (nice), counted after the parenthesised command name, which may hold spaces.
            s.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(16)?.parse::<i32>().ok())
        })
        .unwrap_or(0);
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: slice_ns,
        sched_deadline: 0,
        sched_period: 0,
        sched_util_min: 0,
        sched_util_max: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: `attr` is a valid, initialised `struct sched_attr` whose `size` field gives its length; the kernel
    // only reads it during the call.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid as libc::c_long, &attr as *const SchedAttr, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets the slice of every thread of process `pid` to `slice_ns` ([`SHORT_SLICE_NS`] for the shortest, 0 for the
/// default), skipping the threads in `done` and adding those it set; returns how many it set. Threads that exit
/// meanwhile are skipped.
///
/// Errors: the first refusal other than a thread that has gone.
pub fn set_slice(pid: u32, slice_ns: u64, done: &mut std::collections::HashSet<u32>) -> std::io::Result<usize> {
    let mut set = 0;
    let Ok(tasks) = std::fs::read_dir(Path::new("/proc").join(pid.to_string()).join("task")) else { return Ok(0) };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
        if done.contains(&tid) {
            continue;
        }
        match set_thread_slice(tid, slice_ns) {
            Ok(()) => {
                done.insert(tid);
                set += 1;
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(set)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sched_attr_has_the_kernels_first_layout() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 56);
    }

    #[test]
    fn this_process_can_ask_for_short_slices_and_give_them_back() {
        let me = std::process::id();
        let mut done = std::collections::HashSet::new();
        assert!(set_slice(me, SHORT_SLICE_NS, &mut done).unwrap() >= 1);
        assert_eq!(set_slice(me, SHORT_SLICE_NS, &mut done).unwrap(), 0, "threads already set are skipped");
        let slice = |tid: u32| {
            let sched = std::fs::read_to_string(format!("/proc/{me}/task/{tid}/sched")).unwrap_or_default();
            sched
                .lines()
                .find(|l| l.starts_with("se.slice"))
                .and_then(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
        };
        // This project's machines run Linux 6.18, which shows each thread's slice in /proc/PID/task/TID/sched.
        assert_eq!(slice(me), Some(SHORT_SLICE_NS));
        let mut back = std::collections::HashSet::new();
        set_slice(me, 0, &mut back).unwrap();
        let default = slice(me).unwrap();
        assert!(default > SHORT_SLICE_NS, "the default slice {default} ns is back");
    }
}
