//! Kafka-based ordering on a real Apache Kafka 4 cluster: three brokers in KRaft mode on 127.0.0.1 (replication
//! factor 3, `min.insync.replicas` 2, started from Maven Central's jars by `ferrofabric_testkit::kafka`, shared
//! by the tests of this file) and three `ferrofabric orderer` processes per test on a `kafka` channel made by our
//! configtxgen. Two orderers post payloads aside (only references through the ordered partition), one inline,
//! so every orderer reads both forms. Each test uses its own channel, hence its own topics.
//!
//! * Every orderer writes the same blocks (header and data; each signs its own), each SUCCESS transaction once,
//!   a CONFIG_UPDATE mid-stream becomes a config block (the messages checked before it and consumed after it are
//!   re-validated and posted again by every orderer, and ordered once), and bad records put on the topic by hand (no KafkaMessage, a
//!   reference to a payload that never arrives, one to another transaction's payload, a stale time-to-cut, a
//!   duplicate transaction) are handled alike by all.
//! * An orderer SIGKILLed mid-stream resumes from its ledger's `KafkaMetadata` and catches up; a transaction
//!   acknowledged by an orderer SIGKILLed right after its SUCCESS is still ordered.
//! * A broker SIGKILLed mid-stream does not stop ordering; it rejoins.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_comm::{connect, deliver, seek_envelope, seek_range, DeliverItem};
use ferrofabric_protos::common::{
    Block, ChannelHeader, Envelope, Header, HeaderType, Payload, SignatureHeader, Status,
};
use ferrofabric_protos::orderer::kafka_message::Type;
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_protos::orderer::{
    seek_position, KafkaMessage, KafkaMessageRegular, KafkaMessageTimeToCut, PayloadReference, SeekInfo, SeekNewest,
    SeekPosition,
};
use ferrofabric_testkit::kafka::KafkaCluster;
use futures::StreamExt;
use prost::Message;
use tempfile::TempDir;

use crate::bft_cluster::tx_ids;
use crate::configtxgen_support::{network, CONFIGTX};
use crate::processes::{cluster_lock, free_port, wait_listening};
use crate::sdk::Running;

/// The brokers, started by the first test that needs them and stopped by the last.
static BROKERS: Mutex<Option<(KafkaCluster, TempDir)>> = Mutex::new(None);
/// Tests of this file still to run; the last one stops the brokers.
static REMAINING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(3);

/// The shared three-broker cluster, held for the whole test (the tests of this file run one at a time), with the
/// lock that keeps multi-process cluster tests apart (brokers and orderers would compete for the two cores with
/// a BFT cluster's).
struct Brokers(MutexGuard<'static, Option<(KafkaCluster, TempDir)>>, #[allow(dead_code)] MutexGuard<'static, ()>);

impl Brokers {
    fn get() -> Brokers {
        let cluster = cluster_lock();
        let mut guard = BROKERS.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            let dir = tempfile::tempdir().unwrap();
            let brokers = KafkaCluster::start(dir.path(), 3, Duration::from_secs(900)).unwrap();
            *guard = Some((brokers, dir));
        }
        Brokers(guard, cluster)
    }

    fn cluster(&mut self) -> &mut KafkaCluster {
        &mut self.0.as_mut().unwrap().0
    }
}

impl Drop for Brokers {
    fn drop(&mut self) {
        if REMAINING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            self.0.take();
        }
    }
}

/// One of our orderers.
struct Orderer {
    process: Option<Running>,
    grpc: String,
    config: PathBuf,
    join: PathBuf,
    log: PathBuf,
}

