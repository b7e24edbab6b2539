//! The checks a broadcast message goes through before it is ordered (Fabric
//! `orderer/common/msgprocessor`: `standardchannel.go`, `filter.go`, `sizefilter.go`, `expiration.go`,
//! `sigfilter.go`, and `orderer/common/broadcast/broadcast.go` `ClassifyError`).
//!
//! [`inspect`] decodes the envelope down to the channel header (the channel is looked up with it); [`classify`]
//! sorts by header type; [`apply_filters`] runs Fabric's standard channel rule set in Fabric's order:
//! 1. empty payload → BAD_REQUEST `Message was empty`;
//! 2. size `len(payload) + len(signature)` > `BatchSize.AbsoluteMaxBytes` → BAD_REQUEST;
//! 3. the creator's certificate has expired (orderer capability with expiration checks) → BAD_REQUEST;
//! 4. the `/Channel/Writers` policy (`/Channel/Orderer/Writers` in maintenance mode) over the signed data
//!    `{payload, creator, signature}` → FORBIDDEN. The creator's signature is verified by the policy
//!    evaluation itself, through the channel's identity cache.
//!
//! A [`Rejection`] carries the status and an info string saying what was wrong.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_protos::common::{ChannelHeader, Envelope, HeaderType, Payload, SignatureHeader, Status};
use prost::Message;

/// A refused message: the BroadcastResponse status and info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Fabric status code (BAD_REQUEST, FORBIDDEN, SERVICE_UNAVAILABLE, ...).
    pub status: Status,
    /// What was wrong, for the client.
    pub info: String,
}

impl Rejection {
    /// A BAD_REQUEST rejection.
    pub fn bad_request(info: impl Into<String>) -> Self {
        Rejection { status: Status::BadRequest, info: info.into() }
    }
    /// A FORBIDDEN rejection.
    pub fn forbidden(info: impl Into<String>) -> Self {
        Rejection { status: Status::Forbidden, info: info.into() }
    }
    /// A SERVICE_UNAVAILABLE rejection.
    pub fn unavailable(info: impl Into<String>) -> Self {
        Rejection { status: Status::ServiceUnavailable, info: info.into() }
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status.as_str_name(), self.info)
    }
}

impl std::error::Error for Rejection {}

/// A broadcast message decoded as far as the orderer needs: the original bytes (what goes into the block),
/// the envelope, its payload header parts and Fabric's size measure.
#[derive(Debug, Clone)]
pub struct Inspected {
    /// The marshaled Envelope exactly as received.
    pub raw: Bytes,
    /// The decoded envelope (its fields are slices of `raw`).
    pub envelope: Envelope,
    /// The decoded channel header.
    pub channel_header: ChannelHeader,
    /// The raw `Payload.header.signature_header` bytes (decoded only when a filter needs the creator).
    pub signature_header: Bytes,
    /// `len(payload) + len(signature)`: Fabric's `messageSizeBytes`, used by the size filter and the cutter.
    pub size: u32,
}

/// Decodes `raw` as an Envelope and its payload down to the channel header (Fabric
/// `Registrar.BroadcastChannelSupport` → `protoutil.ChannelHeader`).
///
/// Errors (BAD_REQUEST): not an Envelope, payload not a Payload, no header, no channel header, bad channel
/// header.
pub fn inspect(raw: Bytes) -> Result<Inspected, Rejection> {
    let envelope = Envelope::decode(raw.clone())
        .map_err(|e| Rejection::bad_request(format!("could not decode the message as an Envelope: {e}")))?;
    let cannot = |why: String| Rejection::bad_request(format!("could not determine channel ID: {why}"));
    let payload = Payload::decode(envelope.payload.clone()).map_err(|e| cannot(format!("bad payload: {e}")))?;
    let header = payload.header.ok_or_else(|| cannot("header not set".into()))?;
    if header.channel_header.is_empty() {
        return Err(cannot("channel header not set".into()));
    }
    let channel_header = ChannelHeader::decode(header.channel_header.clone())
        .map_err(|e| cannot(format!("error unmarshalling channel header: {e}")))?;
    let size = u32::try_from(envelope.payload.len() + envelope.signature.len()).unwrap_or(u32::MAX);
    Ok(Inspected { raw, envelope, channel_header, signature_header: header.signature_header, size })
}

