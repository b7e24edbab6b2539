//! The peer side of Fabric's chaincode shim protocol (Fabric's `core/chaincode`): installed chaincode packages
//! ([`PackageStore`]), chaincodes run as a service that the peer dials (`protos.Chaincode/Connect`, packages of
//! type `ccaas`), chaincodes that dial the peer (`protos.ChaincodeSupport/Register`), and the handler that runs a
//! transaction over a chaincode's stream against the endorser's simulation ([`ChaincodeSupport`]).

mod error;
mod handler;
mod package;
mod store;
mod support;

pub use error::ExecuteError;
pub use handler::{ChaincodeInvoker, MAX_RESULT_LIMIT};
pub use package::{ccaas_package, install_package, package_id, ChaincodePackage, Connection, PackageError};
pub use store::{Installed, PackageStore, StoreError};
pub use support::{ChaincodeSupport, RegisterService, ShimStats, Timeouts};
