//! etcdraft consenter-set changes (Fabric `orderer/consensus/etcdraft/membership.go`
//! `ComputeMembershipChanges`, and the check of `consenter.go` `ValidateConsensusMetadata`).
//!
//! A consenter is known by its client TLS certificate, as in Fabric. Between two configurations at most one
//! consenter may be added, one removed, or one replaced by a consenter with another client certificate (a
//! certificate rotation: the replacement keeps the Raft ID). A new consenter gets
//! `BlockMetadata.next_consenter_id`, which then grows by one; IDs are never reused.

use std::collections::BTreeMap;

use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::etcdraft::{BlockMetadata, ConfigMetadata, Consenter};
use prost::Message;

/// The Raft configuration change a consenter-set change needs (Fabric's `raftpb.ConfChange`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RaftConfChange {
    /// Add the voter with this Raft ID (`ConfChangeAddNode`).
    AddNode(u64),
    /// Remove the voter with this Raft ID (`ConfChangeRemoveNode`).
    RemoveNode(u64),
}

/// What a new consenter list changes (Fabric `MembershipChanges`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MembershipChanges {
    /// The Raft metadata after the change: `consenter_ids` in the order of the new consenter list,
    /// `next_consenter_id` advanced past an added consenter; `raft_index` unchanged.
    pub(crate) new_metadata: BlockMetadata,
    /// The new consenters by Raft ID.
    pub(crate) new_consenters: BTreeMap<u64, Consenter>,
    /// Consenters whose client certificate was not in the old set.
    pub(crate) added: Vec<Consenter>,
    /// Old consenters whose client certificate is not in the new set.
    pub(crate) removed: Vec<Consenter>,
    /// The Raft reconfiguration to propose, if any (none for a rotation or no change).
    pub(crate) conf_change: Option<RaftConfChange>,
    /// The Raft ID whose certificate was rotated, if that is the change.
    pub(crate) rotated: Option<u64>,
}

impl MembershipChanges {
    /// True when a consenter was added, removed or rotated.
    pub(crate) fn changed(&self) -> bool {
        !self.added.is_empty() || !self.removed.is_empty()
    }
}

impl std::fmt::Display for MembershipChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "add {} node(s), remove {} node(s)", self.added.len(), self.removed.len())
    }
}

/// The etcdraft consenters of `config`, from its `ConsensusType` metadata, or `None` for other consensus types.
///
/// Errors: [`MembershipError::Metadata`], the metadata does not decode as `etcdraft.ConfigMetadata`.
pub(crate) fn raft_consenters(config: &ChannelConfig) -> Result<Option<Vec<Consenter>>, MembershipError> {
    let Some(orderer) = config.orderer().filter(|o| o.consensus_type() == "etcdraft") else { return Ok(None) };
    let md = ConfigMetadata::decode(orderer.consensus_metadata().clone()).map_err(MembershipError::Metadata)?;
    Ok(Some(md.consenters))
}

/// Fabric's etcdraft `ValidateConsensusMetadata` for a config update of an existing channel: when both
/// configurations are etcdraft, the consenter change must pass [`validate_consenter_change`]. A change of
/// consensus type is not this check's concern.
///
/// Errors: [`MembershipError`].
pub(crate) fn validate_consensus_metadata(
    current: &ChannelConfig,
    next: &ChannelConfig,
) -> Result<(), MembershipError> {
    if let (Some(before), Some(after)) = (raft_consenters(current)?, raft_consenters(next)?) {
        validate_consenter_change(&before, &after)?;
    }
    Ok(())
}

/// Why a consenter-set change is refused; the text is Fabric's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// More than one consenter added or removed at once.
    #[error("update of more than one consenter at a time is not supported, requested changes: {0}")]
    TooManyChanges(String),
    /// The new configuration has no consenter.
    #[error("empty consenter set")]
    Empty,
    /// A TLS certificate (client or server) appears at two consenters (Fabric `MetadataHasDuplication`; the
    /// fields are the certificates as text).
    #[error("duplicate consenter: server cert: {server}, client cert: {client}")]
    Duplicate {
        /// The server certificate of the second consenter.
        server: String,
        /// Its client certificate.
        client: String,
    },
    /// The `ConsensusType` metadata does not decode as `etcdraft.ConfigMetadata`.
    #[error("bad etcdraft consensus metadata: {0}")]
    Metadata(#[source] prost::DecodeError),
}

