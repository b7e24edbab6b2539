//! What a running node tells its clients: `DIR/node.json` ([`NodeInfo`]) and `DIR/connection-profile.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The contents of `DIR/node.json`: every address is `host:port` (plain gRPC).
///
/// What a running node tells its clients: `DIR/node.json` (Ferrofabric's own summary, read by `ferrofabric bench
/// e2e --node-dir`) and `DIR/connection-profile.json`, a connection profile in the format of Fabric's Node SDK
/// `fabric-network` 2.2 (`client`, `channels`, `organizations`, `orderers`, `peers`; fabric-sdk-node
/// `docs/tutorials/connectionprofile`), so that a Fabric application connects without discovery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Channel ID.
    pub channel: String,
    /// The orderer's AtomicBroadcast address.
    pub orderer: String,
    /// Peer addresses (protos.Endorser, and protos.Deliver unless `events` is set) by MSP ID (`Org1MSP`,
    /// `Org2MSP`).
    pub peers: BTreeMap<String, String>,
    /// Where commit events (protos.Deliver) come from when the peer addresses serve only protos.Endorser: the
    /// committer's own address, when the node runs its components as separate processes (`--processes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<String>,
    /// The block-store service's address.
    pub blockstore: String,
    /// The PEM bundle of the organisations' TLS CAs when the node's listeners speak TLS (`DIR/tls-ca.pem`);
    /// absent: plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_ca: Option<PathBuf>,
    /// Under mutual TLS, the TLS certificate and key a client presents (PEM files: User1 of Org1's TLS pair);
    /// absent: the listeners ask for no client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_client: Option<(PathBuf, PathBuf)>,
    /// The operations listeners (`/metrics`, `/healthz`, `/version`; plain HTTP) by component: `orderer`,
    /// `committer`, `blockstore`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub operations: BTreeMap<String, String>,
    /// The crypto material directory (cryptogen's layout).
    pub crypto: PathBuf,
    /// Path of the connection profile.
    pub connection_profile: PathBuf,
}

/// The TLS of a client of a node whose listeners trust-anchor in the PEM bundle `tls_ca` (`None`: plain text),
/// presenting the certificate and key files `pair` under mutual TLS: servers are checked against the host dialled,
/// which the node's certificates name.
///
/// Errors: a file cannot be read.
pub(crate) fn client_tls(
    tls_ca: Option<&Path>,
    pair: Option<(PathBuf, PathBuf)>,
) -> anyhow::Result<Option<ferrofabric_comm::ClientTls>> {
    let Some(path) = tls_ca else { return Ok(None) };
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let ca_pem = read(path)?;
    let identity = match pair {
        Some((cert, key)) => Some((read(&cert)?, read(&key)?)),
        None => None,
    };
    Ok(Some(ferrofabric_comm::ClientTls { ca_pem, server_name: String::new(), identity }))
}

impl NodeInfo {
    /// The TLS its clients connect with; see [`NodeInfo::tls_ca`].
    ///
    /// Errors: the bundle cannot be read.
    pub fn client_tls(&self) -> anyhow::Result<Option<ferrofabric_comm::ClientTls>> {
        client_tls(self.tls_ca.as_deref(), self.tls_client.clone())
    }