impl Orderer {
    fn start(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
            .args(["orderer", "--config"])
            .arg(&self.config)
            .arg("--join")
            .arg(&self.join)
            .env("FERROFABRIC_LOG", "info,librdkafka=warn,rdkafka=warn,ferrofabric_consensus_kafka=debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.process = Some(Running(child));
        wait_listening(&self.grpc, "our orderer", &self.log);
        // Ready once its chain consumes the partition (topics created, CONNECT posted).
        let started = std::fs::read_to_string(&self.log).unwrap_or_default().matches("kafka chain started").count();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            if log.matches("kafka chain started").count() > started {
                return;
            }
            assert!(Instant::now() < deadline, "the kafka chain did not start within 60 s:\n{log}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.0.kill().unwrap();
            p.0.wait().unwrap();
        }
    }
}

/// A channel `channel` of consensus type `kafka` on the brokers, and three orderers serving it (the third posts
/// payloads inline), started.
struct Net {
    dir: TempDir,
    channel: String,
    orderers: Vec<Orderer>,
}

impl Net {
    fn start(channel: &str, bootstrap: &str) -> Net {
        let (dir, _) = network();
        let brokers: Vec<String> = bootstrap.split(',').map(|b| format!("\"{b}\"")).collect();
        let yaml = CONFIGTX
            .replacen(
                "OrdererType: solo",
                &format!("OrdererType: kafka\n  Kafka:\n    Brokers: [{}]", brokers.join(", ")),
                1,
            )
            .replacen("BatchTimeout: 250ms", "BatchTimeout: 200ms", 1);
        std::fs::write(dir.path().join("configtx.yaml"), yaml).unwrap();
        let config = ferrofabric_configtxgen::ConfigTx::load(&dir.path().join("configtx.yaml")).unwrap();
        let genesis = ferrofabric_configtxgen::genesis_block(&config.profile("Solo").unwrap(), channel).unwrap();
        let join = dir.path().join("genesis.block");
        std::fs::write(&join, genesis.encode_to_vec()).unwrap();
        let msp = dir.path().join("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/msp");
        let mut orderers = Vec::new();
        for i in 0..3 {
            let home = dir.path().join(format!("orderer{i}"));
            std::fs::create_dir_all(&home).unwrap();
            let (port, admin) = (free_port(), free_port());
            let payloads = if i == 2 { "inline" } else { "aside" };
            let yaml = format!(
                "General:\n  ListenAddress: 127.0.0.1\n  ListenPort: {port}\n  LocalMSPDir: {msp}\n  LocalMSPID: OrdererMSP\n\
                 FileLedger:\n  Location: {home}/ledger\nAdmin:\n  ListenAddress: 127.0.0.1:{admin}\n\
                 Operations:\n  ListenAddress: \"\"\nKafka:\n  Payloads: {payloads}\n  Topic:\n    ReplicationFactor: 3\n",
                msp = msp.display(),
                home = home.display(),
            );
            let config = home.join("orderer.yaml");
            std::fs::write(&config, yaml).unwrap();
            orderers.push(Orderer {
                process: None,
                grpc: format!("127.0.0.1:{port}"),
                config,
                join: join.clone(),
                log: home.join("orderer.log"),
            });
        }
        for o in &mut orderers {
            o.start();
        }
        Net { dir, channel: channel.to_owned(), orderers }
    }

    fn msp(&self, org: u8, user: &str) -> PathBuf {
        self.dir
            .path()
            .join(format!("crypto/peerOrganizations/org{org}.example.com/users/{user}@org{org}.example.com/msp"))
    }

    fn identity(&self, org: u8, user: &str) -> ferrofabric_msp::SigningIdentity {
        ferrofabric_msp::SigningIdentity::from_msp_dir(&format!("Org{org}MSP"), &self.msp(org, user)).unwrap()
    }

