//! A chaincode install package (gzipped tar: metadata.json, code.tar.gz, connection.json) and a connection.json
//! from arbitrary bytes, as `peer lifecycle chaincode install` hands them to the peer: never a panic.
#![no_main]
use ferrofabric_chaincode_support::{ChaincodePackage, Connection};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(package) = ChaincodePackage::parse(data) {
        let _ = package.connection();
    }
    let _ = Connection::from_json(data);
});
