//! Building config updates from two configs, as `configtxlator compute_update` does
//! (Fabric `internal/configtxlator/update/update.go`), and a ready-made anchor peer update.

use std::collections::HashMap;

use bytes::Bytes;
use ferrofabric_protos::common::{Config, ConfigGroup, ConfigPolicy, ConfigUpdate, ConfigValue};
use ferrofabric_protos::peer::{AnchorPeer, AnchorPeers};
use prost::Message;

use crate::error::ConfigTxError;

/// Read set, write set, and whether anything under the group changed.
type GroupUpdate = (ConfigGroup, ConfigGroup, bool);

/// Result of diffing one member map: read-set entries, write-set entries, unchanged entries (version only),
/// and whether members were added or removed.
struct MapUpdate<T> {
    read: HashMap<String, T>,
    write: HashMap<String, T>,
    same: HashMap<String, T>,
    members_changed: bool,
}

impl<T> Default for MapUpdate<T> {
    fn default() -> Self {
        MapUpdate { read: HashMap::new(), write: HashMap::new(), same: HashMap::new(), members_changed: false }
    }
}

/// The minimal `ConfigUpdate` that turns `original` into `updated` (configtxlator `Compute`), with
/// `channel_id` set as `configtxlator compute_update --channel_id` does.
///
/// Per group: a changed value or policy goes into the write set at its version + 1 with the updated
/// mod_policy and content; a new one at version 0. When a group gains or loses members, or its mod_policy
/// changes, the group itself is written at version + 1 (with the updated mod_policy), and its unchanged members
/// appear in both sets at their current version, so the result lists the complete membership. Otherwise the group
/// appears at its current version in both sets, holding only what changed below it. Read sets never contain
/// values or policies, only the versions of groups (and of unchanged members of re-written groups).
///
/// Errors: [`ConfigTxError::Malformed`] if either config lacks its channel group, [`ConfigTxError::NoDifferences`]
/// if the trees are equal in everything the comparison looks at (versions are ignored).
pub fn compute_update(channel_id: &str, original: &Config, updated: &Config) -> Result<ConfigUpdate, ConfigTxError> {
    let original = original
        .channel_group
        .as_ref()
        .ok_or_else(|| ConfigTxError::malformed("original Config.channel_group", "absent"))?;
    let updated = updated
        .channel_group
        .as_ref()
        .ok_or_else(|| ConfigTxError::malformed("updated Config.channel_group", "absent"))?;
    let (read_set, write_set, changed) = group_update(original, updated);
    if !changed {
        return Err(ConfigTxError::NoDifferences);
    }
    Ok(ConfigUpdate {
        channel_id: channel_id.to_owned(),
        read_set: Some(read_set),
        write_set: Some(write_set),
        ..ConfigUpdate::default()
    })
}

/// A config update adding the anchor peer `host:port` to application org `org` (the group name under
/// `/Channel/Application`, e.g. `Org1MSP`), i.e. what `configtxlator compute_update` yields after appending
/// the peer to the org's `AnchorPeers` value (created with mod_policy `Admins` if absent).
///
/// If the org has no `AnchorPeers` yet, the org group gains a member, so the write set holds the org group at
/// version + 1 (its `Admins` mod_policy must then be satisfied) with the new value at version 0; otherwise the
/// write set holds `AnchorPeers` at version + 1 under the org group at its current version. Sign it with the
/// org's admins (see [`crate::config_update_envelope`]).
///
/// Errors: [`ConfigTxError::NotFound`] if the config has no Application group or no such org,
/// [`ConfigTxError::Malformed`] if the existing `AnchorPeers` value does not decode,
/// [`ConfigTxError::NoDifferences`] if the org already lists that anchor peer.
pub fn anchor_peer_update(
    channel_id: &str,
    current: &Config,
    org: &str,
    host: &str,
    port: i32,
) -> Result<ConfigUpdate, ConfigTxError> {
    let mut updated = current.clone();
    let org_group = updated
        .channel_group
        .as_mut()
        .and_then(|root| root.groups.get_mut("Application"))
        .ok_or_else(|| ConfigTxError::NotFound("Application group".into()))?
        .groups
        .get_mut(org)
        .ok_or_else(|| ConfigTxError::NotFound(format!("application org {org}")))?;
    let value = org_group
        .values
        .entry("AnchorPeers".to_owned())
        .or_insert_with(|| ConfigValue { mod_policy: "Admins".into(), ..ConfigValue::default() });
    let mut anchors = AnchorPeers::decode(value.value.clone())
        .map_err(|e| ConfigTxError::malformed(format!("/Channel/Application/{org}/AnchorPeers"), e))?;
    anchors.anchor_peers.push(AnchorPeer { host: host.to_owned(), port });
    // If the peer was listed already, compute_update reports that nothing changed.
    if anchors.anchor_peers[..anchors.anchor_peers.len() - 1].iter().any(|a| a.host == host && a.port == port) {
        return Err(ConfigTxError::NoDifferences);
    }
    value.value = Bytes::from(anchors.encode_to_vec());
    compute_update(channel_id, current, &updated)
}

