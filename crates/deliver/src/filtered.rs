//! What the peer's `DeliverFiltered` sends (Fabric `core/peer/deliverevents.go`, `toFilteredBlock`), and
//! the `HEADER_WITH_SIG` form of a block (config blocks, by `ferrofabric_protoutil::is_config_block`, stay whole).

use bytes::Bytes;
use ferrofabric_protos::common::{Block, BlockMetadataIndex, ChannelHeader, Envelope, HeaderType, Payload};
use ferrofabric_protos::peer::{
    filtered_transaction, ChaincodeAction, ChaincodeActionPayload, ChaincodeEvent, FilteredBlock,
    FilteredChaincodeAction, FilteredTransaction, FilteredTransactionActions, ProposalResponsePayload, Transaction,
    TxValidationCode,
};
use ferrofabric_protoutil::is_config_block;
use prost::Message;

use crate::error::DeliverError;

/// The block without its data unless it is a config block (Fabric's `HEADER_WITH_SIG` content type); bytes that
/// do not decode as a block are returned as they are.
pub(crate) fn strip_data(bytes: Bytes) -> Bytes {
    match Block::decode(bytes.clone()) {
        Ok(block) if !is_config_block(&block) => {
            Bytes::from(Block { header: block.header, data: None, metadata: block.metadata }.encode_to_vec())
        }
        _ => bytes,
    }
}

/// The `FilteredBlock` of a committed block (Fabric `toFilteredBlock`): per transaction its txid, header type and
/// validation code from TRANSACTIONS_FILTER, and for endorser transactions the chaincode events of its actions
/// (txid, chaincode and event name; the payload is left out). Envelopes that do not decode or have no header are
/// skipped, as Fabric does.
///
/// Difference from Fabric: an endorser transaction whose transaction, action payload, proposal response payload,
/// chaincode action or event does not decode is reported with its validation code (the validator marked it
/// invalid) and no chaincode actions. Fabric 2.5 answers `BAD_REQUEST` for the whole request instead, so one such
/// transaction in the ledger (the fixture ledger's block 19 has one) stops every filtered-event listener for good.
///
/// Errors: the block does not decode; a payload or channel header does not decode (Fabric answers `BAD_REQUEST`).
pub fn filtered_block(raw: &Bytes) -> Result<FilteredBlock, DeliverError> {
    let block = Block::decode(raw.clone()).map_err(DeliverError::Block)?;
    let number = block.header.as_ref().map(|h| h.number).unwrap_or(0);
    let filter = block
        .metadata
        .as_ref()
        .and_then(|m| m.metadata.get(BlockMetadataIndex::TransactionsFilter as usize))
        .cloned()
        .unwrap_or_default();
    let mut out = FilteredBlock { number, ..FilteredBlock::default() };
    let envelopes = block.data.map(|d| d.data).unwrap_or_default();
    for (i, raw_env) in envelopes.into_iter().enumerate() {
        let Ok(env) = Envelope::decode(raw_env) else { continue };
        let payload = Payload::decode(env.payload).map_err(|source| DeliverError::TxPayload { index: i, source })?;
        let Some(header) = payload.header else { continue };
        let chdr = ChannelHeader::decode(header.channel_header)
            .map_err(|source| DeliverError::TxChannelHeader { index: i, source })?;
        out.channel_id = chdr.channel_id.clone();
        let code = filter.get(i).map(|c| i32::from(*c)).unwrap_or(TxValidationCode::NotValidated as i32);
        let mut ftx =
            FilteredTransaction { txid: chdr.tx_id.clone(), r#type: chdr.r#type, tx_validation_code: code, data: None };
        if chdr.r#type == HeaderType::EndorserTransaction as i32 {
            let actions = match chaincode_events(payload.data) {
                Ok(a) => a,
                Err(e) => {
                    // Fabric fails the whole request here; we keep the stream usable (see `filtered_block`).
                    tracing::debug!(number, tx = i, error = %e, "transaction without readable actions");
                    FilteredTransactionActions::default()
                }
            };
            ftx.data = Some(filtered_transaction::Data::TransactionActions(actions));
        }
        out.filtered_transactions.push(ftx);
    }
    Ok(out)
}

/// The chaincode events of an endorser transaction's actions, without payloads.
fn chaincode_events(data: Bytes) -> Result<FilteredTransactionActions, String> {
    let tx = Transaction::decode(data).map_err(|e| format!("transaction: {e}"))?;
    let mut actions = FilteredTransactionActions::default();
    for action in tx.actions {
        let cap =
            ChaincodeActionPayload::decode(action.payload).map_err(|e| format!("chaincode action payload: {e}"))?;
        let Some(endorsed) = cap.action else { continue };
        let prp = ProposalResponsePayload::decode(endorsed.proposal_response_payload)
            .map_err(|e| format!("proposal response payload: {e}"))?;
        let cca = ChaincodeAction::decode(prp.extension).map_err(|e| format!("chaincode action: {e}"))?;
        let event = ChaincodeEvent::decode(cca.events).map_err(|e| format!("chaincode event: {e}"))?;
        if !event.chaincode_id.is_empty() {
            actions.chaincode_actions.push(FilteredChaincodeAction {
                chaincode_event: Some(ChaincodeEvent {
                    tx_id: event.tx_id,
                    chaincode_id: event.chaincode_id,
                    event_name: event.event_name,
                    payload: Bytes::new(),
                }),
            });
        }
    }
    Ok(actions)
}
