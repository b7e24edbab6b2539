//! A real Apache Kafka 4.x cluster on 127.0.0.1 for the Kafka ordering tests.
//!
//! The broker is the one Fabric's Kafka orderer talked to, run from the pinned Maven Central jars of
//! `tests/kafka/pom.xml` (resolved into `tests/kafka/target/lib` by the `mvn` line of `scripts/test`). Every node is
//! a combined KRaft broker and controller (`process.roles=broker,controller`) with a static controller quorum
//! (`controller.quorum.voters`), so no ZooKeeper and no dynamic-quorum bootstrapping are involved.
//!
//! Brokers are child processes with a bounded lifetime: each JVM runs under `timeout --signal=KILL`, so one leaked by
//! a test process that was killed before [`KafkaCluster`]'s `Drop` ran still dies by itself when the lifetime given
//! to [`KafkaCluster::start`] is over. Each node is a process group of its own, which a terminal's Ctrl-C does not
//! reach either: an interrupted test run leaves its brokers to that bound too.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The environment variable naming the directory of Kafka's jars, instead of `tests/kafka/target/lib`.
pub const LIB_ENV: &str = "FERROFABRIC_KAFKA_LIB";

/// How long a node may take from its launch to serving clients (JVM start, quorum election, broker registration).
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// How long a killed node's client port may stay open after its SIGKILL.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// What `kafka.server.KafkaRaftServer` logs once the node's broker is registered, unfenced and accepting clients.
const READY_MARKER: &str = "Kafka Server started";

/// The broker JVM: a heap enough for test traffic and small enough for three brokers beside the rest of a test run
/// (about 200 MB resident each), the serial collector (no concurrent GC threads competing for few cores), no
/// `hsperfdata` files in /tmp, and only the quick JIT tier: these brokers live for one test or one benchmark run of
/// seconds, during which the optimising compiler would still be compiling Kafka's hot paths on the cores the
/// orderers use (a long-running broker finished that long before); without it, Kafka ordering in `bench orderer`
/// ran 17–26% slower (docs/PERFORMANCE.md).
const BROKER_JVM_FLAGS: &[&str] = &[
    "-Xms128m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
];

/// The storage formatter runs for about a second: a small heap and the quick JIT tier start it faster.
const TOOL_JVM_FLAGS: &[&str] = &["-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData"];

/// Broker logging: log4j2 (through the slf4j binding in the jars) at INFO to standard output, which is the node's
/// log file. Kafka 4 reads the file named by `log4j2.configurationFile`; without one log4j2 prints errors only.
const LOG4J2_PROPERTIES: &str = "\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
";

/// The directory holding Kafka's jars: `$FERROFABRIC_KAFKA_LIB`, else `<workspace>/tests/kafka/target/lib`.
///
/// Nothing is checked here; [`KafkaCluster::start`] fails with instructions when the jars are missing.
pub fn lib_dir() -> PathBuf {
    match std::env::var_os(LIB_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/kafka/target/lib"),
    }
}

/// The JVM class path of the jars in [`lib_dir`] (a `dir/*` wildcard, expanded by `java` itself).
///
/// # Errors
/// `NotFound` when the directory holds no `kafka_2.13` jar, with the `mvn` command that resolves it.
fn classpath() -> io::Result<String> {
    let dir = lib_dir();
    let has_broker = fs::read_dir(&dir)
        .map(|entries| entries.flatten().any(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("kafka_2.13-"))))
        .unwrap_or(false);
    if !has_broker {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "Kafka's jars are missing from {} (set {LIB_ENV} to another directory, or resolve them as \
                 scripts/test does: mvn -q -B -f tests/kafka/pom.xml dependency:copy-dependencies \
                 -DoutputDirectory=target/lib)",
                dir.display()
            ),
        ));
    }
    Ok(format!("{}/*", dir.display()))
}

