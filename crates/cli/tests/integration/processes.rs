//! What the tests that run several daemons share: free ports, waiting for a listener, a command's output, and the
//! lock that keeps the cluster tests apart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a daemon may take to listen.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(60);

/// Ports a test binds by number: the chaincode services that the recorded Fabric packages' `connection.json` name
/// (`recorded_fabric`), which another test running beside it must not be handed.
const BOUND_BY_NUMBER: std::ops::RangeInclusive<u16> = 37171..=37174;

/// A port of 127.0.0.1 that is free now and was not handed out before in this test process: ports are chosen
/// before the processes that bind them start, so without the record two of them (say one orderer's gRPC port
/// and the next one's admin port) could get the same port.
/// Never one of [`BOUND_BY_NUMBER`].
pub(crate) fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if !given.contains(&port) && !BOUND_BY_NUMBER.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Waits until something listens on `addr`; fails with the log `log` of the daemon `what`.
pub(crate) fn wait_listening(addr: &str, what: &str, log: &Path) {
    let deadline = Instant::now() + LISTEN_TIMEOUT;
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on {addr}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `cmd`; its stdout, or its stdout and stderr as the error.
pub(crate) fn output(cmd: &mut Command) -> Result<String, String> {
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => Err(format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))),
        Err(e) => Err(e.to_string()),
    }
}

/// Held by each test that runs a cluster of orderers: two at once would compete for the two cores and race for the
/// free ports each picks.
pub(crate) fn cluster_lock() -> std::sync::MutexGuard<'static, ()> {
    static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts `ferrofabric committer --config config` (operations endpoint off, its log in `log`) and waits for its
/// ready line.
pub(crate) fn start_committer(config: &Path, log: &Path) -> crate::sdk::Running {
    use std::io::{BufRead, BufReader};
    let mut committer = crate::sdk::Running(
        Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
            .args(["committer", "--config"])
            .arg(config)
            .args(["--operations-listen", ""])
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    );
    let ready = BufReader::new(committer.0.stdout.take().unwrap()).lines().next();
    assert!(
        matches!(&ready, Some(Ok(l)) if l.starts_with("committer ready")),
        "committer: {ready:?}\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    committer
}

/// Blocks 0 to `stop` (`None`: the newest) of `channel`, read over Deliver (`api`) from `addr` as `signer`, over
/// TLS trusting the CA bundle `tls_ca` when given; as the bytes the daemon sent. Waits for blocks not there yet.
pub(crate) async fn deliver_blocks(
    addr: &str,
    api: ferrofabric_comm::DeliverApi,
    tls_ca: Option<&Path>,
    channel: &str,
    signer: &ferrofabric_msp::SigningIdentity,
    stop: Option<u64>,
) -> Vec<bytes::Bytes> {
    use ferrofabric_comm::DeliverItem;
    use ferrofabric_protos::orderer::{seek_info::SeekBehavior, SeekInfo};
    use futures::StreamExt;
    let seek = SeekInfo {
        start: Some(ferrofabric_protoutil::seek_specified(0)),
        stop: Some(stop.map_or_else(ferrofabric_protoutil::seek_newest, ferrofabric_protoutil::seek_specified)),
        behavior: SeekBehavior::BlockUntilReady as i32,
        ..SeekInfo::default()
    };
    let env = ferrofabric_comm::seek_envelope(channel, signer.serialized(), |m| signer.sign(m), &seek);
    let tls = tls_ca.map(|ca| ferrofabric_comm::ClientTls {
        ca_pem: std::fs::read(ca).expect("the TLS CA bundle"),
        ..ferrofabric_comm::ClientTls::default()
    });
    let ch = ferrofabric_comm::connect(addr, tls.as_ref()).await.expect("connecting for Deliver");
    let mut stream = ferrofabric_comm::deliver_with(ch, api, futures::stream::iter([env])).await.expect("Deliver");
    let mut blocks = Vec::new();
    loop {
        match tokio::time::timeout(LISTEN_TIMEOUT, stream.next()).await.expect("a Deliver answer within a minute") {
            Some(Ok(DeliverItem::Block(b))) => blocks.push(b),
            Some(Ok(DeliverItem::Status(s))) => {
                assert_eq!(s, ferrofabric_protos::common::Status::Success as i32, "Deliver status from {addr}");
                return blocks;
            }
            other => panic!("Deliver stream from {addr} ended: {other:?}"),
        }
    }
}
