//! Shared helpers of the orderer integration tests: fixtures, starting a node on loopback, an HTTP client for
//! the participation API, Deliver helpers.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_comm::{deliver, seek_envelope, seek_range, DeliverItem};
use ferrofabric_orderer::{start, OrdererConfig, Plugins, RunningOrderer};
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_testkit::fabric_fixture;
use futures::StreamExt;

pub(crate) fn fixture_orderer_msp() -> PathBuf {
    fabric_fixture("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/msp")
}

pub(crate) fn fixture_user1_msp() -> PathBuf {
    fabric_fixture("crypto/peerOrganizations/org1.example.com/users/User1@org1.example.com/msp")
}

/// A node configuration on 127.0.0.1 with ephemeral ports, ledger under `data`.
pub(crate) fn loopback_config(data: &Path, msp_dir: &Path, msp_id: &str) -> OrdererConfig {
    let mut c = OrdererConfig::defaults();
    c.general.listen_address = "127.0.0.1".into();
    c.general.listen_port = 0;
    c.admin.listen_address = "127.0.0.1:0".into();
    c.operations.listen_address = "127.0.0.1:0".into();
    c.general.local_msp_dir = Some(msp_dir.to_path_buf());
    c.general.local_msp_id = Some(msp_id.into());
    c.file_ledger.location = Some(data.to_path_buf());
    c.ferrofabric.sync_every_block = false;
    c
}

pub(crate) async fn start_node(config: OrdererConfig) -> RunningOrderer {
    tokio::time::timeout(Duration::from_secs(30), start(config, solo_plugins())).await.unwrap().unwrap()
}

/// A parsed HTTP response.
#[derive(Debug)]
pub(crate) struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

/// One HTTP request to `addr` (within 20 s, redirects not followed, any status answered); reads the whole
/// response.
pub(crate) async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> HttpResponse {
    let mut request = ureq::http::Request::builder().method(method).uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        request = request.header(*k, v);
    }
    let request = request.body(body.to_vec()).unwrap();
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(20)))
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        let mut response = agent.run(request).unwrap_or_else(|e| panic!("HTTP request failed: {e}"));
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let body = response.body_mut().read_to_vec().unwrap();
        HttpResponse { status, headers, body }
    })
    .await
    .unwrap()
}

/// A multipart/form-data body with one file part `field` holding `content` (as osnadmin sends it).
pub(crate) fn multipart(field: &str, content: &[u8]) -> (String, Vec<u8>) {
    let boundary = "ferrofabric-test-boundary-7MA4YWxkTrZu0gW";
    let mut body = Vec::new();
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{field}.block\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// POSTs a join request with `block` over the participation API.
pub(crate) async fn join(admin: SocketAddr, block: &[u8]) -> HttpResponse {
    let (ct, body) = multipart("config-block", block);
    http(admin, "POST", "/participation/v1/channels", &[("Content-Type", ct)], &body).await
}

/// Reads blocks `start..=stop` of `channel_id` over Deliver with `behavior`, signed by `sign`; returns the raw
/// block bytes and the closing status (within 20 s).
pub(crate) async fn deliver_range(
    ch: tonic::transport::Channel,
    channel_id: &str,
    creator: &Bytes,
    sign: impl FnOnce(&[u8]) -> Vec<u8>,
    start: u64,
    stop: u64,
    behavior: SeekBehavior,
) -> (Vec<Bytes>, Option<i32>) {
    let seek = seek_range(start, Some(stop), behavior);
    let env = seek_envelope(channel_id, creator, sign, &seek);
    let fut = async {
        let mut stream = deliver(ch, futures::stream::iter(vec![env]).chain(futures::stream::pending())).await.unwrap();
        let mut blocks = Vec::new();
        while let Some(item) = stream.next().await {
            match item.unwrap() {
                DeliverItem::Block(b) => blocks.push(b),
                DeliverItem::Status(s) => return (blocks, Some(s)),
            }
        }
        (blocks, None)
    };
    tokio::time::timeout(Duration::from_secs(20), fut).await.expect("deliver timed out")
}

/// `genesis` with the orderer's BatchSize and BatchTimeout replaced (header data hash recomputed; the block is
/// re-marshaled, so it is no longer byte-identical to the input).
pub(crate) fn with_batch(genesis: &[u8], max_count: u32, absolute: u32, preferred: u32, timeout: &str) -> Bytes {
    use ferrofabric_protos::common::{Block, ConfigEnvelope, Envelope, Payload};
    use ferrofabric_protos::orderer::{BatchSize, BatchTimeout};
    use prost::Message;
    let mut block = Block::decode(genesis).unwrap();
    let data = block.data.as_mut().unwrap();
    let mut env = Envelope::decode(data.data[0].clone()).unwrap();
    let mut payload = Payload::decode(env.payload.clone()).unwrap();
    let mut ce = ConfigEnvelope::decode(payload.data.clone()).unwrap();
    let orderer = ce.config.as_mut().unwrap().channel_group.as_mut().unwrap().groups.get_mut("Orderer").unwrap();
    orderer.values.get_mut("BatchSize").unwrap().value = Bytes::from(
        BatchSize { max_message_count: max_count, absolute_max_bytes: absolute, preferred_max_bytes: preferred }
            .encode_to_vec(),
    );
    orderer.values.get_mut("BatchTimeout").unwrap().value =
        Bytes::from(BatchTimeout { timeout: timeout.to_string() }.encode_to_vec());
    payload.data = Bytes::from(ce.encode_to_vec());
    env.payload = Bytes::from(payload.encode_to_vec());
    data.data[0] = Bytes::from(env.encode_to_vec());
    let hash = ferrofabric_protoutil::block_data_hash(&data.data);
    block.header.as_mut().unwrap().data_hash = Bytes::copy_from_slice(&hash);
    Bytes::from(block.encode_to_vec())
}

/// Transaction IDs of the envelopes of a marshaled block, in order.
pub(crate) fn block_tx_ids(raw: &Bytes) -> Vec<String> {
    use ferrofabric_protos::common::{Block, ChannelHeader, Envelope, Payload};
    use prost::Message;
    let block = Block::decode(raw.clone()).unwrap();
    block
        .data
        .unwrap()
        .data
        .into_iter()
        .map(|e| {
            let env = Envelope::decode(e).unwrap();
            let p = Payload::decode(env.payload).unwrap();
            ChannelHeader::decode(p.header.unwrap().channel_header).unwrap().tx_id
        })
        .collect()
}

/// Paths of a testkit network written with `write_msp_dirs` under `dir`.
pub(crate) struct NetDirs {
    pub orderer_msp: PathBuf,
    pub orderer_tls: PathBuf,
}

pub(crate) fn net_dirs(dir: &Path) -> NetDirs {
    let base = dir.join("ordererOrganizations/example.com/orderers/orderer.example.com");
    NetDirs { orderer_msp: base.join("msp"), orderer_tls: base.join("tls") }
}

/// The node's plugins with the solo backend, which also serves the tests' single-consenter etcdraft channels.
pub(crate) fn solo_plugins() -> Plugins {
    let mut plugins = Plugins::default();
    ferrofabric_consensus_solo::register(&mut plugins.registry);
    plugins.registry.register("etcdraft", std::sync::Arc::new(ferrofabric_consensus_solo::SingleRaftNodeFactory));
    plugins
}