/// A running Kafka cluster of combined broker/controller nodes on 127.0.0.1.
///
/// Nodes are addressed by index `i` in `0..brokers`; node `i` has Kafka `node.id` `i + 1`, its storage in
/// `dir/node-i/data` and its log (standard output and error, broker logs included) in `dir/node-i.log`. Dropping the
/// cluster SIGKILLs every node.
#[derive(Debug)]
pub struct KafkaCluster {
    classpath: String,
    log4j2: PathBuf,
    deadline: Instant,
    nodes: Vec<Node>,
}

#[derive(Debug)]
struct Node {
    client_port: u16,
    props: PathBuf,
    log: PathBuf,
    /// The `timeout` process running the JVM as its child; it leads the process group the JVM shares.
    process: Option<Child>,
}

impl KafkaCluster {
    /// Starts a cluster of `brokers` nodes under `dir` (created if needed) and waits until every one serves clients.
    ///
    /// Each node gets two free ports on 127.0.0.1, one for clients (`PLAINTEXT`) and one for the controller quorum
    /// (`CONTROLLER`). Replication defaults follow the cluster size: replication factor `min(3, brokers)` for new
    /// topics and Kafka's internal ones, `min.insync.replicas` `min(2, brokers)`; topics are never auto-created.
    /// Storage is formatted with a fresh cluster id, so `dir` should be empty (already formatted node directories
    /// of another cluster make the nodes fail to start).
    ///
    /// `lifetime` bounds how long any node of this cluster may run, counted from now and including restarts: at its
    /// end the node is SIGKILLed even when this value was leaked. Startup takes a few seconds (about 6 s for three
    /// nodes on two cores), up to 90 s before it fails.
    ///
    /// # Errors
    /// `InvalidInput` for zero brokers; `NotFound` when Kafka's jars, `java` or `timeout` are missing; an error
    /// naming the node's log when formatting fails or a node exits or is not ready in time (nodes already started
    /// are killed then); I/O errors writing under `dir`.
    pub fn start(dir: &Path, brokers: usize, lifetime: Duration) -> io::Result<KafkaCluster> {
        if brokers == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a Kafka cluster needs at least one broker"));
        }
        let deadline = Instant::now() + lifetime;
        let classpath = classpath()?;
        fs::create_dir_all(dir)?;
        let log4j2 = dir.join("log4j2.properties");
        fs::write(&log4j2, LOG4J2_PROPERTIES)?;