fn policies_update(
    original: &HashMap<String, ConfigPolicy>,
    updated: &HashMap<String, ConfigPolicy>,
) -> MapUpdate<ConfigPolicy> {
    let mut out = MapUpdate::default();
    for (name, old) in original {
        let Some(new) = updated.get(name) else {
            out.members_changed = true;
            continue;
        };
        if old.mod_policy == new.mod_policy && old.policy == new.policy {
            out.same.insert(name.clone(), ConfigPolicy { version: old.version, ..ConfigPolicy::default() });
        } else {
            out.write.insert(
                name.clone(),
                ConfigPolicy {
                    version: old.version.wrapping_add(1),
                    mod_policy: new.mod_policy.clone(),
                    policy: new.policy.clone(),
                },
            );
        }
    }
    for (name, new) in updated {
        if !original.contains_key(name) {
            out.members_changed = true;
            out.write.insert(
                name.clone(),
                ConfigPolicy { version: 0, mod_policy: new.mod_policy.clone(), policy: new.policy.clone() },
            );
        }
    }
    out
}

fn values_update(
    original: &HashMap<String, ConfigValue>,
    updated: &HashMap<String, ConfigValue>,
) -> MapUpdate<ConfigValue> {
    let mut out = MapUpdate::default();
    for (name, old) in original {
        let Some(new) = updated.get(name) else {
            out.members_changed = true;
            continue;
        };
        if old.mod_policy == new.mod_policy && old.value == new.value {
            out.same.insert(name.clone(), ConfigValue { version: old.version, ..ConfigValue::default() });
        } else {
            out.write.insert(
                name.clone(),
                ConfigValue {
                    version: old.version.wrapping_add(1),
                    mod_policy: new.mod_policy.clone(),
                    value: new.value.clone(),
                },
            );
        }
    }
    for (name, new) in updated {
        if !original.contains_key(name) {
            out.members_changed = true;
            out.write.insert(
                name.clone(),
                ConfigValue { version: 0, mod_policy: new.mod_policy.clone(), value: new.value.clone() },
            );
        }
    }
    out
}

fn groups_update(
    original: &HashMap<String, ConfigGroup>,
    updated: &HashMap<String, ConfigGroup>,
) -> MapUpdate<ConfigGroup> {
    let mut out = MapUpdate::default();
    for (name, old) in original {
        let Some(new) = updated.get(name) else {
            out.members_changed = true;
            continue;
        };
        let (read, write, changed) = group_update(old, new);
        if changed {
            out.read.insert(name.clone(), read);
            out.write.insert(name.clone(), write);
        } else {
            out.same.insert(name.clone(), read);
        }
    }
    for (name, new) in updated {
        if !original.contains_key(name) {
            out.members_changed = true;
            // Everything below a new group is new: diff against an empty group, then start the group at 0.
            let (_, write, _) = group_update(&ConfigGroup::default(), new);
            out.write.insert(name.clone(), ConfigGroup { version: 0, mod_policy: new.mod_policy.clone(), ..write });
        }
    }
    out
}