    /// A bench client broadcasting `txs` endorser transactions of `user` of `org` to orderer `i` (returns once
    /// they are all in blocks there). Each identity makes the same envelopes on every run, so each client of a
    /// test needs another identity.
    fn bench(&self, i: usize, org: u8, user: &str, txs: u32) -> std::process::Child {
        Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
            .args(["bench", "orderer", "--address", &self.orderers[i].grpc, "--channel", &self.channel])
            .args(["--msp-id", &format!("Org{org}MSP"), "--msp-dir"])
            .arg(self.msp(org, user))
            .args(["--txs", &txs.to_string(), "--clients", "2", "--skip-o2-off", "--json"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn height(&self, addr: &str) -> u64 {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let reader = self.identity(1, "Admin");
            let seek = SeekInfo {
                start: Some(SeekPosition { r#type: Some(seek_position::Type::Newest(SeekNewest {})) }),
                stop: Some(SeekPosition { r#type: Some(seek_position::Type::Newest(SeekNewest {})) }),
                behavior: SeekBehavior::BlockUntilReady as i32,
                ..SeekInfo::default()
            };
            let env = seek_envelope(&self.channel, reader.serialized(), |m| reader.sign(m), &seek);
            let Ok(ch) = connect(addr, None).await else { return 0 };
            let Ok(mut stream) = deliver(ch, futures::stream::iter(vec![env]).chain(futures::stream::pending())).await
            else {
                return 0;
            };
            match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
                Ok(Some(Ok(DeliverItem::Block(b)))) => Block::decode(b).unwrap().header.unwrap().number + 1,
                _ => 0,
            }
        })
    }

    fn wait_height(&self, addr: &str, at_least: u64, within: Duration) -> u64 {
        let deadline = Instant::now() + within;
        loop {
            let h = self.height(addr);
            if h >= at_least {
                return h;
            }
            assert!(Instant::now() < deadline, "{addr} reached height {h}, not {at_least}, within {within:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Blocks `0..height` from the orderer at `addr`.
    fn chain(&self, addr: &str, height: u64) -> Vec<Block> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let reader = self.identity(1, "Admin");
            let seek = seek_range(0, Some(height - 1), SeekBehavior::BlockUntilReady);
            let env = seek_envelope(&self.channel, reader.serialized(), |m| reader.sign(m), &seek);
            let ch = connect(addr, None).await.unwrap();
            let mut stream =
                deliver(ch, futures::stream::iter(vec![env]).chain(futures::stream::pending())).await.unwrap();
            let mut blocks = Vec::new();
            loop {
                match tokio::time::timeout(Duration::from_secs(60), stream.next()).await.expect("Deliver timed out") {
                    Some(Ok(DeliverItem::Block(b))) => blocks.push(Block::decode(b).unwrap()),
                    Some(Ok(DeliverItem::Status(s))) => {
                        assert_eq!(s, Status::Success as i32, "Deliver status from {addr}");
                        return blocks;
                    }
                    other => panic!("Deliver stream from {addr} ended: {other:?}"),
                }
            }
        })
    }

    /// Every running orderer reaches the same height and holds the same blocks (header and data); returns how
    /// often each transaction ID occurs and the chain.
    fn same_chain_everywhere(&self) -> (HashMap<String, usize>, Vec<Block>) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let height = loop {
            let heights: Vec<u64> = self.orderers.iter().map(|o| self.height(&o.grpc)).collect();
            if heights.iter().all(|h| *h == heights[0]) {
                // Settled: no block in flight anywhere.
                std::thread::sleep(Duration::from_millis(800));
                if self.orderers.iter().all(|o| self.height(&o.grpc) == heights[0]) {
                    break heights[0];
                }
            }
            assert!(Instant::now() < deadline, "the orderers' heights differ: {heights:?}");
            std::thread::sleep(Duration::from_millis(300));
        };
        let chains: Vec<Vec<Block>> = self.orderers.iter().map(|o| self.chain(&o.grpc, height)).collect();
        let mut seen = HashMap::new();
        for number in 1..height as usize {
            for (c, o) in chains.iter().zip(&self.orderers) {
                assert_eq!(
                    (&c[number].header, &c[number].data),
                    (&chains[0][number].header, &chains[0][number].data),
                    "block {number} at {} differs from {}",
                    o.grpc,
                    self.orderers[0].grpc
                );
            }
            for id in tx_ids(&chains[0][number]) {
                *seen.entry(id).or_insert(0) += 1;
            }
        }
        (seen, chains.into_iter().next().unwrap())
    }

    /// Broadcasts one signed MESSAGE envelope with transaction ID `tx_id` to orderer `i`; returns its status.
    fn broadcast_one(&self, i: usize, tx_id: &str) -> i32 {
        let env = self.message(tx_id);
        let addr = self.orderers[i].grpc.clone();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let ch = connect(&addr, None).await.unwrap();
            let mut r = ferrofabric_comm::broadcast(ch, futures::stream::iter(vec![env])).await.unwrap();
            r.next().await.unwrap().unwrap().status
        })
    }

    /// A MESSAGE envelope of Org2's User1 with transaction ID `tx_id`.
    fn message(&self, tx_id: &str) -> Bytes {
        let user = self.identity(2, "User1");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
        let channel_header = ChannelHeader {
            r#type: HeaderType::Message as i32,
            channel_id: self.channel.clone(),
            tx_id: tx_id.into(),
            timestamp: Some(prost_types::Timestamp { seconds: now.as_secs() as i64, nanos: 0 }),
            ..ChannelHeader::default()
        };
        let signature_header = SignatureHeader { creator: user.serialized().clone(), nonce: Bytes::from_static(b"n") };
        let payload = Payload {
            header: Some(Header {
                channel_header: channel_header.encode_to_vec().into(),
                signature_header: signature_header.encode_to_vec().into(),
            }),
            data: Bytes::from_static(b"opaque"),
        }
        .encode_to_vec();
        let signature = user.sign(&payload);
        Bytes::from(Envelope { payload: payload.into(), signature: signature.into() }.encode_to_vec())
    }
}

fn wait_bench(mut child: std::process::Child, what: &str) {
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{what}: {err}");
}

/// Posts `records` to partition 0 of `topic` as an outsider would (not through an orderer).
fn post_raw(bootstrap: &str, topic: &str, records: &[Vec<u8>]) {
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
    let producer: ThreadedProducer<DefaultProducerContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", bootstrap).set("acks", "all").create().unwrap();
    for r in records {
        producer.send(BaseRecord::<(), _>::to(topic).partition(0).payload(r)).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

fn regular_with(reference: Option<PayloadReference>, payload: Bytes) -> Vec<u8> {
    KafkaMessage {
        r#type: Some(Type::Regular(KafkaMessageRegular {
            payload,
            config_seq: 0,
            class: 1,
            original_offset: 0,
            reference,
            references: Vec::new(),
        })),
    }
    .encode_to_vec()
}

/// Sends a CONFIG_UPDATE adding an anchor peer to Org1 (signed by Org1's admin) to orderer 0; returns once it
/// was answered SUCCESS.
fn config_update(net: &Net) {
    let genesis = Block::decode(std::fs::read(net.dir.path().join("genesis.block")).unwrap().as_slice()).unwrap();
    let current = ferrofabric_channelconfig::ChannelConfig::from_config_block(&genesis).unwrap();
    let admin = net.identity(1, "Admin");
    let update =
        ferrofabric_configtx::anchor_peer_update(&net.channel, current.config(), "Org1MSP", "127.0.0.1", 7051).unwrap();
    let env = ferrofabric_configtx::config_update_envelope(&net.channel, &update, &[&admin], &admin);
    let addr = net.orderers[0].grpc.clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let ch = connect(&addr, None).await.unwrap();
        let stream = futures::stream::iter(vec![Bytes::from(env.encode_to_vec())]);
        let r = ferrofabric_comm::broadcast(ch, stream).await.unwrap().next().await.unwrap().unwrap();
        assert_eq!(r.status, Status::Success as i32, "CONFIG_UPDATE: {}", r.info);
    });
}

