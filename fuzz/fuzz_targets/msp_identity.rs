//! Arbitrary SerializedIdentity bytes through the channel's MSPs (deserialize, validate, verify): never a panic.
#![no_main]
use std::sync::OnceLock;

use ferrofabric_channelconfig::ChannelConfig;
use libfuzzer_sys::fuzz_target;

fn config() -> &'static ChannelConfig {
    static C: OnceLock<ChannelConfig> = OnceLock::new();
    C.get_or_init(|| {
        let net = ferrofabric_testkit::Network::generate(7).expect("network");
        let block = <ferrofabric_protos::common::Block as prost::Message>::decode(net.genesis_block()).expect("genesis");
        ChannelConfig::from_config_block(&block).expect("config")
    })
}

fuzz_target!(|data: &[u8]| {
    let msps = config().msp_manager();
    if let Ok(id) = msps.deserialize_identity(data) {
        let _ = id.validate();
        let _ = id.verify(data, data);
    }
});
