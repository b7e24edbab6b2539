//! Client connections to the endorsers and orderers a gateway calls, dialled once and shared by all requests (a
//! tonic channel multiplexes them and reconnects by itself after a failure).

use std::collections::HashMap;
use std::time::Duration;

use ferrofabric_comm::{pem_cert_der, ClientTls, ConnectOptions};
use tokio::sync::Mutex;
use tonic::transport::Channel;

/// Open connections by address.
pub(crate) struct Connections {
    options: ConnectOptions,
    open: Mutex<HashMap<String, Channel>>,
}

impl Connections {
    /// Connections made with `tls` (none: plain text), each dial bounded by `dial_timeout`.
    pub(crate) fn new(tls: Option<ClientTls>, dial_timeout: Duration) -> Connections {
        let options = ConnectOptions { tls, connect_timeout: Some(dial_timeout), ..ConnectOptions::default() };
        Connections { options, open: Mutex::new(HashMap::new()) }
    }

    /// SHA-256 of the DER of the TLS client certificate these connections present; empty without one (what a
    /// discovery request's `AuthInfo.client_tls_cert_hash` holds).
    pub(crate) fn client_cert_hash(&self) -> bytes::Bytes {
        use sha2::Digest as _;
        let cert = self.options.tls.as_ref().and_then(|t| t.identity.as_ref()).and_then(|(c, _)| pem_cert_der(c));
        cert.map(|der| bytes::Bytes::copy_from_slice(&sha2::Sha256::digest(der))).unwrap_or_default()
    }

    /// The connection to `address` (`host:port`), dialled now if there is none.
    ///
    /// Errors: the dial failed (the message says why).
    pub(crate) async fn get(&self, address: &str) -> Result<Channel, String> {
        if let Some(c) = self.open.lock().await.get(address) {
            return Ok(c.clone());
        }
        let channel = ferrofabric_comm::connect_with(address, &self.options)
            .await
            .map_err(|e| format!("failed to create new connection: {e:#}"))?;
        self.open.lock().await.insert(address.to_owned(), channel.clone());
        Ok(channel)
    }
}