        let ports = free_ports(2 * brokers)?;
        let (client_ports, controller_ports) = ports.split_at(brokers);
        let voters = controller_ports
            .iter()
            .enumerate()
            .map(|(i, port)| format!("{}@127.0.0.1:{port}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let replication = brokers.min(3);
        let min_isr = brokers.min(2);
        let mut nodes = Vec::with_capacity(brokers);
        for i in 0..brokers {
            let props = dir.join(format!("node-{i}.properties"));
            let config = format!(
                "process.roles=broker,controller\n\
                 node.id={id}\n\
                 controller.quorum.voters={voters}\n\
                 listeners=PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{client}\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 inter.broker.listener.name=PLAINTEXT\n\
                 controller.listener.names=CONTROLLER\n\
                 log.dirs={data}\n\
                 num.partitions=1\n\
                 default.replication.factor={replication}\n\
                 min.insync.replicas={min_isr}\n\
                 auto.create.topics.enable=false\n\
                 offsets.topic.replication.factor={replication}\n\
                 offsets.topic.num.partitions=5\n\
                 transaction.state.log.replication.factor={replication}\n\
                 transaction.state.log.min.isr={min_isr}\n\
                 transaction.state.log.num.partitions=5\n\
                 share.coordinator.state.topic.replication.factor={replication}\n\
                 share.coordinator.state.topic.min.isr={min_isr}\n\
                 group.initial.rebalance.delay.ms=0\n\
                 broker.heartbeat.interval.ms=500\n\
                 broker.session.timeout.ms=4000\n\
                 log.cleaner.dedupe.buffer.size=4194304\n",
                id = i + 1,
                client = client_ports[i],
                controller = controller_ports[i],
                data = dir.join(format!("node-{i}")).join("data").display(),
            );
            // Besides the replication defaults: fewer partitions for Kafka's internal topics (created faster),
            // quicker broker heartbeats and session expiry (a restarted node can only re-register once its previous
            // session has expired), and a 4 MB instead of a 128 MB log-cleaner buffer, which the broker allocates on
            // its heap at startup.
            fs::write(&props, config)?;
            nodes.push(Node {
                client_port: client_ports[i],
                props,
                log: dir.join(format!("node-{i}.log")),
                process: None,
            });
        }
        let mut cluster = KafkaCluster { classpath, log4j2, deadline, nodes };
        cluster.format(&cluster_id())?;
        let mut pending = Vec::with_capacity(brokers);
        for i in 0..brokers {
            pending.push((i, cluster.spawn(i)?));
        }
        cluster.wait_ready(&pending)?;
        Ok(cluster)
    }

    /// The client bootstrap list, `127.0.0.1:port` of every node joined by commas, in node order.
    pub fn bootstrap(&self) -> String {
        self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.client_port)).collect::<Vec<_>>().join(",")
    }

    /// Node `i`'s client (`PLAINTEXT`) address, which Kafka also advertises in its metadata.
    ///
    /// # Panics
    /// When `i` is not below the cluster's broker count.
    pub fn broker_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.nodes[i].client_port))
    }

    /// SIGKILLs node `i` (its JVM, with no chance of a clean shutdown) and waits until its client port is closed.
    ///
    /// Killing a node that is not running does nothing. Its storage stays, for [`KafkaCluster::restart`].
    ///
    /// # Errors
    /// An error when the kill cannot be delivered, or `TimedOut` when the port still accepts connections 10 s later.
    ///
    /// # Panics
    /// When `i` is not below the cluster's broker count.
    pub fn kill(&mut self, i: usize) -> io::Result<()> {
        let node = &mut self.nodes[i];
        let Some(mut process) = node.process.take() else {
            return Ok(());
        };
        kill_node(&mut process)?;
        let addr = self.broker_addr(i);
        let until = Instant::now() + EXIT_TIMEOUT;
        while accepts(addr) {
            if Instant::now() >= until {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("Kafka node {} still accepts connections on {addr} after SIGKILL", i + 1),
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Starts node `i` again, with its storage and ports, and waits until it serves clients (killing it first if it
    /// is running).
    ///
    /// A restarted node rejoins the quorum and re-registers its broker once the controller has expired its previous
    /// session (`broker.session.timeout.ms`, 4 s here), so a restart takes about 5–10 s.
    ///
    /// # Errors
    /// As [`KafkaCluster::kill`]; an error naming the node's log when it exits or is not ready within 90 s; `TimedOut`
    /// when the cluster's lifetime is (nearly) over.
    ///
    /// # Panics
    /// When `i` is not below the cluster's broker count.
    pub fn restart(&mut self, i: usize) -> io::Result<()> {
        self.kill(i)?;
        let offset = self.spawn(i)?;
        self.wait_ready(&[(i, offset)])
    }

    /// Formats every node's storage with cluster id `id` (`kafka.tools.StorageTool format`), all nodes at once.
    fn format(&self, id: &str) -> io::Result<()> {
        let mut tools = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let tool = Command::new("java")
                .args(TOOL_JVM_FLAGS)
                .arg(format!("-Dlog4j2.configurationFile={}", self.log4j2.display()))
                .arg("-cp")
                .arg(&self.classpath)
                .arg("kafka.tools.StorageTool")
                .args(["format", "--ignore-formatted", "--cluster-id", id, "--config"])
                .arg(&node.props)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| spawn_error("java", e))?;
            tools.push(tool);
        }
        for (tool, node) in tools.into_iter().zip(&self.nodes) {
            let out = tool.wait_with_output()?;
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "kafka.tools.StorageTool format of {} failed ({}): {}{}",
                    node.props.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
        }
        Ok(())
    }

    /// Launches node `i`'s JVM, appending to its log; returns the log's length before the launch, where the
    /// readiness marker of this run is searched from.
    fn spawn(&mut self, i: usize) -> io::Result<u64> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        if remaining < Duration::from_secs(1) {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the Kafka cluster's lifetime is over; node {} is not started again", i + 1),
            ));
        }
        let node = &mut self.nodes[i];
        let log = OpenOptions::new().create(true).append(true).open(&node.log)?;
        let offset = log.metadata()?.len();
        // `timeout` runs the JVM as its child and SIGKILLs it on expiry. `--foreground` keeps it from signalling its
        // whole process group, itself included, so it survives to reap the JVM. The group is still a new one
        // (process_group(0)), for `kill_node` to fall back to.
        let process = Command::new("timeout")
            .arg("--foreground")
            .arg("--signal=KILL")
            .arg(format!("{:.3}s", remaining.as_secs_f64()))
            .arg("java")
            .args(BROKER_JVM_FLAGS)
            .arg(format!("-Dlog4j2.configurationFile={}", self.log4j2.display()))
            .arg("-cp")
            .arg(&self.classpath)
            .arg("kafka.Kafka")
            .arg(&node.props)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .map_err(|e| spawn_error("timeout", e))?;
        node.process = Some(process);
        Ok(offset)
    }

    /// Waits until each `(node, log offset)` has logged [`READY_MARKER`] after its offset and accepts connections on
    /// its client port.
    fn wait_ready(&mut self, pending: &[(usize, u64)]) -> io::Result<()> {
        let until = Instant::now() + READY_TIMEOUT;
        let mut pending = pending.to_vec();
        while !pending.is_empty() {
            let mut still = Vec::with_capacity(pending.len());
            for (i, offset) in pending {
                let node = &mut self.nodes[i];
                let exited = match node.process.as_mut() {
                    Some(process) => process.try_wait()?,
                    None => None,
                };
                if let Some(status) = exited {
                    node.process = None;
                    return Err(io::Error::other(format!(
                        "Kafka node {} exited ({status}) before it was ready; its log, {}, ends with:\n{}",
                        i + 1,
                        node.log.display(),
                        tail(&node.log, offset)
                    )));
                }
                let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, node.client_port));
                let ready = log_since(&node.log, offset)?.contains(READY_MARKER) && accepts(addr);
                if !ready {
                    still.push((i, offset));
                }
            }
            pending = still;
            if let Some(&(i, offset)) = pending.first() {
                if Instant::now() >= until {
                    let log = &self.nodes[i].log;
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "Kafka node {} was not ready within {READY_TIMEOUT:?}; its log, {}, ends with:\n{}",
                            i + 1,
                            log.display(),
                            tail(log, offset)
                        ),
                    ));
                }
                thread::sleep(Duration::from_millis(200));
            }
        }
        Ok(())
    }
}