    /// Reads `node.json`.
    ///
    /// Errors: unreadable file or JSON not of this shape.
    pub fn read(path: &Path) -> anyhow::Result<NodeInfo> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// Writes `node.json` (pretty-printed) through a temporary file, so readers never see half a file.
    ///
    /// Errors: file errors.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        write_atomically(path, &serde_json::to_vec_pretty(self)?)
    }

    /// The Fabric connection profile of this node: client organisation Org1, the channel with both peers as
    /// endorsing peers and event sources (or, with `events`, the committer as Org1's event source and the peers
    /// as endorsing peers only), the orderer; `grpcs://` URLs trusting [`NodeInfo::tls_ca`] when the node speaks
    /// TLS, else `grpc://`; no certificate authorities.
    pub fn connection_profile(&self) -> serde_json::Value {
        let endpoint = |addr: &str, name: &str| {
            let mut e = json!({"grpcOptions": {"ssl-target-name-override": name}});
            match &self.tls_ca {
                Some(ca) => {
                    e["url"] = json!(format!("grpcs://{addr}"));
                    e["tlsCACerts"] = json!({"path": ca});
                }
                None => e["url"] = json!(format!("grpc://{addr}")),
            }
            e
        };
        let mut peers = serde_json::Map::new();
        let mut channel_peers = serde_json::Map::new();
        let mut organizations = serde_json::Map::new();
        for (mspid, addr) in &self.peers {
            let org = mspid.strip_suffix("MSP").unwrap_or(mspid);
            let name = format!("peer0.{}.example.com", org.to_lowercase());
            peers.insert(name.clone(), endpoint(addr, &name));
            let events_here = self.events.is_none();
            channel_peers.insert(
                name.clone(),
                json!({"endorsingPeer": true, "chaincodeQuery": true, "ledgerQuery": true, "eventSource": events_here}),
            );
            let mut names = vec![name];
            if let (Some(events), "Org1") = (&self.events, org) {
                let committer = "committer.org1.example.com".to_owned();
                peers.insert(committer.clone(), endpoint(events, &committer));
                channel_peers.insert(
                    committer.clone(),
                    json!({"endorsingPeer": false, "chaincodeQuery": false, "ledgerQuery": true, "eventSource": true}),
                );
                names.push(committer);
            }
            organizations.insert(org.to_owned(), json!({"mspid": mspid, "peers": names}));
        }
        json!({
            "name": "ferrofabric-node",
            "version": "1.0.0",
            "client": {
                "organization": "Org1",
                "connection": {"timeout": {"peer": {"endorser": "300"}, "orderer": "300"}}
            },
            "channels": {
                self.channel.clone(): {"orderers": ["orderer.example.com"], "peers": channel_peers}
            },
            "organizations": organizations,
            "orderers": {
                "orderer.example.com": endpoint(&self.orderer, "orderer.example.com")
            },
            "peers": peers
        })
    }
}

/// Writes `bytes` to `path` through `path.tmp` and a rename.
///
/// Errors: file errors.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn connection_profile_names_both_peers_and_the_orderer() {
        let info = NodeInfo {
            channel: "mychannel".into(),
            orderer: "127.0.0.1:7050".into(),
            peers: [("Org1MSP".to_owned(), "127.0.0.1:7051".to_owned()), ("Org2MSP".into(), "127.0.0.1:9051".into())]
                .into(),
            blockstore: "127.0.0.1:7060".into(),
            events: None,
            tls_ca: None,
            tls_client: None,
            operations: BTreeMap::new(),
            crypto: "/n/crypto".into(),
            connection_profile: "/n/connection-profile.json".into(),
        };
        let p = info.connection_profile();
        assert_eq!(p["client"]["organization"], "Org1");
        assert_eq!(p["organizations"]["Org2"]["mspid"], "Org2MSP");
        assert_eq!(p["peers"]["peer0.org2.example.com"]["url"], "grpc://127.0.0.1:9051");
        assert_eq!(p["channels"]["mychannel"]["peers"]["peer0.org1.example.com"]["eventSource"], true);
        assert_eq!(p["orderers"]["orderer.example.com"]["url"], "grpc://127.0.0.1:7050");
        assert!(p.get("certificateAuthorities").is_none());

        let split = NodeInfo { events: Some("127.0.0.1:7070".into()), ..info };
        let p = split.connection_profile();
        assert_eq!(p["channels"]["mychannel"]["peers"]["peer0.org1.example.com"]["eventSource"], false);
        assert_eq!(p["channels"]["mychannel"]["peers"]["committer.org1.example.com"]["eventSource"], true);
        assert_eq!(p["peers"]["committer.org1.example.com"]["url"], "grpc://127.0.0.1:7070");
        assert_eq!(p["organizations"]["Org1"]["peers"][1], "committer.org1.example.com");

        let tls = NodeInfo { tls_ca: Some("/n/tls-ca.pem".into()), ..split };
        let p = tls.connection_profile();
        assert_eq!(p["peers"]["peer0.org2.example.com"]["url"], "grpcs://127.0.0.1:9051");
        assert_eq!(p["peers"]["peer0.org2.example.com"]["tlsCACerts"]["path"], "/n/tls-ca.pem");
        assert_eq!(p["orderers"]["orderer.example.com"]["url"], "grpcs://127.0.0.1:7050");
    }
}
