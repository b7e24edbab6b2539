//! gRPC errors as Fabric's gateway returns them (`internal/pkg/gateway/apiutils.go`): a code, a message, and one
//! `gateway.ErrorDetail` (address, MSP ID, message) per endorser or orderer that failed, carried in the status
//! details as a `google.rpc.Status`, which is where the client SDKs read them.

use bytes::Bytes;
use ferrofabric_protos::gateway::ErrorDetail;
use prost::Message;
use tonic::{Code, Status};

/// A status with `code`, `message` and `details`.
pub(crate) fn rpc_error(code: Code, message: impl Into<String>, details: &[ErrorDetail]) -> Status {
    let message = message.into();
    if details.is_empty() {
        return Status::new(code, message);
    }
    let details = details
        .iter()
        .map(|d| prost_types::Any {
            type_url: "type.googleapis.com/gateway.ErrorDetail".into(),
            value: d.encode_to_vec(),
        })
        .collect();
    let status = tonic_types::Status { code: code as i32, message: message.clone(), details };
    Status::with_details(code, message, Bytes::from(status.encode_to_vec()))
}

/// The detail of one failed endorser or orderer.
pub(crate) fn detail(address: &str, mspid: &str, message: impl Into<String>) -> ErrorDetail {
    ErrorDetail { address: address.to_owned(), msp_id: mspid.to_owned(), message: message.into() }
}

/// A gRPC error as a Go client prints it (`rpc error: code = Unavailable desc = ...`), which is how Fabric's
/// gateway words the failures of the peers and orderers it called.
pub(crate) fn go_error_text(status: &Status) -> String {
    let code = match status.code() {
        Code::Ok => "OK".to_owned(),
        Code::Cancelled => "Canceled".to_owned(),
        other => format!("{other:?}"),
    };
    format!("rpc error: code = {code} desc = {}", status.message())
}
