//! The built-in chaincodes' definitions through `_lifecycle` ([`define_chaincodes`]), as a Fabric admin makes
//! them: each organisation approves, then one commits; [`Barrier`] holds each step until every endorser has
//! applied the one before.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::lifecycle::{
    chaincode_source, ApproveChaincodeDefinitionForMyOrgArgs, ChaincodeSource, CheckCommitReadinessArgs,
    CheckCommitReadinessResult, CommitChaincodeDefinitionArgs, QueryChaincodeDefinitionArgs,
};
use ferrofabric_protos::peer::{application_policy, ApplicationPolicy};
use prost::Message;

use crate::client::{require_valid, CommitEvents, NetworkClient};
use crate::layout::{Layout, PEER_MSPIDS};
use crate::profile::NodeInfo;
use crate::running_node::RunningNode;

/// The chaincodes a node defines, with their endorsement policies (policy DSL of configtxgen).
pub(crate) const CHAINCODES: [(&str, &str); 3] = [
    ("smallbank", "AND('Org1MSP.member', 'Org2MSP.member')"),
    ("transfer", "OR('Org1MSP.member', 'Org2MSP.member')"),
    ("kv", "OR('Org1MSP.member', 'Org2MSP.member')"),
];

/// How long a `_lifecycle` step may take before the node gives up.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// The `validation_parameter` of a definition: an `ApplicationPolicy` holding the signature policy `rule`.
pub(crate) fn validation_parameter(rule: &str) -> anyhow::Result<Bytes> {
    let envelope = ferrofabric_configtxgen::signature_policy(rule)?;
    let policy = ApplicationPolicy { r#type: Some(application_policy::Type::SignaturePolicy(envelope)) };
    Ok(Bytes::from(policy.encode_to_vec()))
}

/// How [`define_chaincodes`] knows that every endorser has applied the blocks of a step before the next.
pub(crate) enum Barrier<'a> {
    /// The endorsers' replicas are in this process: wait for their heights.
    Replicas(&'a RunningNode),
    /// The endorsers are other processes: ask them, as a Fabric admin does (`CheckCommitReadiness` after the
    /// approvals, `QueryChaincodeDefinition` after the commit), until they answer so.
    Queries,
}

/// The steps of a definition [`Barrier`] holds the next one after.
#[derive(Clone, Copy)]
enum Step {
    /// Every organisation has approved.
    Approved,
    /// The definition is committed.
    Committed,
}

impl Barrier<'_> {
    /// Waits until every endorser has applied `step` for each chaincode of `missing`.
    async fn after(
        &self,
        step: Step,
        client: &NetworkClient,
        admin: &SigningIdentity,
        missing: &[(&str, Bytes)],
    ) -> anyhow::Result<()> {
        if let Barrier::Replicas(node) = self {
            return node.wait_for_replicas(STEP_TIMEOUT).await;
        }
        for (name, vp) in missing {
            let waited = match step {
                Step::Approved => {
                    let check = CheckCommitReadinessArgs {
                        sequence: 1,
                        name: (*name).into(),
                        version: "1.0".into(),
                        validation_parameter: vp.clone(),
                        ..Default::default()
                    }
                    .encode_to_vec();
                    poll_peers(client, admin, &[b"CheckCommitReadiness", &check], |payload| {
                        CheckCommitReadinessResult::decode(payload)
                            .map(|r| r.approvals.len() == PEER_MSPIDS.len() && r.approvals.values().all(|a| *a))
                            .unwrap_or(false)
                    })
                    .await
                }
                Step::Committed => {
                    let q = QueryChaincodeDefinitionArgs { name: (*name).into() }.encode_to_vec();
                    poll_peers(client, admin, &[b"QueryChaincodeDefinition", &q], |_| true).await
                }
            };
            waited.with_context(|| format!("waiting for every peer to apply {name}'s definition step"))?;
        }
        Ok(())
    }
}

