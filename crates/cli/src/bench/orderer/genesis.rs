//! The bench channel's genesis block for each consensus type: etcdraft consenters, the Kafka brokers, BFT
//! consenters with their identities, edited into the test network's genesis block.

use anyhow::anyhow;
use bytes::Bytes;

use super::workset::Workset;

/// The client TLS certificate (PEM) of the single etcdraft consenter named in `genesis`.
pub(crate) fn consenter_certificate(genesis: &Bytes) -> anyhow::Result<Bytes> {
    use ferrofabric_protos::common::Block;
    use prost::Message;
    let block = Block::decode(genesis.clone())?;
    let config = ferrofabric_channelconfig::ChannelConfig::from_config_block(&block)?;
    let metadata = config.orderer().map(|o| o.consensus_metadata().clone()).unwrap_or_default();
    let md = ferrofabric_protos::etcdraft::ConfigMetadata::decode(metadata)?;
    md.consenters.first().map(|c| c.client_tls_cert.clone()).ok_or_else(|| anyhow!("the channel has no consenter"))
}

/// The generated network's genesis block with the etcdraft consenter set replaced by `consenters` and
/// Raft options `options` (BatchSize, BatchTimeout and everything else unchanged; header data hash
/// recomputed). Returns the marshaled block.
///
/// Errors: `genesis` is not a config block of an etcdraft channel.
pub(crate) fn with_raft_consenters(
    genesis: &Bytes,
    consenters: Vec<ferrofabric_protos::etcdraft::Consenter>,
    options: ferrofabric_protos::etcdraft::Options,
) -> anyhow::Result<Bytes> {
    use ferrofabric_protos::etcdraft::ConfigMetadata;
    use prost::Message;
    edit_orderer_group(genesis, |_, ct| {
        let mut md = ConfigMetadata::decode(ct.metadata.clone())?;
        md.consenters = consenters;
        md.options = Some(options);
        ct.metadata = Bytes::from(md.encode_to_vec());
        Ok(())
    })
}

/// The generated network's genesis block turned into a `kafka` channel on `brokers` (`ConsensusType` "kafka"
/// without metadata, a `KafkaBrokers` value; everything else unchanged). Returns the marshaled block.
///
/// Errors: `genesis` is not a config block of an etcdraft channel.
pub(crate) fn with_kafka(genesis: &Bytes, brokers: Vec<String>) -> anyhow::Result<Bytes> {
    use ferrofabric_protos::common::ConfigValue;
    use ferrofabric_protos::orderer::KafkaBrokers;
    use prost::Message;
    edit_orderer_group(genesis, |group, ct| {
        ct.r#type = "kafka".into();
        ct.metadata = Bytes::new();
        let value = Bytes::from(KafkaBrokers { brokers }.encode_to_vec());
        group.values.insert("KafkaBrokers".into(), ConfigValue { version: 0, value, mod_policy: "Admins".into() });
        Ok(())
    })
}

