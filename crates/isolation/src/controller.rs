//! The share controller: each second, one [`Observation`] in, one [`Decision`] out ([`Controller::step`]).
//! Pure: no clock, no files; [`crate::run_controller`] feeds it and applies its shares to cgroups.
//!
//! After QiOi (Kim et al., Applied Sciences 11(9), 2021): a user-level loop watches the committed throughput each
//! second and raises the CPU share of Fabric's components when the throughput falls under an operator's isolation
//! threshold. The paper's algorithm text was not available to us; this design is ours:
//!
//! Throughput is the mean of the last `smoothing_periods` seconds: blocks commit in bursts, so one second's count
//! swings by ±30% at a steady load.
//!
//! * **Below the threshold** (`tx/s < threshold`): the components short of CPU are those that waited on a run
//!   queue in the last second (CPU time a neighbour took from them; see [`crate::SchedTimes`]) at least
//!   `starved_wait` cores. If any did while the host had no idle CPU (less than `idle_cores`), the share of each
//!   of them is multiplied by `raise_factor` (at most `max_share`), every second until the throughput is back:
//!   all at once, because under co-located work every busy component waits, and one raise at a time leaves the
//!   node short for many seconds, which it repays with a backlog and a latency tail. If nobody waited or a core
//!   sat idle, the throughput is low for another reason (little load, I/O, a ramp-up) and shares stay: shares
//!   only divide a busy CPU.
//! * **At or above the threshold with a busy CPU**, a component that still waits at least `latency_wait` cores is
//!   raised the same way: the throughput holds, but each of its wake-ups waits behind a neighbour, and that wait is
//!   latency every transaction pays (the block latency tail); a share large enough makes CFS preempt the
//!   neighbour at once.
//! * **At or above the threshold with idle CPU** (at least `idle_cores` for `calm_periods` seconds in a row: the
//!   interference has ended): every raised share is multiplied by `decay_factor` (not below the default), and
//!   again after each further `calm_periods` such seconds, until all are back at the default.
//! * **Otherwise** (at or above the threshold with a busy CPU and little waiting, or for `settle_periods` seconds after any change, as
//!   the committed throughput lags the shares by a block or two), nothing changes. Raised shares are not probed
//!   downwards while the neighbours stay: a share costs them nothing while the node does not use the CPU (CFS
//!   shares only divide CPU time that several groups want), so a node that holds its threshold with a large share
//!   takes from its neighbours only what its load needs, and a downward probe would take the node under its
//!   threshold each time, which is a latency spike the operator would see.

/// Tunables of the controller (the defaults are what `ferrofabric node --isolation-threshold` runs).
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerConfig {
    /// The operator's isolation threshold: committed transactions per second.
    pub threshold_tx_per_s: f64,
    /// A raise multiplies a starved component's share by this.
    pub raise_factor: f64,
    /// A decay multiplies each raised share by this (then clamps to the default).
    pub decay_factor: f64,
    /// The default share of every component (v1 units).
    pub default_share: u64,
    /// No share goes above this.
    pub max_share: u64,
    /// Run-queue wait (cores, i.e. seconds per second) from which a component counts as starved.
    pub starved_wait: f64,
    /// Run-queue wait (cores) from which a component is raised even while the throughput holds.
    pub latency_wait: f64,
    /// Idle CPU on the host (cores) from which nobody is taken to compete.
    pub idle_cores: f64,
    /// Seconds without decisions after a change.
    pub settle_periods: u32,
    /// Seconds of throughput averaged for a decision.
    pub smoothing_periods: usize,
    /// Seconds at or above the threshold with idle CPU before each decay.
    pub calm_periods: u32,
}

impl ControllerConfig {
    /// The defaults for `threshold` tx/s: raise ×4, decay ×0.25, shares 1024 … 262,144 (the kernel's largest), starved from 0.05
    /// cores of waiting (0.25 while the threshold holds), no contention from 0.2 idle cores, settle 1 s,
    /// throughput averaged over 3 s, calm 3 s.
    pub fn new(threshold: f64) -> ControllerConfig {
        ControllerConfig {
            threshold_tx_per_s: threshold,
            raise_factor: 4.0,
            decay_factor: 0.25,
            default_share: crate::DEFAULT_SHARE,
            max_share: crate::MAX_SHARE,
            starved_wait: 0.05,
            latency_wait: 0.25,
            idle_cores: 0.2,
            settle_periods: 1,
            smoothing_periods: 3,
            calm_periods: 3,
        }
    }
}