/// The changes from the consenters `old` (by Raft ID) with Raft metadata `old_metadata` to the consenter
/// list `new` (configuration order), as Fabric's `ComputeMembershipChanges`.
///
/// Errors: [`MembershipError::TooManyChanges`] when more than one consenter would be added or removed (a
/// rotation counts as one change).
pub(crate) fn compute_membership_changes(
    old_metadata: &BlockMetadata,
    old: &BTreeMap<u64, Consenter>,
    new: &[Consenter],
) -> Result<MembershipChanges, MembershipError> {
    let by_cert: BTreeMap<&[u8], u64> = old.iter().map(|(id, c)| (c.client_tls_cert.as_ref(), *id)).collect();
    let mut result = MembershipChanges {
        new_metadata: BlockMetadata { consenter_ids: vec![0; new.len()], ..old_metadata.clone() },
        new_consenters: BTreeMap::new(),
        added: Vec::new(),
        removed: Vec::new(),
        conf_change: None,
        rotated: None,
    };
    let mut added_at = 0;
    for (i, c) in new.iter().enumerate() {
        match by_cert.get(c.client_tls_cert.as_ref()) {
            Some(id) => {
                result.new_metadata.consenter_ids[i] = *id;
                result.new_consenters.insert(*id, c.clone());
            }
            None => {
                added_at = i;
                result.added.push(c.clone());
            }
        }
    }
    let mut removed_id = 0;
    for (id, c) in old {
        if !new.iter().any(|n| n.client_tls_cert == c.client_tls_cert) {
            result.removed.push(c.clone());
            removed_id = *id;
        }
    }
    match (result.added.len(), result.removed.len()) {
        (0, 0) => {}
        (1, 1) => {
            result.rotated = Some(removed_id);
            result.new_metadata.consenter_ids[added_at] = removed_id;
            result.new_consenters.insert(removed_id, result.added[0].clone());
        }
        (1, 0) => {
            let id = result.new_metadata.next_consenter_id;
            result.new_metadata.consenter_ids[added_at] = id;
            result.new_consenters.insert(id, result.added[0].clone());
            result.new_metadata.next_consenter_id += 1;
            result.conf_change = Some(RaftConfChange::AddNode(id));
        }
        (0, 1) => result.conf_change = Some(RaftConfChange::RemoveNode(removed_id)),
        _ => return Err(MembershipError::TooManyChanges(result.to_string())),
    }
    Ok(result)
}

/// The Raft metadata of a channel whose ledger records none yet (its genesis block): consenter `i` has
/// Raft ID `i + 1` and the next ID is `n + 1` (Fabric `ReadBlockMetadata`).
pub(crate) fn initial_raft_metadata(consenters: usize) -> BlockMetadata {
    let n = consenters as u64;
    BlockMetadata { consenter_ids: (1..=n).collect(), next_consenter_id: n + 1, raft_index: 0 }
}

