//! The share controller: each second, one [`Observation`] in, one [`Decision`] out ([`Controller::step`]).
//! Pure: no clock, no files; [`crate::run_controller`] feeds it and applies its shares to cgroups.
//!
//! After QiOi (Kim et al., Applied Sciences 11(9), 2021): a user-level loop watches the committed throughput each
//! second and raises the CPU share of a Fabric component when the throughput falls under an operator's isolation
//! threshold. The paper's algorithm text was not available to us; this design is ours:
//!
//! Throughput is the mean of the last `smoothing_periods` seconds: blocks commit in bursts, so one second's count
//! swings by ±30% at a steady load.
//!
//! * **Below the threshold** (`tx/s < threshold`): the bottleneck is the component that waited longest on a run
//!   queue in the last second (CPU time a neighbour took from it; see [`crate::SchedTimes`]). If it waited at least
//!   `starved_wait` cores while the host had no idle CPU (less than `idle_cores`), its share is multiplied by
//!   `raise_factor` (at most `max_share`); if nobody waited or a core sat idle, the throughput is low for
//!   another reason (little load, I/O, a ramp-up) and shares stay: shares only divide a busy CPU.
//! * **Above the threshold with idle CPU** (at least `idle_cores`: the interference has ended): after
//!   `calm_periods` such seconds every raised share is multiplied by `decay_factor` (not below the default).
//! * **Comfortably above with a busy CPU** (`tx/s ≥ threshold × comfort`): the node may hold more CPU than the
//!   threshold needs, so after `calm` such seconds in a row raised shares decay the same way, as a probe. `calm` starts at `calm_periods`; a decay that is
//!   followed by a raise before the next decay was a failed probe (the neighbours are still there), and doubles
//!   `calm` up to `max_calm_periods`, so the share that holds the threshold is probed ever more rarely: the
//!   oscillation is at most one raise/decay step every `max_calm_periods` seconds. Run-queue waits cannot tell
//!   that the interference has ended (a component with a large share stops waiting while its neighbours are
//!   still there); idle CPU can. A raised share costs the neighbours nothing while the node does not use it:
//!   CFS shares only divide CPU time that several groups want.
//! * **Between** the two, or for `settle_periods` seconds after any change (the committed throughput lags the
//!   shares by a block or two), nothing changes: the hysteresis band.

/// Tunables of the controller (the defaults are what `ferrofabric node --isolation-threshold` runs).
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerConfig {
    /// The operator's isolation threshold: committed transactions per second.
    pub threshold_tx_per_s: f64,
    /// "Comfortably above": decays start only at `threshold × comfort`.
    pub comfort: f64,
    /// A raise multiplies the bottleneck's share by this.
    pub raise_factor: f64,
    /// A decay multiplies each raised share by this (then clamps to the default).
    pub decay_factor: f64,
    /// The default share of every component (v1 units).
    pub default_share: u64,
    /// No share goes above this.
    pub max_share: u64,
    /// Run-queue wait (cores, i.e. seconds per second) from which a component counts as starved.
    pub starved_wait: f64,
    /// Idle CPU on the host (cores) from which nobody is taken to compete.
    pub idle_cores: f64,
    /// Seconds without decisions after a change.
    pub settle_periods: u32,
    /// Seconds of throughput averaged for a decision.
    pub smoothing_periods: usize,
    /// Seconds comfortably above the threshold before the first decay.
    pub calm_periods: u32,
    /// The longest wait between decays after failed probes.
    pub max_calm_periods: u32,
}

