//! A user's chaincode deployed to a node by Fabric's own flow ([`deploy_chaincode`]), as `peer lifecycle chaincode
//! install`, `approveformyorg` and `commit` do it.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use ferrofabric_endorser::create_proposal;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::lifecycle::{
    chaincode_source, ApproveChaincodeDefinitionForMyOrgArgs, ChaincodeSource, CommitChaincodeDefinitionArgs,
    InstallChaincodeArgs, InstallChaincodeResult,
};
use prost::Message;

use crate::client::{require_valid, NetworkClient};
use crate::layout::PEER_MSPIDS;

/// How long each ordered lifecycle step may take to commit.
const STEP: Duration = Duration::from_secs(60);

/// Admin of peer organisation `org` (0 = Org1) from a crypto directory in cryptogen's layout.
fn admin(crypto: &Path, org: usize) -> anyhow::Result<SigningIdentity> {
    let n = org + 1;
    let msp = crypto.join(format!("peerOrganizations/org{n}.example.com/users/Admin@org{n}.example.com/msp"));
    SigningIdentity::from_msp_dir(PEER_MSPIDS[org], &msp).with_context(|| format!("loading {}", msp.display()))
}

/// What [`deploy_chaincode`] defines: version 1.0, sequence 1, and these.
#[derive(Debug, Clone, Copy)]
pub struct ChaincodeDefinition<'a> {
    /// The chaincode's name.
    pub name: &'a str,
    /// Its endorsement policy as a signature policy (`--signature-policy`, e.g. `OR('Org1MSP.member',
    /// 'Org2MSP.member')`); `None`: the channel's default (`/Channel/Application/Endorsement`).
    pub policy: Option<&'a str>,
    /// `--init-required`: the first invocation must be its initialisation (`--isInit`).
    pub init_required: bool,
}

/// Deploys chaincode `definition.name` from the install `package` (for instance `ferrofabric_chaincode_support::ccaas_package`)
/// and answers its package ID: each organisation's admin installs it on its organisation's peer (`_lifecycle`
/// InstallChaincode, channel-less, as `peer lifecycle chaincode install` sends it), approves the definition (version
/// 1.0, sequence 1, the definition's policy and init flag) for that package, then Org1's admin commits it endorsed by both peers. Each ordered step must commit VALID within 60 s. The crypto directory `crypto` holds the admins'
/// MSPs (cryptogen's layout, as `NodeInfo::crypto`).
///
/// Errors: an admin's MSP cannot be read, a peer refuses the install (Fabric's message in the error), the peers
/// answer different package IDs, the policy does not parse, or a lifecycle transaction is refused or not VALID in time.
pub async fn deploy_chaincode(
    client: &NetworkClient,
    crypto: &Path,
    definition: &ChaincodeDefinition<'_>,
    package: &[u8],
) -> anyhow::Result<String> {
    let ChaincodeDefinition { name, policy, init_required } = *definition;
    let validation_parameter =
        policy.map(crate::chaincode_definitions::validation_parameter).transpose()?.unwrap_or_default();
    let admins = [admin(crypto, 0)?, admin(crypto, 1)?];
    let install = InstallChaincodeArgs { chaincode_install_package: Bytes::copy_from_slice(package) }.encode_to_vec();
    let mut package_id: Option<String> = None;
    for (org, admin) in admins.iter().enumerate() {
        let args = [Bytes::from_static(b"InstallChaincode"), Bytes::from(install.clone())];
        let proposal = create_proposal(admin, "", "_lifecycle", &args);
        let answer = client.propose(org, &proposal).await?.response.unwrap_or_default();
        if answer.status != 200 {
            bail!("install on {}'s peer answered {}: {}", PEER_MSPIDS[org], answer.status, answer.message);
        }
        let id = InstallChaincodeResult::decode(answer.payload).context("InstallChaincodeResult")?.package_id;
        match &package_id {
            Some(first) if *first != id => bail!("the peers installed one package as {first} and {id}"),
            _ => package_id = Some(id),
        }
    }
    let package_id = package_id.unwrap_or_default();

    // Each step waits until every peer committed it: the next one is endorsed by both.
    let mut events = Vec::new();
    for (org, admin) in admins.iter().enumerate() {
        events.push(client.commit_events(org, admin).await?);
    }
    let approve = ApproveChaincodeDefinitionForMyOrgArgs {
        sequence: 1,
        name: name.into(),
        version: "1.0".into(),
        validation_parameter: validation_parameter.clone(),
        init_required,
        source: Some(ChaincodeSource {
            r#type: Some(chaincode_source::Type::LocalPackage(chaincode_source::Local {
                package_id: package_id.clone(),
            })),
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let mut approvals = Vec::new();
    for (org, admin) in admins.iter().enumerate() {
        let args: [&[u8]; 2] = [b"ApproveChaincodeDefinitionForMyOrg", &approve];
        approvals.push(client.endorsed_tx(admin, "_lifecycle", &args, &[org]).await.context("approving")?);
    }
    let (ids, envelopes): (Vec<String>, Vec<Bytes>) = approvals.into_iter().unzip();
    client.broadcast(envelopes).await?;
    for peer in &mut events {
        require_valid(&peer.wait_for(&ids, STEP).await?).context("approving")?;
    }

    let commit = CommitChaincodeDefinitionArgs {
        sequence: 1,
        name: name.into(),
        version: "1.0".into(),
        validation_parameter,
        init_required,
        ..Default::default()
    }
    .encode_to_vec();
    let args: [&[u8]; 2] = [b"CommitChaincodeDefinition", &commit];
    let (id, envelope) = client.endorsed_tx(&admins[0], "_lifecycle", &args, &[0, 1]).await.context("committing")?;
    client.broadcast(vec![envelope]).await?;
    for peer in &mut events {
        require_valid(&peer.wait_for(std::slice::from_ref(&id), STEP).await?).context("committing")?;
    }
    Ok(package_id)
}
