//! A daemon of the `ferrofabric` binary as a child process, for the crash-consistency tests: its stdout is read
//! line by line on a thread so that a test can wait for the `<command> ready:` line with a timeout; `GET` on a
//! daemon's operations endpoint.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `ferrofabric <command> --config FILE`.
pub(crate) struct Proc {
    pub child: Child,
    pub lines: std::sync::mpsc::Receiver<String>,
}

/// Starts `ferrofabric <command> --config <config>` with warnings-only logging.
pub(crate) fn spawn(command: &str, config: &Path) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
        .arg(command)
        .arg("--config")
        .arg(config)
        .env("FERROFABRIC_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    Proc { child, lines }
}

/// Waits up to `timeout` for the daemon's `<command> ready:` line and returns the values of `fields` in it
/// (`name=value` words), in order.
pub(crate) fn ready<const N: usize>(p: &Proc, command: &str, timeout: Duration, fields: [&str; N]) -> [String; N] {
    let line = p.lines.recv_timeout(timeout).unwrap_or_else(|_| panic!("{command} did not become ready"));
    assert!(line.starts_with(&format!("{command} ready:")), "{line}");
    fields.map(|name| line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{name}="))).unwrap().to_string())
}

/// `GET http://{addr}{path}` (an operations endpoint: `/metrics`, `/healthz`) within 5 s: the status and the body,
/// `None` when there is no answer.
pub(crate) fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent.get(format!("http://{addr}{path}")).call().ok()?;
    let body = response.body_mut().read_to_string().ok()?;
    Some((response.status().as_u16(), body))
}
