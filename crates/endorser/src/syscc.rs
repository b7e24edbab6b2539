//! The peer's system chaincodes that answer from the ledger rather than from the world state: `qscc` (Fabric
//! `core/scc/qscc/query.go`: GetChainInfo, GetBlockByNumber, GetBlockByHash, GetTransactionByID, GetBlockByTxID) and
//! `cscc` (`core/scc/cscc/configure.go`: GetChannels, GetChannelConfig, and JoinChain of the channel this peer
//! serves), with Fabric's arguments, ACL resources, payloads and error texts. `peer channel list`, `getinfo` and
//! `join` call them with a proposal that names no channel; `peer chaincode query -n qscc` with one.
//!
//! Neither runs with a transaction simulator (Fabric's `acquireTxSimulator` refuses both), so their responses carry
//! no read-write set and no chaincode interest.

use bytes::Bytes;
use ferrofabric_gateway::Ledger;
use ferrofabric_protos::common::{Block, BlockchainInfo, Envelope};
use ferrofabric_protos::peer::{ChannelInfo, ChannelQueryResponse, ProcessedTransaction, Response};
use prost::Message;

use crate::acl::ProposalAcl;
use crate::gateway::DaemonLedger;

/// `qscc`, the ledger query system chaincode.
pub(crate) const QSCC: &str = "qscc";
/// `cscc`, the configuration system chaincode.
pub(crate) const CSCC: &str = "cscc";

pub(crate) fn success(payload: Vec<u8>) -> Response {
    Response { status: 200, message: String::new(), payload: Bytes::from(payload) }
}

pub(crate) fn error(message: String) -> Response {
    Response { status: 500, message, payload: Bytes::new() }
}

/// What a system chaincode of this module needs: the channel this peer serves, its committed blocks (`None`: no
/// block can be read), and the proposal's ACL.
pub(crate) struct LedgerQuery<'a> {
    pub channel: &'a str,
    pub ledger: Option<&'a DaemonLedger>,
    pub acl: &'a ProposalAcl<'a>,
}

impl LedgerQuery<'_> {
    /// Invokes `name` (qscc or cscc) with `args` (function name first).
    pub(crate) async fn invoke(&self, name: &str, args: &[Bytes]) -> Response {
        match name {
            QSCC => self.qscc(args).await,
            _ => self.cscc(args),
        }
    }

    fn ledger(&self) -> Result<&DaemonLedger, Response> {
        self.ledger.ok_or_else(|| error("this peer has no readable block store".to_owned()))
    }

    /// Fabric's `LedgerQuerier.Invoke`.
    async fn qscc(&self, args: &[Bytes]) -> Response {
        if args.len() < 2 {
            return error(format!("Incorrect number of arguments, {}", args.len()));
        }
        let function = String::from_utf8_lossy(&args[0]).into_owned();
        let channel = String::from_utf8_lossy(&args[1]).into_owned();
        if function != "GetChainInfo" && args.len() < 3 {
            return error(format!("missing 3rd argument for {function}"));
        }
        if channel != self.channel {
            return error(format!("Invalid chain ID, {channel}"));
        }
        if let Err(e) = ferrofabric_chaincode::Acl::check(self.acl, &format!("qscc/{function}")) {
            return error(format!("access denied for [{function}][{channel}]: [{e}]"));
        }
        let ledger = match self.ledger() {
            Ok(l) => l,
            Err(r) => return r,
        };
        let result = match function.as_str() {
            "GetChainInfo" => chain_info(ledger).await,
            "GetBlockByNumber" => block_by_number(ledger, &args[2]).await,
            "GetBlockByHash" => block_by_hash(ledger, &args[2]).await,
            "GetTransactionByID" => transaction_by_id(ledger, &args[2]).await,
            "GetBlockByTxID" => block_by_txid(ledger, &args[2]).await,
            _ => Err(format!("Requested function {function} not found.")),
        };
        result.map_or_else(error, success)
    }

    /// Fabric's `PeerConfiger.InvokeNoShim`, for the functions of a peer that serves one channel.
    fn cscc(&self, args: &[Bytes]) -> Response {
        let Some(function) = args.first().map(|f| String::from_utf8_lossy(f).into_owned()) else {
            return error("Incorrect number of arguments, 0".to_owned());
        };
        if function != "GetChannels" && args.len() < 2 {
            return error(format!("Incorrect number of arguments, {}", args.len()));
        }
        let acl = |resource: &str| ferrofabric_chaincode::Acl::check(self.acl, resource);
        match function.as_str() {
            "JoinChain" => self.join_chain(&args[1]),
            "GetChannelConfig" => {
                let channel = String::from_utf8_lossy(&args[1]).into_owned();
                if channel.is_empty() {
                    return error("empty channel name provided".to_owned());
                }
                if channel != self.channel {
                    return error(format!(
                        "access denied for [{function}][{channel}]: Failed to get policy manager for channel [{channel}]"
                    ));
                }
                if let Err(e) = acl("cscc/GetChannelConfig") {
                    return error(format!("access denied for [{function}][{channel}]: {e}"));
                }
                match self.acl.config {
                    Some(config) => success(config.config().encode_to_vec()),
                    None => error(format!("access denied for [{function}][{channel}]: no channel configuration")),
                }
            }
            "GetChannels" => {
                if let Err(e) = acl("cscc/GetChannels") {
                    return error(format!("access denied for [{function}]: {e}"));
                }
                let channels = vec![ChannelInfo { channel_id: self.channel.to_owned() }];
                success(ChannelQueryResponse { channels }.encode_to_vec())
            }
            _ => error(format!("Requested function {function} not found.")),
        }
    }

    /// JoinChain with a config block: this peer already holds its one channel, so joining that channel again is
    /// Fabric's "already exists"; another channel cannot be joined by this peer.
    fn join_chain(&self, raw: &Bytes) -> Response {
        let (channel, _) = match join_request(raw, self.acl) {
            Ok(r) => r,
            Err(response) => return response,
        };
        if channel == self.channel {
            return error(format!(
                "cannot create ledger from genesis block: ledger [{channel}] already exists with state [ACTIVE]"
            ));
        }
        error(format!("cannot join channel [{channel}]: this peer serves channel [{}] only", self.channel))
    }
}