/// Checks that the consenter list `new` may follow `old` in a config update (Fabric's
/// `ValidateConsensusMetadata` for an existing channel): not empty, no certificate at two consenters, and at
/// most one consenter added, removed or rotated.
///
/// Errors: [`MembershipError`].
pub(crate) fn validate_consenter_change(
    old: &[Consenter],
    new: &[Consenter],
) -> Result<MembershipChanges, MembershipError> {
    if new.is_empty() {
        return Err(MembershipError::Empty);
    }
    let mut seen: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    for c in new {
        let (server, client) = (c.server_tls_cert.as_ref(), c.client_tls_cert.as_ref());
        if seen.contains(server) || seen.contains(client) {
            return Err(MembershipError::Duplicate {
                server: String::from_utf8_lossy(server).into_owned(),
                client: String::from_utf8_lossy(client).into_owned(),
            });
        }
        seen.insert(server);
        seen.insert(client);
    }
    let metadata = initial_raft_metadata(old.len());
    let by_id = metadata.consenter_ids.iter().copied().zip(old.iter().cloned()).collect();
    compute_membership_changes(&metadata, &by_id, new)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn consenter(name: &str) -> Consenter {
        Consenter {
            host: format!("{name}.example.com"),
            port: 7050,
            client_tls_cert: Bytes::from(format!("client-{name}")),
            server_tls_cert: Bytes::from(format!("server-{name}")),
        }
    }

    fn three() -> (BlockMetadata, BTreeMap<u64, Consenter>) {
        let md = initial_raft_metadata(3);
        let map = [(1, consenter("a")), (2, consenter("b")), (3, consenter("c"))].into_iter().collect();
        (md, map)
    }

    /// Adding a consenter gives it `next_consenter_id` (then incremented) and asks for an AddNode; removing one
    /// asks for a RemoveNode and keeps `next_consenter_id`; a new client certificate at one consenter is a
    /// rotation that keeps its ID; nothing changed is no change.
    #[test]
    fn one_consenter_added_removed_or_rotated_is_accepted_with_fabric_ids() {
        let (md, old) = three();
        let added =
            compute_membership_changes(&md, &old, &[consenter("a"), consenter("b"), consenter("c"), consenter("d")])
                .unwrap();
        assert_eq!(
            (added.new_metadata.consenter_ids.clone(), added.new_metadata.next_consenter_id),
            (vec![1, 2, 3, 4], 5)
        );
        assert_eq!(added.conf_change, Some(RaftConfChange::AddNode(4)));

        let removed = compute_membership_changes(&md, &old, &[consenter("a"), consenter("c")]).unwrap();
        assert_eq!(
            (removed.new_metadata.consenter_ids.clone(), removed.new_metadata.next_consenter_id),
            (vec![1, 3], 4)
        );
        assert_eq!(removed.conf_change, Some(RaftConfChange::RemoveNode(2)));
        assert!(!removed.new_consenters.contains_key(&2));

        let mut b2 = consenter("b");
        b2.client_tls_cert = Bytes::from_static(b"client-b-rotated");
        let rotated = compute_membership_changes(&md, &old, &[consenter("a"), b2.clone(), consenter("c")]).unwrap();
        assert_eq!((rotated.rotated, rotated.conf_change), (Some(2), None));
        assert_eq!(rotated.new_metadata.consenter_ids, vec![1, 2, 3]);
        assert_eq!(rotated.new_consenters[&2], b2);

        let same = compute_membership_changes(&md, &old, &[consenter("c"), consenter("a"), consenter("b")]).unwrap();
        assert!(!same.changed());
        assert_eq!(same.new_metadata.consenter_ids, vec![3, 1, 2]);
    }

    /// Two consenters added, two removed, or two added while two are removed: refused with Fabric's message;
    /// an empty set and a consenter listed twice are refused too.
    #[test]
    fn two_consenter_changes_at_once_are_refused() {
        let old = [consenter("a"), consenter("b"), consenter("c")];
        let e = validate_consenter_change(
            &old,
            &[consenter("a"), consenter("b"), consenter("c"), consenter("d"), consenter("e")],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "update of more than one consenter at a time is not supported, requested changes: add 2 node(s), remove 0 node(s)"
        );
        let e = validate_consenter_change(&old, &[consenter("a")]).unwrap_err();
        assert!(e.to_string().ends_with("add 0 node(s), remove 2 node(s)"), "{e}");
        let e = validate_consenter_change(&old, &[consenter("a"), consenter("d"), consenter("e")]).unwrap_err();
        assert!(e.to_string().ends_with("add 2 node(s), remove 2 node(s)"), "{e}");
        assert_eq!(validate_consenter_change(&old, &[]).unwrap_err(), MembershipError::Empty);
        let e = validate_consenter_change(&old, &[consenter("a"), consenter("b"), consenter("c"), consenter("a")])
            .unwrap_err();
        assert_eq!(e.to_string(), "duplicate consenter: server cert: server-a, client cert: client-a");
        assert!(validate_consenter_change(&old, &[consenter("a"), consenter("b")]).is_ok());
    }
}
