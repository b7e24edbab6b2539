//! Performance isolation on shared hosts, after QiOi (Kim et al., "QiOi: Performance Isolation for Hyperledger
//! Fabric", Applied Sciences 11(9), 2021): Ferrofabric's components in their own CPU-share cgroups, and a
//! controller that raises the shares of the components short of CPU when the committed throughput falls under an
//! operator's isolation threshold, and lets it decay when the neighbours leave.
//!
//! * [`CpuHierarchy::detect`] finds a writable cgroup v2 (`cpu.weight`) or v1 (`cpu.shares`) hierarchy;
//!   [`Cgroup`] is one cgroup (create, move a process in, set the share). Shares are in v1 units everywhere.
//! * [`SchedTimes`]: a process's CPU and run-queue wait time from `/proc` — how the components short of CPU are found.
//! * [`set_slice`]: short EEVDF slices for a component's threads, so that their wake-ups preempt a neighbour at
//!   once (what a share cannot give).
//! * [`Controller`]: the decision rule, pure and testable against a simulated host (its module documentation
//!   describes the design: thresholds, hysteresis, bounds).
//! * [`run_controller`]: the loop that feeds it once a second from the committer's operations endpoint and
//!   applies its shares, with `qioi_cpu_share{component}` and `qioi_decisions_total{action}` metrics.

mod cgroup;
mod control_loop;
mod controller;
mod error;
mod sched;
mod slice;

pub use cgroup::{
    io_weight_support, share_to_weight, Cgroup, CgroupVersion, CpuHierarchy, DEFAULT_SHARE, MAX_SHARE, MIN_SHARE,
};
pub use control_loop::{
    committed_transactions, restore_defaults, run_controller, Component, RunningController, TracePoint, PERIOD,
};
pub use controller::{ComponentLoad, Controller, ControllerConfig, Decision, Observation};
pub use error::IsolationError;
pub use sched::SchedTimes;
pub use slice::{set_slice, SHORT_SLICE_NS};