/// The checks of Fabric's `cscc` JoinChain before the peer creates the channel: the argument is a block holding a
/// channel configuration, and the creator passes the `cscc/JoinChain` ACL (the local MSP's Admins). Returns the
/// channel ID and the block; the error is the response Fabric gives.
pub(crate) fn join_request(raw: &Bytes, acl: &ProposalAcl<'_>) -> Result<(String, Block), Response> {
    if raw.is_empty() {
        return Err(error("Cannot join the channel <nil> configuration block provided".to_owned()));
    }
    let block =
        Block::decode(raw.clone()).map_err(|e| error(format!("Failed to reconstruct the genesis block, {e}")))?;
    let Some(config) = ferrofabric_protoutil::sole_config_envelope(&block)
        .and_then(|env| ferrofabric_channelconfig::ChannelConfig::from_envelope(&env).ok())
    else {
        return Err(error(
            "\"JoinChain\" request failed to extract channel id from the block due to [the block holds no channel \
             configuration]"
                .to_owned(),
        ));
    };
    let channel = config.channel_id().to_owned();
    if let Err(e) = ferrofabric_chaincode::Acl::check(acl, "cscc/JoinChain") {
        return Err(error(format!("access denied for [JoinChain][{channel}]: [{e}]")));
    }
    Ok((channel, block))
}

/// GetChainInfo: `BlockchainInfo{height, currentBlockHash, previousBlockHash}` of the committed chain.
async fn chain_info(ledger: &DaemonLedger) -> Result<Vec<u8>, String> {
    let height = ledger.height();
    let mut info = BlockchainInfo { height, ..BlockchainInfo::default() };
    if height > 0 {
        let header = ledger
            .header(height - 1)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("block {} is not readable", height - 1))?;
        info.current_block_hash = Bytes::copy_from_slice(&ferrofabric_protoutil::block_header_hash(&header));
        info.previous_block_hash = header.previous_hash;
    }
    Ok(info.encode_to_vec())
}

/// GetBlockByNumber: the committed block (`u64::MAX`: the newest, as Fabric's block store reads it).
async fn block_by_number(ledger: &DaemonLedger, arg: &[u8]) -> Result<Vec<u8>, String> {
    let text = String::from_utf8_lossy(arg);
    let number: u64 = text.parse().map_err(|_| {
        format!("Failed to parse block number with error strconv.ParseUint: parsing \"{text}\": invalid syntax")
    })?;
    let number = if number == u64::MAX { ledger.height().saturating_sub(1) } else { number };
    match ledger.block(number).await? {
        Some(block) => Ok(block.to_vec()),
        None => Err(format!("Failed to get block number {number}, error no such block number [{number}] in index")),
    }
}

/// GetBlockByHash: the committed block whose header hashes to the raw bytes given.
async fn block_by_hash(ledger: &DaemonLedger, hash: &[u8]) -> Result<Vec<u8>, String> {
    match ledger.block_by_hash(hash).await.map_err(|e| e.to_string())? {
        Some(block) => Ok(block.to_vec()),
        None => Err(format!(
            "Failed to get block hash {}, error no such block hash [{}] in index",
            String::from_utf8_lossy(hash),
            hex::encode(hash)
        )),
    }
}

/// The committed block holding `txid` and the transaction's index in it.
async fn locate(ledger: &DaemonLedger, txid: &str) -> Result<Option<(Block, usize)>, String> {
    let Some((number, index)) = ledger.tx_location(txid).await? else { return Ok(None) };
    let raw = ledger.block(number).await?.ok_or_else(|| format!("block {number} is not readable"))?;
    Ok(Some((Block::decode(raw).map_err(|e| format!("block {number}: {e}"))?, index as usize)))
}

/// GetTransactionByID: `ProcessedTransaction{envelope, validation code}`.
async fn transaction_by_id(ledger: &DaemonLedger, arg: &[u8]) -> Result<Vec<u8>, String> {
    let txid = String::from_utf8_lossy(arg).into_owned();
    let not_found =
        || format!("Failed to get transaction with id {txid}, error no such transaction ID [{txid}] in index");
    let (block, index) = locate(ledger, &txid).await?.ok_or_else(not_found)?;
    let raw = block.data.as_ref().and_then(|d| d.data.get(index)).cloned().ok_or_else(not_found)?;
    let envelope = Envelope::decode(raw).map_err(|e| format!("transaction {txid}: {e}"))?;
    let filter = block.metadata.as_ref().and_then(|m| m.metadata.get(2)).cloned().unwrap_or_default();
    let code = filter.get(index).copied().map_or(0, i32::from);
    Ok(ProcessedTransaction { transaction_envelope: Some(envelope), validation_code: code }.encode_to_vec())
}

/// GetBlockByTxID: the committed block holding the transaction.
async fn block_by_txid(ledger: &DaemonLedger, arg: &[u8]) -> Result<Vec<u8>, String> {
    let txid = String::from_utf8_lossy(arg).into_owned();
    match ledger.tx_location(&txid).await? {
        Some((number, _)) => {
            ledger.block(number).await?.map(|b| b.to_vec()).ok_or_else(|| format!("block {number} is not readable"))
        }
        None => Err(format!("Failed to get block for txID {txid}, error no such transaction ID [{txid}] in index")),
    }
}