/// One component's use of the CPU over the last period, in cores (seconds per second).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ComponentLoad {
    /// Time on a CPU.
    pub cpu: f64,
    /// Time runnable but waiting for a CPU.
    pub wait: f64,
}

/// What the controller sees each period.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Committed transactions per second over the period.
    pub tx_per_s: f64,
    /// Per component, in the controller's component order.
    pub components: Vec<ComponentLoad>,
    /// The host's idle CPU over the period, in cores.
    pub idle: f64,
}

/// What the controller did in one period.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Shares unchanged, and why.
    Hold(&'static str),
    /// The shares of starved components went up: `(component, from, to)` each.
    Raise(Vec<(usize, u64, u64)>),
    /// Raised shares moved toward the default: `(component, from, to)` each.
    Decay(Vec<(usize, u64, u64)>),
}

impl Decision {
    /// `hold`, `raise` or `decay` (the `action` label of `qioi_decisions_total`).
    pub fn action(&self) -> &'static str {
        match self {
            Decision::Hold(_) => "hold",
            Decision::Raise(_) => "raise",
            Decision::Decay(_) => "decay",
        }
    }
}

/// The controller's state: the shares it wants, and its hysteresis counters.
#[derive(Debug, Clone)]
pub struct Controller {
    config: ControllerConfig,
    shares: Vec<u64>,
    settle: u32,
    calm: u32,
    /// The last `smoothing_periods` throughputs, newest last.
    recent: std::collections::VecDeque<f64>,
}

impl Controller {
    /// A controller for `components` components, all at the default share.
    pub fn new(config: ControllerConfig, components: usize) -> Controller {
        let shares = vec![config.default_share; components];
        Controller { config, shares, settle: 0, calm: 0, recent: Default::default() }
    }

    /// The configuration.
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// The current share of each component (v1 units).
    pub fn shares(&self) -> &[u64] {
        &self.shares
    }

    /// The share of the cgroup that holds all components: the largest component share, so that the node competes
    /// with its neighbours with the weight of its most favoured component, and inside it components compete with
    /// their own shares.
    pub fn node_share(&self) -> u64 {
        self.shares.iter().copied().max().unwrap_or(self.config.default_share)
    }

    /// Multiplies the shares of `components` by the raise factor (those below the largest share); `None` when
    /// none could rise.
    fn raise(&mut self, components: &[usize]) -> Option<Decision> {
        let c = &self.config;
        let mut changed = Vec::new();
        for &i in components {
            let from = self.shares[i];
            if from < c.max_share {
                let to = ((from as f64 * c.raise_factor).round() as u64).clamp(from + 1, c.max_share);
                self.shares[i] = to;
                changed.push((i, from, to));
            }
        }
        if changed.is_empty() {
            return None;
        }
        self.settle = c.settle_periods;
        Some(Decision::Raise(changed))
    }