impl Drop for KafkaCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut process) = node.process.take() {
                // Nothing to report from a destructor; the lifetime bound still applies if this fails.
                let _ = kill_node(&mut process);
            }
        }
    }
}

/// SIGKILLs the JVM run by `process` (a `timeout --foreground` wrapper) and reaps the wrapper.
///
/// The JVM is the wrapper's only child: killing it lets the wrapper reap it and exit, so no zombie is left to a
/// reaper that may never come (a container's init often does not reap). Until the wrapper is reaped its children's
/// pids cannot be reused, so the signal cannot reach an unrelated process. Only when the wrapper has not forked the
/// JVM yet is the whole process group (wrapper and, maybe, a JVM just forked) killed instead.
fn kill_node(process: &mut Child) -> io::Result<()> {
    if process.try_wait()?.is_some() {
        return Ok(());
    }
    let pid = process.id();
    let children = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let targets = match children.split_whitespace().collect::<Vec<_>>() {
        jvm if !jvm.is_empty() => jvm.join(" "),
        _ => format!("-{pid}"),
    };
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("kill -s KILL -- {targets}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !status.success() && process.try_wait()?.is_none() {
        // Nothing was killed while the wrapper still runs: kill the whole group, and report it.
        let _ = Command::new("sh").arg("-c").arg(format!("kill -s KILL -- -{pid}")).status();
        let _ = process.wait();
        return Err(io::Error::other(format!("could not SIGKILL the Kafka JVM ({targets}) under timeout pid {pid}")));
    }
    process.wait()?;
    Ok(())
}