/// Sends the `_lifecycle` query `args` to every peer until each answers 200 with a payload `ok` accepts.
///
/// Errors: not so within [`STEP_TIMEOUT`].
async fn poll_peers(
    client: &NetworkClient,
    admin: &SigningIdentity,
    args: &[&[u8]],
    ok: impl Fn(&[u8]) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    for peer in 0..client.peer_count() {
        loop {
            let p = client.proposal(admin, "_lifecycle", args);
            let answer = client.propose(peer, &p).await.ok().and_then(|r| r.response);
            if answer.as_ref().is_some_and(|r| r.status == 200 && ok(&r.payload)) {
                break;
            }
            if Instant::now() > deadline {
                bail!("peer {peer} did not catch up within {STEP_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Defines every chaincode of [`CHAINCODES`] not yet defined, the Fabric way: each organisation's admin approves
/// the definition (endorsed by its own peer), then Org1's admin commits it (endorsed by both peers); each step is
/// ordered and must commit VALID, and `barrier` holds the next step until every endorser has applied it.
pub(crate) async fn define_chaincodes(
    info: &NodeInfo,
    layout: &Layout,
    progress: &dyn Fn(&str),
    barrier: Barrier<'_>,
) -> anyhow::Result<()> {
    if let Barrier::Replicas(node) = &barrier {
        node.wait_for_replicas(STEP_TIMEOUT).await?;
    }
    let client = NetworkClient::connect(info).await?;
    let admins = [0, 1].map(|org| SigningIdentity::from_msp_dir(PEER_MSPIDS[org], &layout.user_msp(org, "Admin")));
    let [admin1, admin2] = admins;
    let (admin1, admin2) = (admin1?, admin2?);
    let mut missing = Vec::new();
    for (name, rule) in CHAINCODES {
        let q = QueryChaincodeDefinitionArgs { name: name.into() }.encode_to_vec();
        let p = client.proposal(&admin1, "_lifecycle", &[b"QueryChaincodeDefinition", &q]);
        let r = client.propose(0, &p).await?;
        if r.response.as_ref().map(|x| x.status) != Some(200) {
            missing.push((name, validation_parameter(rule)?));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|(n, _)| *n).collect();
    progress(&format!("defining chaincodes {} through _lifecycle", names.join(", ")));
    let mut events = client.commit_events(0, &admin1).await?;

    let mut approvals = Vec::new();
    for (name, vp) in &missing {
        let approve = ApproveChaincodeDefinitionForMyOrgArgs {
            sequence: 1,
            name: (*name).into(),
            version: "1.0".into(),
            validation_parameter: vp.clone(),
            source: Some(ChaincodeSource {
                r#type: Some(chaincode_source::Type::LocalPackage(chaincode_source::Local {
                    package_id: format!("{name}_1.0:builtin"),
                })),
            }),
            ..Default::default()
        }
        .encode_to_vec();
        for (org, admin) in [(0, &admin1), (1, &admin2)] {
            approvals.push(
                client
                    .endorsed_tx(admin, "_lifecycle", &[b"ApproveChaincodeDefinitionForMyOrg", &approve], &[org])
                    .await?,
            );
        }
    }
    submit_and_wait(&client, &mut events, approvals).await.context("approving")?;
    barrier.after(Step::Approved, &client, &admin1, &missing).await?;

    let mut commits = Vec::new();
    for (name, vp) in &missing {
        let commit = CommitChaincodeDefinitionArgs {
            sequence: 1,
            name: (*name).into(),
            version: "1.0".into(),
            validation_parameter: vp.clone(),
            ..Default::default()
        }
        .encode_to_vec();
        commits
            .push(client.endorsed_tx(&admin1, "_lifecycle", &[b"CommitChaincodeDefinition", &commit], &[0, 1]).await?);
    }
    submit_and_wait(&client, &mut events, commits).await.context("committing the definitions")?;
    barrier.after(Step::Committed, &client, &admin1, &missing).await?;
    Ok(())
}

async fn submit_and_wait(
    client: &NetworkClient,
    events: &mut CommitEvents,
    txs: Vec<(String, Bytes)>,
) -> anyhow::Result<()> {
    let (ids, envs): (Vec<String>, Vec<Bytes>) = txs.into_iter().unzip();
    client.broadcast(envs).await?;
    require_valid(&events.wait_for(&ids, STEP_TIMEOUT).await?)
}