fn group_update(original: &ConfigGroup, updated: &ConfigGroup) -> GroupUpdate {
    let mut policies = policies_update(&original.policies, &updated.policies);
    let mut values = values_update(&original.values, &updated.values);
    let mut groups = groups_update(&original.groups, &updated.groups);

    let rewrite_group = policies.members_changed
        || values.members_changed
        || groups.members_changed
        || original.mod_policy != updated.mod_policy;
    if !rewrite_group {
        let nothing_below = policies.write.is_empty()
            && values.write.is_empty()
            && groups.write.is_empty()
            && policies.read.is_empty()
            && values.read.is_empty()
            && groups.read.is_empty();
        let version_only = ConfigGroup { version: original.version, ..ConfigGroup::default() };
        if nothing_below {
            return (version_only.clone(), version_only, false);
        }
        let read = ConfigGroup {
            version: original.version,
            policies: policies.read,
            values: values.read,
            groups: groups.read,
            ..ConfigGroup::default()
        };
        let write = ConfigGroup {
            version: original.version,
            policies: policies.write,
            values: values.write,
            groups: groups.write,
            ..ConfigGroup::default()
        };
        return (read, write, true);
    }

    // The group is re-written: list its unchanged members in both sets so the membership is complete.
    for (name, same) in policies.same {
        policies.read.insert(name.clone(), same.clone());
        policies.write.insert(name, same);
    }
    for (name, same) in values.same {
        values.read.insert(name.clone(), same.clone());
        values.write.insert(name, same);
    }
    for (name, same) in groups.same {
        groups.read.insert(name.clone(), same.clone());
        groups.write.insert(name, same);
    }
    let read = ConfigGroup {
        version: original.version,
        policies: policies.read,
        values: values.read,
        groups: groups.read,
        ..ConfigGroup::default()
    };
    let write = ConfigGroup {
        version: original.version.wrapping_add(1),
        policies: policies.write,
        values: values.write,
        groups: groups.write,
        mod_policy: updated.mod_policy.clone(),
    };
    (read, write, true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn value(version: u64, v: &'static [u8]) -> ConfigValue {
        ConfigValue { version, value: Bytes::from_static(v), mod_policy: "Admins".into() }
    }

    fn config() -> Config {
        let mut org = ConfigGroup { version: 4, mod_policy: "Admins".into(), ..Default::default() };
        org.values.insert("MSP".into(), value(2, b"msp"));
        org.values.insert("AnchorPeers".into(), value(1, b""));
        let mut app = ConfigGroup { version: 1, mod_policy: "Admins".into(), ..Default::default() };
        app.groups.insert("Org1MSP".into(), org);
        app.groups
            .insert("Org2MSP".into(), ConfigGroup { version: 0, mod_policy: "Admins".into(), ..Default::default() });
        let mut root = ConfigGroup { version: 0, mod_policy: "Admins".into(), ..Default::default() };
        root.groups.insert("Application".into(), app);
        Config { sequence: 3, channel_group: Some(root) }
    }

    #[test]
    fn changed_value_is_written_at_next_version_under_unchanged_groups() {
        let original = config();
        let mut updated = original.clone();
        let org = updated
            .channel_group
            .as_mut()
            .unwrap()
            .groups
            .get_mut("Application")
            .unwrap()
            .groups
            .get_mut("Org1MSP")
            .unwrap();
        org.values.get_mut("MSP").unwrap().value = Bytes::from_static(b"new");

        let update = compute_update("ch", &original, &updated).unwrap();
        assert_eq!(update.channel_id, "ch");
        let read_org = &update.read_set.as_ref().unwrap().groups["Application"].groups["Org1MSP"];
        assert_eq!(read_org, &ConfigGroup { version: 4, ..Default::default() });
        let write_app = &update.write_set.as_ref().unwrap().groups["Application"];
        assert_eq!(write_app.version, 1);
        assert!(!write_app.groups.contains_key("Org2MSP"), "unchanged siblings are left out");
        let write_org = &write_app.groups["Org1MSP"];
        assert_eq!(write_org.version, 4);
        assert_eq!(write_org.values.len(), 1);
        assert_eq!(write_org.values["MSP"], value(3, b"new"));
    }

    #[test]
    fn removed_member_rewrites_the_group_with_full_membership() {
        let original = config();
        let mut updated = original.clone();
        let org = updated
            .channel_group
            .as_mut()
            .unwrap()
            .groups
            .get_mut("Application")
            .unwrap()
            .groups
            .get_mut("Org1MSP")
            .unwrap();
        org.values.remove("AnchorPeers");

        let update = compute_update("ch", &original, &updated).unwrap();
        let read_org = &update.read_set.as_ref().unwrap().groups["Application"].groups["Org1MSP"];
        let write_org = &update.write_set.as_ref().unwrap().groups["Application"].groups["Org1MSP"];
        assert_eq!(read_org.version, 4);
        assert_eq!(write_org.version, 5);
        assert_eq!(write_org.mod_policy, "Admins");
        assert_eq!(read_org.values["MSP"], ConfigValue { version: 2, ..Default::default() });
        assert_eq!(write_org.values["MSP"], ConfigValue { version: 2, ..Default::default() });
        assert!(!write_org.values.contains_key("AnchorPeers"));
    }

    #[test]
    fn new_group_starts_at_version_zero() {
        let original = config();
        let mut updated = original.clone();
        let mut org3 = ConfigGroup { version: 9, mod_policy: "Admins".into(), ..Default::default() };
        org3.values.insert("MSP".into(), value(7, b"m3"));
        updated
            .channel_group
            .as_mut()
            .unwrap()
            .groups
            .get_mut("Application")
            .unwrap()
            .groups
            .insert("Org3MSP".into(), org3);

        let update = compute_update("ch", &original, &updated).unwrap();
        let write_app = &update.write_set.as_ref().unwrap().groups["Application"];
        assert_eq!(write_app.version, 2, "the Application group gains a member");
        assert_eq!(write_app.groups["Org3MSP"].version, 0);
        assert_eq!(write_app.groups["Org3MSP"].values["MSP"], value(0, b"m3"));
        assert_eq!(write_app.groups["Org2MSP"], ConfigGroup { version: 0, ..Default::default() });
    }

    #[test]
    fn identical_configs_have_no_update() {
        assert_eq!(compute_update("ch", &config(), &config()), Err(ConfigTxError::NoDifferences));
    }
}
