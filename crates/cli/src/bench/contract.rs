//! The user's contract a `bench e2e` run deploys with `--chaincode-service` ([`ChaincodeService`]): packaged as
//! `ccaas`, deployed by Fabric's lifecycle, and served by the operator's own command, so the same workload runs on
//! a Node.js, Java or any other chaincode beside the built-in one.

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ferrofabric_node::{ChaincodeDefinition, NetworkClient};

/// How long the command may take to listen (a Java contract compiles and starts a JVM first).
const LISTEN_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest a service lives: it is stopped at the end of the run, and by `timeout` should the bench die.
const LIFETIME: Duration = Duration::from_secs(3600);

/// The contract's endorsement policy: the built-in `transfer` chaincode's, so the workload endorses alike.
const POLICY: &str = "OR('Org1MSP.member', 'Org2MSP.member')";

/// A chaincode service started for one run; dropping it stops the command's whole process group.
pub(super) struct ChaincodeService {
    child: Child,
}

impl ChaincodeService {
    /// Starts `command` (run by `sh -c`, its output appended to `log`) as the chaincode service of chaincode `name`
    /// and deploys it: a `ccaas` package labelled `<name>_1.0` naming a free local port, whose address and package
    /// ID the command finds in `CHAINCODE_SERVER_ADDRESS`, `CORE_CHAINCODE_ID_NAME` and `CHAINCODE_ID` (the
    /// variables Fabric's Java, Node.js and Python shims read in server mode); once it listens, the package is
    /// installed, approved and committed with `client` as the admins of `crypto`, under the built-in `transfer`
    /// chaincode's policy (any one organisation endorses).
    ///
    /// Errors: the command cannot start, exits or does not listen within 300 s (the log's tail in the error), or
    /// the deployment fails.
    pub(super) async fn deploy(
        command: &str,
        client: &NetworkClient,
        crypto: &Path,
        name: &str,
        log: &Path,
    ) -> anyhow::Result<ChaincodeService> {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).context("a free port")?.port();
        let address = format!("127.0.0.1:{port}");
        let label = format!("{name}_1.0");
        let package = ferrofabric_chaincode_support::ccaas_package(&label, &address);
        let package_id = ferrofabric_chaincode_support::package_id(&label, &package);
        let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new("timeout")
            .args(["--signal=TERM", "--kill-after=10s", &format!("{}s", LIFETIME.as_secs()), "sh", "-c", command])
            .env("CHAINCODE_SERVER_ADDRESS", &address)
            .env("CORE_CHAINCODE_ID_NAME", &package_id)
            .env("CHAINCODE_ID", &package_id)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting the chaincode service `{command}`"))?;
        let mut service = ChaincodeService { child };
        let definition = ChaincodeDefinition { name, policy: Some(POLICY), init_required: false };
        service.wait_listening(&address, log).await?;
        let deployed = ferrofabric_node::deploy_chaincode(client, crypto, &definition, &package).await?;
        anyhow::ensure!(deployed == package_id, "the peers answered package ID {deployed}, not {package_id}");
        Ok(service)
    }

    async fn wait_listening(&mut self, address: &str, log: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        let tail = || {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        };
        loop {
            if TcpStream::connect(address).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("the chaincode service exited ({status}) before listening on {address}:\n{}", tail());
            }
            if Instant::now() > deadline {
                bail!("the chaincode service did not listen on {address} within {LISTEN_TIMEOUT:?}:\n{}", tail());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for ChaincodeService {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = self.child.wait();
    }
}