fn config_blocks(chain: &[Block]) -> Vec<u64> {
    chain
        .iter()
        .skip(1)
        .filter(|b| ferrofabric_protoutil::sole_config_envelope(b).is_some())
        .map(|b| b.header.as_ref().unwrap().number)
        .collect()
}

#[test]
fn kafka_orderers_write_the_same_blocks_once_per_transaction_across_a_config_update_and_bad_records() {
    let mut brokers = Brokers::get();
    let bootstrap = brokers.cluster().bootstrap();
    let net = Net::start("kafkachannel", &bootstrap);
    // Three clients, one at each orderer (two post payloads aside, one inline).
    let clients = [net.bench(0, 1, "User1", 1500), net.bench(1, 2, "User1", 1500), net.bench(2, 1, "Admin", 1500)];
    // Mid-stream, a CONFIG_UPDATE: messages checked before its block and consumed after it are re-validated and
    // posted again by every orderer, and must still be ordered once.
    net.wait_height(&net.orderers[0].grpc, 3, Duration::from_secs(60));
    config_update(&net);
    // Meanwhile, bad records on the channel's partition itself.
    let replayed = net.message("replayed-message");
    assert_eq!(net.broadcast_one(0, "replayed-message"), Status::Success as i32);
    let bad = vec![
        b"\x00\xffno KafkaMessage at all".to_vec(),
        KafkaMessage { r#type: None }.encode_to_vec(),
        // A payload record that is never written (partition 0, far beyond its end).
        regular_with(
            Some(PayloadReference {
                tx_id: "never-written".into(),
                size: 10,
                partition: 0,
                offset: 1 << 40,
                index: None,
            }),
            Bytes::new(),
        ),
        // Another transaction's payload record (offset 0 of partition 0 holds some other transaction).
        regular_with(
            Some(PayloadReference { tx_id: "not-this-one".into(), size: 10, partition: 0, offset: 0, index: None }),
            Bytes::new(),
        ),
        // A partition the payload topic does not have.
        regular_with(
            Some(PayloadReference { tx_id: "x".into(), size: 10, partition: 999, offset: 0, index: None }),
            Bytes::new(),
        ),
        // Several references in one record, to batch entries of other transactions and past a batch's end.
        KafkaMessage {
            r#type: Some(Type::Regular(KafkaMessageRegular {
                class: 1,
                references: vec![
                    PayloadReference {
                        tx_id: "not-this-one".into(),
                        size: 10,
                        partition: 0,
                        offset: 0,
                        index: Some(0),
                    },
                    PayloadReference { tx_id: "x".into(), size: 10, partition: 0, offset: 0, index: Some(1 << 20) },
                ],
                ..Default::default()
            })),
        }
        .encode_to_vec(),
        // An envelope that does not decode.
        regular_with(None, Bytes::from_static(b"\x0a\xff\xff")),
        // A time-to-cut far ahead.
        KafkaMessage { r#type: Some(Type::TimeToCut(KafkaMessageTimeToCut { block_number: 1 << 30 })) }.encode_to_vec(),
        // The same transaction again (replayed by an outsider): ordered twice, the peers flag the second.
        regular_with(None, replayed),
    ];
    post_raw(&bootstrap, &net.channel, &bad);
    for (i, c) in clients.into_iter().enumerate() {
        wait_bench(c, &format!("client {i}"));
    }
    assert_eq!(net.broadcast_one(1, "after-config"), Status::Success as i32);
    net.wait_height(&net.orderers[2].grpc, 2, Duration::from_secs(30));
    let deadline = Instant::now() + Duration::from_secs(60);
    let (seen, chain) = loop {
        let (seen, chain) = net.same_chain_everywhere();
        if seen.contains_key("after-config") || Instant::now() > deadline {
            break (seen, chain);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(seen.get("after-config"), Some(&1), "the message sent after the config update is ordered once");
    assert_eq!(seen.get("replayed-message"), Some(&2), "the replayed transaction is ordered twice");
    for bad in ["never-written", "not-this-one", "x"] {
        assert!(!seen.contains_key(bad), "{bad} has no payload and must not be ordered");
    }
    let ordinary: Vec<_> = seen.iter().filter(|(id, _)| id.as_str() != "replayed-message").collect();
    assert!(ordinary.iter().all(|(_, n)| **n == 1), "every other transaction once");
    assert!(ordinary.len() > 4500, "every client's 1500 transactions and the lone message are ordered");
    assert_eq!(config_blocks(&chain).len(), 1, "the CONFIG_UPDATE became one config block");
    let reposted: usize = net
        .orderers
        .iter()
        .map(|o| std::fs::read_to_string(&o.log).unwrap_or_default().matches("re-posting a message").count())
        .sum();
    eprintln!("messages re-validated and posted again after the config block: {reposted}");
    assert!(reposted > 0, "messages in flight across the config block were re-validated and posted again");
}

#[test]
fn kafka_orderer_killed_mid_stream_or_after_success_loses_no_transaction() {
    let mut brokers = Brokers::get();
    let bootstrap = brokers.cluster().bootstrap();
    let mut net = Net::start("kafkacrash", &bootstrap);
    // A client at orderer 0 while orderer 1 is SIGKILLed mid-stream and restarted.
    let client = net.bench(0, 1, "User1", 3000);
    net.wait_height(&net.orderers[1].grpc, 4, Duration::from_secs(60));
    net.orderers[1].kill();
    std::thread::sleep(Duration::from_secs(2));
    net.orderers[1].start();
    wait_bench(client, "client at orderer 0");
    // A transaction acknowledged by orderer 2, which dies right after answering SUCCESS.
    assert_eq!(net.broadcast_one(2, "acknowledged-then-killed"), Status::Success as i32);
    net.orderers[2].kill();
    std::thread::sleep(Duration::from_secs(1));
    net.orderers[2].start();
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let (seen, _) = net.same_chain_everywhere();
        if seen.contains_key("acknowledged-then-killed") || Instant::now() > deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(seen.get("acknowledged-then-killed"), Some(&1), "the acknowledged transaction is ordered once");
    assert!(seen.values().all(|n| *n == 1), "each transaction once");
    assert_eq!(seen.len(), 3000 + 1);
    // The restarted orderer resumed after the last record its ledger included, not from the partition's start.
    let log = std::fs::read_to_string(&net.orderers[1].log).unwrap();
    let resumed: Vec<i64> = log
        .lines()
        .filter(|l| l.contains("kafka chain started"))
        .filter_map(|l| l.split("resume_after=").nth(1)?.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(resumed.len(), 2, "orderer 1 started twice:\n{log}");
    assert!(resumed[0] == -1 && resumed[1] > 0, "orderer 1 resumed from its ledger's KafkaMetadata: {resumed:?}");
}

#[test]
fn kafka_ordering_goes_on_while_a_broker_is_down() {
    let mut brokers = Brokers::get();
    let bootstrap = brokers.cluster().bootstrap();
    let net = Net::start("kafkabroker", &bootstrap);
    let client = net.bench(1, 2, "User1", 3000);
    net.wait_height(&net.orderers[1].grpc, 4, Duration::from_secs(60));
    brokers.cluster().kill(1).unwrap();
    wait_bench(client, "client while a broker is down");
    brokers.cluster().restart(1).unwrap();
    let client = net.bench(0, 1, "User1", 500);
    wait_bench(client, "client after the broker rejoined");
    let (seen, _) = net.same_chain_everywhere();
    assert!(seen.values().all(|n| *n == 1), "each transaction once");
    assert_eq!(seen.len(), 3500);
}
