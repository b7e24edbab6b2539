//! Statistics of a bench run: this process's CPU time and percentiles of measured samples.

/// User + system CPU seconds of this process so far (from `/proc/self/stat`; 0 if unavailable). Public for the
/// other benches (`ferrofabric bench e2e`).
pub(crate) fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 (1-based).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map(|f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum()).unwrap_or(0.0);
    ticks / 100.0
}

/// The `p`-th percentile (0–100, nearest rank) of ascending `sorted` values; 0 for an empty slice. Public for
/// the other benches (`ferrofabric bench e2e`).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