    /// One period: decides from `obs` (components beyond those given count as idle) and updates the shares.
    pub fn step(&mut self, obs: &Observation) -> Decision {
        let c = self.config.clone();
        self.recent.push_back(obs.tx_per_s);
        while self.recent.len() > c.smoothing_periods.max(1) {
            self.recent.pop_front();
        }
        if self.settle > 0 {
            self.settle -= 1;
            return Decision::Hold("settling after a change");
        }
        let tx = self.recent.iter().sum::<f64>() / self.recent.len() as f64;
        let idle = obs.idle >= c.idle_cores;
        let waiting = |least: f64| -> Vec<usize> {
            (0..self.shares.len()).filter(|&i| obs.components.get(i).is_some_and(|l| l.wait >= least)).collect()
        };
        if tx < c.threshold_tx_per_s {
            self.calm = 0;
            let starved = waiting(c.starved_wait);
            if starved.is_empty() {
                return Decision::Hold("below the threshold but no component waits for a CPU");
            }
            if idle {
                // Shares only divide a busy CPU: with idle cores a larger share buys nothing.
                return Decision::Hold("below the threshold with idle CPU: not a matter of shares");
            }
            return self.raise(&starved).unwrap_or(Decision::Hold("the starved components are at the largest share"));
        }
        if !idle {
            self.calm = 0;
            return self
                .raise(&waiting(c.latency_wait))
                .unwrap_or(Decision::Hold("at or above the threshold while the neighbours compete"));
        }
        if self.shares.iter().all(|&s| s <= c.default_share) {
            self.calm = 0;
            return Decision::Hold("at or above the threshold at default shares");
        }
        self.calm += 1;
        if self.calm < c.calm_periods {
            return Decision::Hold("the neighbours have left: waiting to decay");
        }
        let mut changed = Vec::new();
        for (i, s) in self.shares.iter_mut().enumerate() {
            if *s > c.default_share {
                let to = ((*s as f64 * c.decay_factor).round() as u64).max(c.default_share);
                changed.push((i, *s, to));
                *s = to;
            }
        }
        self.calm = 0;
        self.settle = c.settle_periods;
        Decision::Decay(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host of `cores` CPUs under CFS: proportional sharing with water-filling (a group that needs less than
    /// its part leaves the rest to the others), first between the node and each hog (one busy thread each, a
    /// cgroup of its own at the default share, as on QiOi's host) by their shares, then among the node's
    /// components by theirs. Component `i` needs `cost[i]` core-seconds per transaction; the node is offered
    /// `load` tx/s; throughput is what the most starved component allows.
    struct Plant {
        cores: f64,
        cost: Vec<f64>,
        load: f64,
        hogs: usize,
    }

    fn water_fill(capacity: f64, demands: &[f64], weights: &[f64]) -> Vec<f64> {
        let mut grant = vec![0.0; demands.len()];
        let mut open: Vec<usize> = (0..demands.len()).filter(|&i| demands[i] > 0.0).collect();
        let mut left = capacity;
        while !open.is_empty() && left > 1e-12 {
            let total: f64 = open.iter().map(|&i| weights[i]).sum();
            let satisfied: Vec<usize> =
                open.iter().copied().filter(|&i| demands[i] - grant[i] <= left * weights[i] / total).collect();
            if satisfied.is_empty() {
                for &i in &open {
                    grant[i] += left * weights[i] / total;
                }
                break;
            }
            for &i in &satisfied {
                left -= demands[i] - grant[i];
                grant[i] = demands[i];
            }
            open.retain(|i| !satisfied.contains(i));
        }
        grant
    }

    impl Plant {
        /// (observation, the hogs' CPU) under the controller's shares.
        fn observe(&self, ctl: &Controller) -> (Observation, f64) {
            let demand: Vec<f64> = self.cost.iter().map(|c| c * self.load).collect();
            let mut top_demand = vec![demand.iter().sum::<f64>()];
            let mut top_weight = vec![ctl.node_share() as f64];
            top_demand.extend(std::iter::repeat_n(1.0, self.hogs));
            top_weight.extend(std::iter::repeat_n(1024.0, self.hogs));
            let top = water_fill(self.cores, &top_demand, &top_weight);
            let weights: Vec<f64> = ctl.shares().iter().map(|&s| s as f64).collect();
            let grant = water_fill(top[0], &demand, &weights);
            let tx = self.cost.iter().zip(&grant).map(|(c, g)| g / c).fold(self.load, f64::min);
            let components =
                demand.iter().zip(&grant).map(|(d, g)| ComponentLoad { cpu: *g, wait: (d - g).max(0.0) }).collect();
            let used: f64 = top.iter().sum();
            (Observation { tx_per_s: tx, components, idle: (self.cores - used).max(0.0) }, used - top[0])
        }
    }

    /// Orderer, committer, two endorsers, block store on two cores, offered 5,000 tx/s (0.75 cores): the
    /// committer costs most, the endorsers nothing (transactions are endorsed beforehand).
    fn plant(hogs: usize) -> Plant {
        Plant { cores: 2.0, cost: vec![40e-6, 100e-6, 0.0, 0.0, 10e-6], load: 5_000.0, hogs }
    }

    const THRESHOLD: f64 = 4_750.0;

    fn run(ctl: &mut Controller, plant: &Plant, seconds: usize) -> Vec<(f64, f64, Decision)> {
        (0..seconds)
            .map(|_| {
                let (obs, hogs) = plant.observe(ctl);
                let decision = ctl.step(&obs);
                (obs.tx_per_s, hogs, decision)
            })
            .collect()
    }

    #[test]
    fn raises_every_starved_component_and_holds_the_threshold_within_seconds() {
        let mut ctl = Controller::new(ControllerConfig::new(THRESHOLD), 5);
        let p = plant(4);
        let (before, _) = p.observe(&ctl);
        assert!(before.tx_per_s < 0.8 * THRESHOLD, "the hogs must hurt: {}", before.tx_per_s);
        let Decision::Raise(first) = ctl.step(&before) else { panic!("no raise beside the hogs") };
        let raised: Vec<usize> = first.iter().map(|(i, _, _)| *i).collect();
        // Under ideal proportional sharing only the committer needs more than its part of the node's CPU.
        assert_eq!(raised, [1], "only the component that waits is raised");
        let trace = run(&mut ctl, &p, 60);
        let first_held = trace.iter().position(|(tx, _, _)| *tx >= THRESHOLD).expect("never held");
        assert!(first_held <= 6, "held only after {first_held} s: {trace:?}");
        assert!(trace[first_held..].iter().all(|(tx, _, _)| *tx >= THRESHOLD), "{trace:?}");
        assert_eq!(ctl.shares()[2], 1024, "an idle endorser keeps its share");
        assert_eq!(ctl.shares()[3], 1024);
    }

    #[test]
    fn shares_hold_steady_while_the_neighbours_stay() {
        let mut ctl = Controller::new(ControllerConfig::new(THRESHOLD), 5);
        let p = plant(4);
        run(&mut ctl, &p, 30);
        let converged = ctl.shares().to_vec();
        let trace = run(&mut ctl, &p, 300);
        assert!(trace.iter().all(|(_, _, d)| matches!(d, Decision::Hold(_))), "{trace:?}");
        assert_eq!(ctl.shares(), converged);
    }

    #[test]
    fn shares_return_to_default_when_the_interference_ends() {
        let mut ctl = Controller::new(ControllerConfig::new(THRESHOLD), 5);
        run(&mut ctl, &plant(4), 60);
        assert!(ctl.shares()[1] > 1024);
        let trace = run(&mut ctl, &plant(0), 60);
        assert!(ctl.shares().iter().all(|&s| s == 1024), "{:?}", ctl.shares());
        assert!(trace.iter().all(|(tx, _, _)| *tx >= THRESHOLD));
    }

    #[test]
    fn a_component_that_waits_while_the_threshold_holds_is_raised_until_it_waits_little() {
        let mut ctl = Controller::new(ControllerConfig::new(THRESHOLD), 2);
        let obs = |wait: f64, idle: f64| Observation {
            tx_per_s: 5_000.0,
            components: vec![ComponentLoad { cpu: 0.3, wait }, ComponentLoad { cpu: 0.1, wait: 0.01 }],
            idle,
        };
        assert_eq!(ctl.step(&obs(0.6, 0.0)), Decision::Raise(vec![(0, 1024, 4096)]));
        assert!(matches!(ctl.step(&obs(0.6, 0.0)), Decision::Hold(_)), "settling");
        assert_eq!(ctl.step(&obs(0.4, 0.0)), Decision::Raise(vec![(0, 4096, 16384)]));
        ctl.step(&obs(0.1, 0.0));
        assert!(matches!(ctl.step(&obs(0.1, 0.0)), Decision::Hold(_)), "little waiting: the share holds");
        assert_eq!(ctl.shares(), [16384, 1024]);
        // With idle CPU the wait is the node's own (its threads compete with each other): no raise.
        let mut alone = Controller::new(ControllerConfig::new(THRESHOLD), 2);
        assert!(matches!(alone.step(&obs(0.6, 0.5)), Decision::Hold(_)));
    }

    #[test]
    fn no_raise_when_nobody_waits() {
        let mut ctl = Controller::new(ControllerConfig::new(THRESHOLD), 5);
        let mut p = plant(0);
        p.load = 1_000.0; // little load: throughput under the threshold, but no contention
        run(&mut ctl, &p, 30);
        assert!(ctl.shares().iter().all(|&s| s == 1024));
    }

    #[test]
    fn the_hogs_keep_what_the_node_does_not_need() {
        let mut ctl = Controller::new(ControllerConfig::new(THRESHOLD), 5);
        let p = plant(4);
        let (_, without) = p.observe(&ctl);
        let trace = run(&mut ctl, &p, 120);
        let with: f64 = trace[60..].iter().map(|(_, h, _)| h).sum::<f64>() / 60.0;
        let need: f64 = p.cost.iter().sum::<f64>() * p.load;
        assert!((with - (p.cores - need)).abs() < 1e-6, "the hogs get {with} cores, the node needs {need}");
        assert!(with >= 0.7 * without, "hogs {with} of {without} cores");
    }
}