impl ControllerConfig {
    /// The defaults for `threshold` tx/s: comfort 1.1, raise ×2, decay ×0.5, shares 1024 … 16 × 1024, starved
    /// from 0.05 cores of waiting, no contention from 0.2 idle cores, settle 2 s, throughput averaged over 5 s,
    /// calm 3 … 24 s.
    pub fn new(threshold: f64) -> ControllerConfig {
        ControllerConfig {
            threshold_tx_per_s: threshold,
            comfort: 1.1,
            raise_factor: 2.0,
            decay_factor: 0.5,
            default_share: crate::DEFAULT_SHARE,
            max_share: 16 * crate::DEFAULT_SHARE,
            starved_wait: 0.05,
            idle_cores: 0.2,
            settle_periods: 2,
            smoothing_periods: 5,
            calm_periods: 3,
            max_calm_periods: 24,
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
    /// The share of `component` went from `from` to `to`.
    Raise {
        /// The component's index.
        component: usize,
        /// The old share.
        from: u64,
        /// The new share.
        to: u64,
    },
    /// Raised shares moved toward the default: `(component, from, to)` each.
    Decay(Vec<(usize, u64, u64)>),
}

impl Decision {
    /// `hold`, `raise` or `decay` (the `action` label of `qioi_decisions_total`).
    pub fn action(&self) -> &'static str {
        match self {
            Decision::Hold(_) => "hold",
            Decision::Raise { .. } => "raise",
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
    calm_needed: u32,
    /// A decay happened and no raise has followed it yet.
    probing: bool,
    /// The last `smoothing_periods` throughputs, newest last.
    recent: std::collections::VecDeque<f64>,
}

impl Controller {
    /// A controller for `components` components, all at the default share.
    pub fn new(config: ControllerConfig, components: usize) -> Controller {
        let shares = vec![config.default_share; components];
        let calm_needed = config.calm_periods;
        Controller { config, shares, settle: 0, calm: 0, calm_needed, probing: false, recent: Default::default() }
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

    /// One period: decides from `obs` (components beyond those given count as idle) and updates the shares.
    pub fn step(&mut self, obs: &Observation) -> Decision {
        let c = &self.config;
        let waits: Vec<f64> =
            (0..self.shares.len()).map(|i| obs.components.get(i).map(|l| l.wait).unwrap_or(0.0)).collect();
        self.recent.push_back(obs.tx_per_s);
        while self.recent.len() > c.smoothing_periods.max(1) {
            self.recent.pop_front();
        }
        if self.settle > 0 {
            self.settle -= 1;
            return Decision::Hold("settling after a change");
        }
        let tx = self.recent.iter().sum::<f64>() / self.recent.len() as f64;
        if tx < c.threshold_tx_per_s {
            self.calm = 0;
            let Some((i, &wait)) = waits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)) else {
                return Decision::Hold("no components");
            };
            if wait < c.starved_wait {
                return Decision::Hold("below the threshold but no component waits for a CPU");
            }
            if obs.idle >= c.idle_cores {
                // Shares only divide a busy CPU: with idle cores a larger share buys nothing.
                return Decision::Hold("below the threshold with idle CPU: not a matter of shares");
            }
            let from = self.shares[i];
            if from >= c.max_share {
                return Decision::Hold("the bottleneck is at the largest share");
            }
            if self.probing {
                // The last decay went too far: probe more rarely.
                self.calm_needed = (self.calm_needed * 2).min(c.max_calm_periods);
                self.probing = false;
            }
            let to = ((from as f64 * c.raise_factor).round() as u64).clamp(from + 1, c.max_share);
            self.shares[i] = to;
            self.settle = c.settle_periods;
            return Decision::Raise { component: i, from, to };
        }
        if self.shares.iter().all(|&s| s <= c.default_share) {
            self.calm = 0;
            self.calm_needed = c.calm_periods;
            self.probing = false;
            return Decision::Hold("above the threshold at default shares");
        }
        let contention_gone = obs.idle >= c.idle_cores;
        if !contention_gone && tx < c.threshold_tx_per_s * c.comfort {
            self.calm = 0;
            return Decision::Hold("within the hysteresis band");
        }
        self.calm += 1;
        let needed = if contention_gone { c.calm_periods } else { self.calm_needed };
        if self.calm < needed {
            return Decision::Hold("above the threshold, waiting to decay");
        }
        if self.probing || contention_gone {
            // The previous decay held (or there is nothing left to hold off): probe sooner next time.
            self.calm_needed = (self.calm_needed / 2).max(c.calm_periods);
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
        self.probing = true;
        self.settle = c.settle_periods;
        Decision::Decay(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host of `cores` CPUs under CFS: proportional sharing with water-filling (a group that needs less than
    /// its part leaves the rest to the others), first between the node and the hogs by their shares, then
    /// among the node's components by theirs. Component `i` needs `cost[i]` core-seconds per transaction; the
    /// node is offered `load` tx/s; throughput is what the most starved component allows.
    struct Plant {
        cores: f64,
        cost: Vec<f64>,
        load: f64,
        hogs: f64,
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
        /// (observation, hogs' CPU) under `shares`.
        fn observe(&self, ctl: &Controller) -> (Observation, f64) {
            let demand: Vec<f64> = self.cost.iter().map(|c| c * self.load).collect();
            let node_demand: f64 = demand.iter().sum();
            let top = water_fill(self.cores, &[node_demand, self.hogs], &[ctl.node_share() as f64, 1024.0]);
            let weights: Vec<f64> = ctl.shares().iter().map(|&s| s as f64).collect();
            let grant = water_fill(top[0], &demand, &weights);
            let tx = self.cost.iter().zip(&grant).map(|(c, g)| g / c).fold(self.load, f64::min);
            let components =
                demand.iter().zip(&grant).map(|(d, g)| ComponentLoad { cpu: *g, wait: (d - g).max(0.0) }).collect();
            let idle = (self.cores - top[0] - top[1]).max(0.0);
            (Observation { tx_per_s: tx, components, idle }, top[1])
        }
    }

    /// Orderer, committer, two endorsers, block store: the committer costs most, the endorsers nothing
    /// (transactions are endorsed beforehand).
    fn plant(hogs: f64) -> Plant {
        Plant { cores: 2.0, cost: vec![40e-6, 100e-6, 0.0, 0.0, 10e-6], load: 8_000.0, hogs }
    }

    fn run(ctl: &mut Controller, plant: &Plant, seconds: usize) -> Vec<(f64, f64)> {
        (0..seconds)
            .map(|_| {
                let (obs, hogs) = plant.observe(ctl);
                ctl.step(&obs);
                (obs.tx_per_s, hogs)
            })
            .collect()
    }

    #[test]
    fn raises_the_bottleneck_until_the_threshold_holds() {
        let mut ctl = Controller::new(ControllerConfig::new(7_200.0), 5);
        let p = plant(2.0);
        let (before, _) = p.observe(&ctl);
        assert!(before.tx_per_s < 7_200.0, "the hogs must hurt: {}", before.tx_per_s);
        let (obs, _) = p.observe(&ctl);
        assert!(matches!(ctl.step(&obs), Decision::Raise { component: 1, .. }), "the committer is the bottleneck");
        let trace = run(&mut ctl, &p, 120);
        // Held except while a probing decay is undone (the probes become rarer; see the next test).
        let late = &trace[20..];
        let held = late.iter().filter(|(tx, _)| *tx >= 7_200.0).count();
        assert!(held * 20 >= late.len() * 17, "{held} of {} seconds held: {trace:?}", late.len());
        let mean = late.iter().map(|(tx, _)| tx).sum::<f64>() / late.len() as f64;
        assert!(mean >= 7_200.0, "mean {mean}");
        assert_eq!(ctl.shares()[2], 1024, "an idle endorser keeps its share");
        assert_eq!(ctl.shares()[3], 1024);
    }

    #[test]
    fn oscillation_stays_within_one_step_and_becomes_rare() {
        let mut ctl = Controller::new(ControllerConfig::new(7_200.0), 5);
        let p = plant(2.0);
        let mut changes = Vec::new();
        let mut committer = Vec::new();
        for t in 0..300 {
            let (obs, _) = p.observe(&ctl);
            if !matches!(ctl.step(&obs), Decision::Hold(_)) {
                changes.push(t);
            }
            committer.push(ctl.shares()[1]);
        }
        // After convergence the committer's share moves between two neighbouring values at most.
        let late = &committer[100..];
        let (lo, hi) = (late.iter().min().copied().unwrap_or(0), late.iter().max().copied().unwrap_or(0));
        assert!(hi <= lo * 2, "share swings from {lo} to {hi}");
        // And changes become rare: at most one raise/decay pair per max_calm_periods seconds.
        let late_changes = changes.iter().filter(|&&t| t >= 100).count();
        assert!(late_changes <= 2 * 200 / 24 + 2, "{late_changes} changes in 200 s: {changes:?}");
    }

    #[test]
    fn shares_return_to_default_when_the_interference_ends() {
        let mut ctl = Controller::new(ControllerConfig::new(7_200.0), 5);
        run(&mut ctl, &plant(2.0), 120);
        assert!(ctl.shares()[1] > 1024);
        let trace = run(&mut ctl, &plant(0.0), 40);
        assert!(ctl.shares().iter().all(|&s| s == 1024), "{:?}", ctl.shares());
        assert!(trace.iter().all(|(tx, _)| *tx >= 7_200.0));
    }

    #[test]
    fn no_raise_when_nobody_waits() {
        let mut ctl = Controller::new(ControllerConfig::new(7_200.0), 5);
        let mut p = plant(0.0);
        p.load = 1_000.0; // little load: throughput under the threshold, but no contention
        run(&mut ctl, &p, 30);
        assert!(ctl.shares().iter().all(|&s| s == 1024));
    }

    #[test]
    fn the_hogs_keep_most_of_their_cpu() {
        let mut ctl = Controller::new(ControllerConfig::new(7_200.0), 5);
        let p = plant(2.0);
        let (_, alone) = p.observe(&ctl);
        let trace = run(&mut ctl, &p, 120);
        let hogs: f64 = trace[60..].iter().map(|(_, h)| h).sum::<f64>() / 60.0;
        assert!(hogs >= 0.7 * alone, "hogs {hogs} of {alone} cores");
    }
}