/// How the orderer treats a message, by channel header type (Fabric `StandardChannel.ClassifyMsg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MsgClass {
    /// Ordered as is (ENDORSER_TRANSACTION, MESSAGE and every other type Fabric does not single out).
    Normal,
    /// CONFIG_UPDATE: turned into a CONFIG transaction by the config update processor.
    ConfigUpdate,
    /// CONFIG: may not be submitted directly.
    Config,
    /// ORDERER_TRANSACTION: system-channel era, no longer supported.
    Unsupported,
}

/// Fabric `StandardChannel.ClassifyMsg`.
pub(crate) fn classify(header_type: i32) -> MsgClass {
    match HeaderType::try_from(header_type) {
        Ok(HeaderType::ConfigUpdate) => MsgClass::ConfigUpdate,
        Ok(HeaderType::Config) => MsgClass::Config,
        Ok(HeaderType::OrdererTransaction) => MsgClass::Unsupported,
        _ => MsgClass::Normal,
    }
}

/// Orderer capabilities that include Fabric's `ExpirationCheck` (V1_1 and later).
const EXPIRATION_CAPABILITIES: [&str; 5] = ["V1_1", "V1_4_2", "V2_0", "V2_5", "V3_0"];

/// Options of the broadcast filters, Fabric's standard channel rule set ([`crate::RegistrarParams::filter_options`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct FilterOptions {
    /// Skip the creator expiry rule (`General.Authentication.NoExpirationChecks`).
    pub no_expiration_checks: bool,
}

/// Fabric's standard channel rule set (see the module docs) against channel configuration `config`.
///
/// Errors: a [`Rejection`] with BAD_REQUEST (empty, too large, expired, unreadable signature header, missing
/// policy) or FORBIDDEN (the Writers policy is not satisfied; the info names the policy and, where it can
/// tell, whether the creator did not deserialize or its signature did not verify).
pub(crate) fn apply_filters(msg: &Inspected, config: &ChannelConfig, options: FilterOptions) -> Result<(), Rejection> {
    if msg.envelope.payload.is_empty() {
        return Err(Rejection::bad_request("Message was empty"));
    }
    let orderer = config.orderer();
    if let Some(oc) = orderer {
        let max = oc.batch_size().absolute_max_bytes;
        if msg.size > max {
            return Err(Rejection::bad_request(format!(
                "message payload is {} bytes and exceeds maximum allowed {max} bytes",
                msg.size
            )));
        }
    }
    let shdr = SignatureHeader::decode(msg.signature_header.clone()).map_err(|e| {
        Rejection::bad_request(format!(
            "could not convert message to signedData: GetSignatureHeaderFromBytes failed, err {e}"
        ))
    })?;
    let msps = config.msp_manager();

    let caps = config.capabilities();
    if !options.no_expiration_checks && EXPIRATION_CAPABILITIES.iter().any(|c| caps.orderer.contains(*c)) {
        if let Ok(id) = msps.deserialize_identity(&shdr.creator) {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
            if id.expires_at() <= now {
                return Err(Rejection::bad_request("broadcast client identity expired"));
            }
        }
    }

    let maintenance = orderer.is_some_and(|oc| oc.consensus_state() == 1);
    let policy_name = if maintenance { "/Channel/Orderer/Writers" } else { "/Channel/Writers" };
    let policy = config
        .policy(policy_name)
        .ok_or_else(|| Rejection::bad_request(format!("could not find policy {policy_name}")))?;
    let set = SignatureSet::new(
        vec![SignedData {
            data: msg.envelope.payload.clone(),
            identity: shdr.creator.clone(),
            signature: msg.envelope.signature.clone(),
        }],
        msps,
    );
    if let Err(e) = policy.evaluate(&set) {
        let why = if set.identity(0).is_none() {
            match msps.deserialize_identity(&shdr.creator) {
                Err(de) => format!("the creator identity could not be deserialized ({de}); "),
                Ok(_) => String::new(),
            }
        } else if !set.is_accepted(0) {
            "the creator's signature over the payload does not verify; ".to_string()
        } else {
            String::new()
        };
        return Err(Rejection::forbidden(format!("{why}{policy_name} not satisfied: {e}: permission denied")));
    }
    Ok(())
}

/// Fabric `ProcessNormalMsg`'s maintenance-mode rule: in maintenance (consensus-type migration), normal
/// transactions are refused with SERVICE_UNAVAILABLE.
///
/// Errors: the SERVICE_UNAVAILABLE rejection.
pub(crate) fn check_not_maintenance(config: &ChannelConfig) -> Result<(), Rejection> {
    if config.orderer().is_some_and(|oc| oc.consensus_state() == 1) {
        return Err(Rejection::unavailable("normal transactions are rejected: maintenance mode"));
    }
    Ok(())
}