/// `genesis` (an etcdraft channel's config block) with its `/Channel/Orderer` group and `ConsensusType` changed by
/// `edit`; the header's data hash is recomputed. Returns the marshaled block.
pub(crate) fn edit_orderer_group(
    genesis: &Bytes,
    edit: impl FnOnce(
        &mut ferrofabric_protos::common::ConfigGroup,
        &mut ferrofabric_protos::orderer::ConsensusType,
    ) -> anyhow::Result<()>,
) -> anyhow::Result<Bytes> {
    use ferrofabric_protos::common::{Block, ConfigEnvelope, Envelope, Payload};
    use ferrofabric_protos::orderer::ConsensusType;
    use prost::Message;
    let mut block = Block::decode(genesis.clone())?;
    let data = block.data.as_mut().ok_or_else(|| anyhow!("genesis block without data"))?;
    let first = data.data.first_mut().ok_or_else(|| anyhow!("genesis block without envelope"))?;
    let mut env = Envelope::decode(first.clone())?;
    let mut payload = Payload::decode(env.payload.clone())?;
    let mut ce = ConfigEnvelope::decode(payload.data.clone())?;
    let group = ce
        .config
        .as_mut()
        .and_then(|c| c.channel_group.as_mut())
        .and_then(|g| g.groups.get_mut("Orderer"))
        .ok_or_else(|| anyhow!("genesis block without /Channel/Orderer"))?;
    let value = group
        .values
        .get("ConsensusType")
        .ok_or_else(|| anyhow!("genesis block without /Channel/Orderer/ConsensusType"))?;
    let mut ct = ConsensusType::decode(value.value.clone())?;
    anyhow::ensure!(ct.r#type == "etcdraft", "the channel's consensus type is {:?}, not etcdraft", ct.r#type);
    edit(group, &mut ct)?;
    if let Some(v) = group.values.get_mut("ConsensusType") {
        v.value = Bytes::from(ct.encode_to_vec());
    }
    payload.data = Bytes::from(ce.encode_to_vec());
    env.payload = Bytes::from(payload.encode_to_vec());
    *first = Bytes::from(env.encode_to_vec());
    let hash = ferrofabric_protoutil::block_data_hash(&data.data);
    if let Some(h) = block.header.as_mut() {
        h.data_hash = Bytes::copy_from_slice(&hash);
    }
    Ok(Bytes::from(block.encode_to_vec()))
}

/// cryptogen material for `nodes` orderers `orderer{i}.raft.example.com` whose TLS certificates are valid for
/// `127.0.0.1` and `localhost` (server and client use).
pub(crate) fn raft_crypto(nodes: usize) -> anyhow::Result<ferrofabric_cryptogen::Crypto> {
    let yaml = format!(
        "OrdererOrgs:\n  - Name: Orderer\n    Domain: raft.example.com\n    EnableNodeOUs: true\n    Template:\n      \
         Count: {nodes}\n      SANS:\n        - localhost\n        - 127.0.0.1\n"
    );
    let config = ferrofabric_cryptogen::CryptoConfig::from_yaml(&yaml)?;
    Ok(ferrofabric_cryptogen::Crypto::generate(&config, &ferrofabric_cryptogen::GenerateOptions::default())?)
}

/// The BFT channel of the bench: configtxgen's BFT profile over the generated network's Org1 and Org2 (members
/// may write) and the orderer organisation `org` (written under `crypto`), whose nodes are the consenters at
/// `127.0.0.1:ports[i]`, with the generated network's `BatchSize` and `BatchTimeout`. Returns the genesis block.
///
/// Errors: writing the crypto material, or configtxgen refusing the profile.
pub(crate) fn bft_genesis(
    work: &Workset,
    org: &ferrofabric_cryptogen::Org,
    crypto: &std::path::Path,
    ports: &[u16],
) -> anyhow::Result<Bytes> {
    use std::fmt::Write as _;
    let genesis = work.net.genesis_block();
    let config = ferrofabric_channelconfig::ChannelConfig::from_config_block(&prost::Message::decode(genesis)?)?;
    let orderer = config.orderer().ok_or_else(|| anyhow!("the generated channel has no orderer group"))?;
    let (batch, timeout) = (orderer.batch_size(), orderer.batch_timeout());
    org.write(crypto)?;
    let mut consenters = String::new();
    for (i, (member, port)) in org.nodes().iter().zip(ports).enumerate() {
        let home = org.member_dir(crypto, member);
        let _ = writeln!(
            consenters,
            "      - {{ID: {id}, Host: 127.0.0.1, Port: {port}, MSPID: OrdererMSP, Identity: {msp}/signcerts/{cn}-cert.pem, \
             ClientTLSCert: {tls}/server.crt, ServerTLSCert: {tls}/server.crt}}",
            id = i + 1,
            msp = home.join("msp").display(),
            tls = home.join("tls").display(),
            cn = member.common_name(),
        );
    }
    let org_policies = |id: &str| {
        format!(
            "Policies: {{Readers: {{Type: Signature, Rule: \"OR('{id}.member')\"}}, Writers: {{Type: Signature, Rule: \
             \"OR('{id}.member')\"}}, Admins: {{Type: Signature, Rule: \"OR('{id}.admin')\"}}, Endorsement: {{Type: \
             Signature, Rule: \"OR('{id}.member')\"}}}}"
        )
    };
    let meta = |rule: &str| format!("{{Type: ImplicitMeta, Rule: {rule}}}");
    let defaults = format!(
        "Readers: {r}, Writers: {w}, Admins: {a}",
        r = meta("ANY Readers"),
        w = meta("ANY Writers"),
        a = meta("MAJORITY Admins")
    );
    let endpoints: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let yaml = format!(
        "Profiles:\n  Bench:\n    Policies: {{{defaults}}}\n    Capabilities: {{V3_0: true}}\n    Orderer:\n      \
         OrdererType: BFT\n      BatchTimeout: {timeout}ms\n      BatchSize: {{MaxMessageCount: {count}, AbsoluteMaxBytes: \
         {abs}, PreferredMaxBytes: {pref}}}\n      Policies: {{{defaults}, BlockValidation: {bv}}}\n      Capabilities: \
         {{V2_0: true}}\n      ConsenterMapping:\n{consenters}      Organizations:\n      - {{Name: OrdererOrg, ID: \
         OrdererMSP, MSPDir: {omsp}, {opol}, OrdererEndpoints: [{endpoints}]}}\n    Application:\n      Policies: \
         {{{defaults}, LifecycleEndorsement: {end}, Endorsement: {end}}}\n      Capabilities: {{V2_5: true}}\n      \
         Organizations:\n      - {{Name: Org1MSP, ID: Org1MSP, MSPDir: {msp1}, {pol1}}}\n      - {{Name: Org2MSP, ID: \
         Org2MSP, MSPDir: {msp2}, {pol2}}}\n",
        timeout = timeout.as_millis(),
        count = batch.max_message_count,
        abs = batch.absolute_max_bytes,
        pref = batch.preferred_max_bytes,
        bv = meta("ANY Writers"),
        omsp = org.dir(crypto).join("msp").display(),
        opol = org_policies("OrdererMSP"),
        endpoints = endpoints.join(", "),
        end = meta("MAJORITY Endorsement"),
        msp1 = crypto.join("peerOrganizations/org1.example.com/msp").display(),
        pol1 = org_policies("Org1MSP"),
        msp2 = crypto.join("peerOrganizations/org2.example.com/msp").display(),
        pol2 = org_policies("Org2MSP"),
    );
    let profile = ferrofabric_configtxgen::ConfigTx::from_yaml(&yaml, crypto)?.profile("Bench")?;
    let block = ferrofabric_configtxgen::genesis_block(&profile, &work.channel)?;
    Ok(Bytes::from(prost::Message::encode_to_vec(&block)))
}