/// `count` distinct free TCP ports on 127.0.0.1: all are bound at once (to port 0) before any is released.
fn free_ports(count: usize) -> io::Result<Vec<u16>> {
    let listeners = (0..count).map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0))).collect::<io::Result<Vec<_>>>()?;
    listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect()
}

/// A fresh Kafka cluster id: 16 random bytes in unpadded base64url (22 characters), as `Uuid.randomUuid` makes.
///
/// The first byte's top bit is cleared so the id never starts with `-`, which the tool would read as an option.
fn cluster_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    let mut id = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..=chunk.len() {
            id.push(char::from(ALPHABET[(n >> (18 - 6 * k)) as usize & 63]));
        }
    }
    id
}

/// Whether something accepts TCP connections at `addr` (within one second).
fn accepts(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

/// The text of `log` from byte `offset` on (lossily decoded).
fn log_since(log: &Path, offset: u64) -> io::Result<String> {
    let mut file = File::open(log)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The last 30 lines of `log` from byte `offset` on, for error messages.
fn tail(log: &Path, offset: u64) -> String {
    match log_since(log, offset) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        }
        Err(e) => format!("(unreadable: {e})"),
    }
}

/// An error for a program that could not be started, saying what to install when it is missing.
fn spawn_error(program: &str, e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::NotFound {
        let hint = if program == "java" { "a Java 17+ runtime" } else { "coreutils" };
        io::Error::new(io::ErrorKind::NotFound, format!("`{program}` is not on PATH (install {hint}): {e}"))
    } else {
        io::Error::new(e.kind(), format!("could not start `{program}`: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_22_base64url_characters() {
        for _ in 0..100 {
            let id = cluster_id();
            assert_eq!(id.len(), 22, "{id}");
            assert!(!id.starts_with('-'), "{id}");
            assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{id}");
        }
    }

    /// Runs Kafka's own `kafka-topics` (`org.apache.kafka.tools.TopicCommand`) against the cluster.
    fn topics(cluster: &KafkaCluster, args: &[&str]) -> String {
        let out = Command::new("java")
            .args(TOOL_JVM_FLAGS)
            .arg("-cp")
            .arg(&cluster.classpath)
            .arg("org.apache.kafka.tools.TopicCommand")
            .args(["--bootstrap-server", &cluster.bootstrap()])
            .args(args)
            .output()
            .expect("run TopicCommand");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "TopicCommand {args:?}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        stdout
    }

    #[test]
    fn three_brokers_start_and_survive_one_kill() {
        let tmp = tempfile::tempdir().expect("temporary directory");
        let started = Instant::now();
        let mut cluster = KafkaCluster::start(tmp.path(), 3, Duration::from_secs(120)).expect("start 3 brokers");
        eprintln!("3 Kafka brokers started in {:?} at {}", started.elapsed(), cluster.bootstrap());
        for i in 0..3 {
            assert!(accepts(cluster.broker_addr(i)), "broker {i} does not accept connections");
        }

        topics(&cluster, &["--create", "--topic", "replicated", "--partitions", "1", "--replication-factor", "3"]);
        let described = topics(&cluster, &["--describe", "--topic", "replicated"]);
        assert!(described.contains("ReplicationFactor: 3"), "{described}");
        let replicas = described.lines().find_map(|l| l.split("Replicas: ").nth(1)).expect("a partition line");
        assert_eq!(replicas.split_whitespace().next().map(|r| r.split(',').count()), Some(3), "{described}");

        cluster.kill(1).expect("kill broker 1");
        assert!(!accepts(cluster.broker_addr(1)), "killed broker 1 still accepts connections");
        let restarted = Instant::now();
        cluster.restart(1).expect("restart broker 1");
        eprintln!("Kafka broker restarted in {:?}", restarted.elapsed());
        assert!(accepts(cluster.broker_addr(1)), "restarted broker 1 does not accept connections");
        let described = topics(&cluster, &["--describe", "--topic", "replicated"]);
        assert!(described.contains("ReplicationFactor: 3"), "{described}");
    }
}
