//! What the kernel's scheduler says about a process: CPU time and run-queue wait ([`SchedTimes::of_process`]).
//!
//! `/proc/PID/task/TID/schedstat` holds three numbers per thread: nanoseconds on a CPU, nanoseconds runnable but
//! waiting on a run queue, and time slices (Linux `Documentation/scheduler/sched-stats.rst`). Waiting time is the
//! direct measure of CPU contention: a component that is starved by its neighbours waits, one that is idle or
//! blocked on I/O does not. The controller compares components by it.

use std::path::Path;

/// Cumulative scheduler times of a set of threads, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedTimes {
    /// Time on a CPU.
    pub cpu_ns: u64,
    /// Time runnable but waiting for a CPU.
    pub wait_ns: u64,
}

impl SchedTimes {
    /// The sum over every thread of process `pid`; zero for a process that has gone (it is being restarted).
    pub fn of_process(pid: u32) -> SchedTimes {
        SchedTimes::of_process_in(Path::new("/proc"), pid)
    }

    /// As [`SchedTimes::of_process`] under a procfs mounted at `proc`.
    pub fn of_process_in(proc: &Path, pid: u32) -> SchedTimes {
        let mut total = SchedTimes::default();
        let Ok(tasks) = std::fs::read_dir(proc.join(pid.to_string()).join("task")) else { return total };
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
                let t = parse_schedstat(&text);
                total.cpu_ns += t.cpu_ns;
                total.wait_ns += t.wait_ns;
            }
        }
        total
    }

    /// The sum over processes `pids`.
    pub fn of_processes(pids: &[u32]) -> SchedTimes {
        pids.iter().map(|&p| SchedTimes::of_process(p)).fold(SchedTimes::default(), |a, b| SchedTimes {
            cpu_ns: a.cpu_ns + b.cpu_ns,
            wait_ns: a.wait_ns + b.wait_ns,
        })
    }

    /// `self − earlier`, saturating (a restarted process starts again from zero).
    pub fn since(&self, earlier: &SchedTimes) -> SchedTimes {
        SchedTimes {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            wait_ns: self.wait_ns.saturating_sub(earlier.wait_ns),
        }
    }
}

/// The first two fields of a `schedstat` line; missing or malformed fields count as zero.
fn parse_schedstat(text: &str) -> SchedTimes {
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
    SchedTimes { cpu_ns: f.next().unwrap_or(0), wait_ns: f.next().unwrap_or(0) }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_summed_and_bad_lines_count_as_zero() {
        let dir = tempfile::tempdir().unwrap();
        for (tid, line) in [(10, "100 20 3\n"), (11, "5 7 1\n"), (12, "garbage")] {
            let d = dir.path().join("10/task").join(tid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("schedstat"), line).unwrap();
        }
        assert_eq!(SchedTimes::of_process_in(dir.path(), 10), SchedTimes { cpu_ns: 105, wait_ns: 27 });
        assert_eq!(SchedTimes::of_process_in(dir.path(), 99), SchedTimes::default());
    }

    #[test]
    fn this_process_has_cpu_time() {
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(SchedTimes::of_process(std::process::id()).cpu_ns > 0);
    }
}
