//! The flat view of a config tree that config updates are computed on (Fabric `common/configtx/configmap.go`,
//! `compare.go`): every group, value and policy becomes one entry keyed by its kind and absolute path.
//!
//! A group entry keeps only its own version, mod_policy and the *names* of its members. That is all that
//! rebuilding a tree needs: a group's membership is decided by whichever version of the group ends up in the
//! map (current or written), and each member's content by its own entry.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use ferrofabric_protos::common::{ConfigGroup, ConfigPolicy, ConfigValue};

use crate::error::ConfigTxError;

/// Name of the root group: every path starts with `/Channel`.
pub(crate) const ROOT: &str = "Channel";

/// Longest name Fabric accepts for a config element or channel (`configtx.MaxLength`).
pub(crate) const MAX_NAME_LEN: usize = 249;

/// Element kinds; the order (groups first) only fixes iteration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Kind {
    Group,
    Value,
    Policy,
}

/// Map key: kind plus absolute path (`/Channel/Application/Org1MSP/MSP`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ElementKey {
    pub(crate) kind: Kind,
    pub(crate) path: String,
}

impl ElementKey {
    fn new(kind: Kind, path: impl Into<String>) -> Self {
        ElementKey { kind, path: path.into() }
    }
}

impl fmt::Display for ElementKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Fabric's prefixes are padded to one width (`configmap.go`), and clients see them in error messages.
        let tag = match self.kind {
            Kind::Group => "[Group]  ",
            Kind::Value => "[Value]  ",
            Kind::Policy => "[Policy] ",
        };
        write!(f, "{tag}{}", self.path)
    }
}

/// A group without its members' contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupNode {
    pub(crate) version: u64,
    pub(crate) mod_policy: String,
    pub(crate) groups: BTreeSet<String>,
    pub(crate) values: BTreeSet<String>,
    pub(crate) policies: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    Group(GroupNode),
    Value(ConfigValue),
    Policy(ConfigPolicy),
}

/// One entry of the map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Element {
    /// Names of the groups from the root down to the one holding this element (`["Channel", "Application"]`);
    /// empty for the root group itself.
    pub(crate) parent: Vec<String>,
    /// The element's own name.
    pub(crate) name: String,
    pub(crate) item: Item,
}

impl Element {
    pub(crate) fn version(&self) -> u64 {
        match &self.item {
            Item::Group(g) => g.version,
            Item::Value(v) => v.version,
            Item::Policy(p) => p.version,
        }
    }

    pub(crate) fn mod_policy(&self) -> &str {
        match &self.item {
            Item::Group(g) => &g.mod_policy,
            Item::Value(v) => &v.mod_policy,
            Item::Policy(p) => &p.mod_policy,
        }
    }

    /// Absolute path of the policy `mod_policy` refers to, or `None` if it is empty.
    ///
    /// Fabric (`update.go` `policyForItem`) resolves a relative mod_policy in the policy manager of the group
    /// the element lives in; for a group that is the group itself, for a value or policy its parent group.
    /// Absolute references (leading `/`) go to the root manager unchanged.
    pub(crate) fn mod_policy_path(&self) -> Option<String> {
        let mod_policy = self.mod_policy();
        if mod_policy.is_empty() {
            return None;
        }
        if mod_policy.starts_with('/') || self.parent.is_empty() {
            // The root group, or an absolute reference: the root manager resolves it as is (relative to /Channel).
            return Some(if mod_policy.starts_with('/') {
                mod_policy.to_owned()
            } else {
                format!("/{ROOT}/{mod_policy}")
            });
        }
        let mut path = String::new();
        for segment in &self.parent {
            path.push('/');
            path.push_str(segment);
        }
        if matches!(self.item, Item::Group(_)) {
            path.push('/');
            path.push_str(&self.name);
        }
        path.push('/');
        path.push_str(mod_policy);
        Some(path)
    }
}

/// The flattened config.
pub(crate) type ConfigMap = BTreeMap<ElementKey, Element>;

/// Fabric `validateConfigID`: 1..=249 characters of `[a-zA-Z0-9.-]`, not `.` or `..`.
pub(crate) fn check_config_id(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty");
    }
    if name.len() > MAX_NAME_LEN {
        return Err("longer than 249 characters");
    }
    if name == "." || name == ".." {
        return Err("'.' and '..' are not allowed");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-') {
        return Err("only [a-zA-Z0-9.-] are allowed");
    }
    Ok(())
}

/// Fabric `ValidateChannelID`: 1..=249 characters, a lowercase letter followed by `[a-z0-9.-]`.
pub(crate) fn check_channel_id(channel_id: &str) -> Result<(), ConfigTxError> {
    let illegal = |reason| ConfigTxError::IllegalName { set: "channel ID", name: channel_id.to_owned(), reason };
    let mut chars = channel_id.chars();
    match chars.next() {
        None => return Err(illegal("empty")),
        Some(c) if !c.is_ascii_lowercase() => return Err(illegal("must start with [a-z]")),
        Some(_) => {}
    }
    if channel_id.len() > MAX_NAME_LEN {
        return Err(illegal("longer than 249 characters"));
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-') {
        return Err(illegal("only [a-z0-9.-] are allowed after the first character"));
    }
    Ok(())
}

/// Flatten `root` (named [`ROOT`] whatever the proto says; `None` gives an empty map, as Fabric treats a nil
/// read or write set). `set` labels naming errors.
pub(crate) fn map_config(root: Option<&ConfigGroup>, set: &'static str) -> Result<ConfigMap, ConfigTxError> {
    let mut map = ConfigMap::new();
    if let Some(root) = root {
        let mut parent = Vec::new();
        add_group(&mut map, &mut parent, ROOT, root, set)?;
    }
    Ok(map)
}

fn path_of(parent: &[String], name: &str) -> String {
    let mut path = String::new();
    for segment in parent {
        path.push('/');
        path.push_str(segment);
    }
    path.push('/');
    path.push_str(name);
    path
}

fn checked(name: &str, set: &'static str) -> Result<(), ConfigTxError> {
    check_config_id(name).map_err(|reason| ConfigTxError::IllegalName { set, name: name.to_owned(), reason })
}

fn add_group(
    map: &mut ConfigMap,
    parent: &mut Vec<String>,
    name: &str,
    group: &ConfigGroup,
    set: &'static str,
) -> Result<(), ConfigTxError> {
    checked(name, set)?;
    let node = GroupNode {
        version: group.version,
        mod_policy: group.mod_policy.clone(),
        groups: group.groups.keys().cloned().collect(),
        values: group.values.keys().cloned().collect(),
        policies: group.policies.keys().cloned().collect(),
    };
    map.insert(
        ElementKey::new(Kind::Group, path_of(parent, name)),
        Element { parent: parent.clone(), name: name.to_owned(), item: Item::Group(node) },
    );

    parent.push(name.to_owned());
    for (child, sub) in &group.groups {
        add_group(map, parent, child, sub, set)?;
    }
    for (key, value) in &group.values {
        checked(key, set)?;
        map.insert(
            ElementKey::new(Kind::Value, path_of(parent, key)),
            Element { parent: parent.clone(), name: key.clone(), item: Item::Value(value.clone()) },
        );
    }
    for (key, policy) in &group.policies {
        checked(key, set)?;
        map.insert(
            ElementKey::new(Kind::Policy, path_of(parent, key)),
            Element { parent: parent.clone(), name: key.clone(), item: Item::Policy(policy.clone()) },
        );
    }
    parent.pop();
    Ok(())
}

/// Key of the orderer capabilities value: its presence switches on Fabric's upgrade of empty mod_policies.
const ORDERER_CAPABILITIES: &str = "/Channel/Orderer/Capabilities";

/// Mod_policy given to elements that have none once orderer capabilities exist.
const DEFAULT_MOD_POLICY: &str = "Admins";

/// Rebuild the tree rooted at `/Channel` from `map` (Fabric `configMapToConfig`).
///
/// Like Fabric, when the map holds `/Channel/Orderer/Capabilities` every element of the output with an empty
/// mod_policy gets `Admins` (configs written before capabilities existed had none).
pub(crate) fn rebuild(map: &ConfigMap) -> Result<ConfigGroup, ConfigTxError> {
    let upgrade = map.contains_key(&ElementKey::new(Kind::Value, ORDERER_CAPABILITIES));
    rebuild_group(map, &format!("/{ROOT}"), upgrade)
}

fn rebuild_group(map: &ConfigMap, path: &str, upgrade: bool) -> Result<ConfigGroup, ConfigTxError> {
    let default_policy =
        |mp: &str| if upgrade && mp.is_empty() { DEFAULT_MOD_POLICY.to_owned() } else { mp.to_owned() };
    let key = ElementKey::new(Kind::Group, path);
    let Some(Element { item: Item::Group(node), .. }) = map.get(&key) else {
        return Err(ConfigTxError::Rebuild(format!("{key} is missing")));
    };
    let mut group =
        ConfigGroup { version: node.version, mod_policy: default_policy(&node.mod_policy), ..ConfigGroup::default() };
    for name in &node.groups {
        group.groups.insert(name.clone(), rebuild_group(map, &format!("{path}/{name}"), upgrade)?);
    }
    for name in &node.values {
        let key = ElementKey::new(Kind::Value, format!("{path}/{name}"));
        let Some(Element { item: Item::Value(value), .. }) = map.get(&key) else {
            return Err(ConfigTxError::Rebuild(format!("{key} is missing")));
        };
        let mut value = value.clone();
        value.mod_policy = default_policy(&value.mod_policy);
        group.values.insert(name.clone(), value);
    }
    for name in &node.policies {
        let key = ElementKey::new(Kind::Policy, format!("{path}/{name}"));
        let Some(Element { item: Item::Policy(policy), .. }) = map.get(&key) else {
            return Err(ConfigTxError::Rebuild(format!("{key} is missing")));
        };
        let mut policy = policy.clone();
        policy.mod_policy = default_policy(&policy.mod_policy);
        group.policies.insert(name.clone(), policy);
    }
    Ok(group)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn value(version: u64, mod_policy: &str) -> ConfigValue {
        ConfigValue { version, mod_policy: mod_policy.into(), value: bytes::Bytes::from_static(b"x") }
    }

    fn sample() -> ConfigGroup {
        let mut org = ConfigGroup { version: 2, mod_policy: "Admins".into(), ..Default::default() };
        org.values.insert("MSP".into(), value(1, "Admins"));
        let mut app = ConfigGroup { version: 1, mod_policy: "Admins".into(), ..Default::default() };
        app.groups.insert("Org1MSP".into(), org);
        app.policies
            .insert("Admins".into(), ConfigPolicy { version: 0, mod_policy: "/Channel/Admins".into(), policy: None });
        let mut root = ConfigGroup { version: 0, mod_policy: "Admins".into(), ..Default::default() };
        root.groups.insert("Application".into(), app);
        root.values.insert("HashingAlgorithm".into(), value(0, ""));
        root
    }

    #[test]
    fn map_and_rebuild_round_trip() {
        let root = sample();
        let map = map_config(Some(&root), "test").unwrap();
        let keys: Vec<String> = map.keys().map(ToString::to_string).collect();
        assert_eq!(
            keys,
            [
                "[Group]  /Channel",
                "[Group]  /Channel/Application",
                "[Group]  /Channel/Application/Org1MSP",
                "[Value]  /Channel/Application/Org1MSP/MSP",
                "[Value]  /Channel/HashingAlgorithm",
                "[Policy] /Channel/Application/Admins",
            ]
        );
        assert_eq!(rebuild(&map).unwrap(), root);
    }

    #[test]
    fn mod_policy_paths_follow_the_owning_group() {
        let map = map_config(Some(&sample()), "test").unwrap();
        let path = |kind, p: &str| map[&ElementKey::new(kind, p)].mod_policy_path();
        assert_eq!(path(Kind::Group, "/Channel").as_deref(), Some("/Channel/Admins"));
        assert_eq!(path(Kind::Group, "/Channel/Application").as_deref(), Some("/Channel/Application/Admins"));
        assert_eq!(
            path(Kind::Group, "/Channel/Application/Org1MSP").as_deref(),
            Some("/Channel/Application/Org1MSP/Admins")
        );
        assert_eq!(
            path(Kind::Value, "/Channel/Application/Org1MSP/MSP").as_deref(),
            Some("/Channel/Application/Org1MSP/Admins")
        );
        assert_eq!(path(Kind::Policy, "/Channel/Application/Admins").as_deref(), Some("/Channel/Admins"));
        assert_eq!(path(Kind::Value, "/Channel/HashingAlgorithm"), None);
    }

    #[test]
    fn empty_mod_policies_are_upgraded_only_with_orderer_capabilities() {
        let mut root = sample();
        let map = map_config(Some(&root), "test").unwrap();
        assert_eq!(rebuild(&map).unwrap().values["HashingAlgorithm"].mod_policy, "");

        let mut orderer = ConfigGroup::default();
        orderer.values.insert("Capabilities".into(), value(0, "Admins"));
        root.groups.insert("Orderer".into(), orderer);
        let rebuilt = rebuild(&map_config(Some(&root), "test").unwrap()).unwrap();
        assert_eq!(rebuilt.values["HashingAlgorithm"].mod_policy, "Admins");
        assert_eq!(rebuilt.groups["Orderer"].mod_policy, "Admins");
    }

    #[test]
    fn names_are_checked() {
        assert!(check_config_id("Org1MSP").is_ok());
        assert!(check_config_id("a.b-c").is_ok());
        for bad in ["", ".", "..", "a/b", "a b", "a_b", &"x".repeat(250)] {
            assert!(check_config_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_channel_id("mychannel").is_ok());
        for bad in ["", "MyChannel", "1abc", "a_b", &"x".repeat(250)] {
            assert!(check_channel_id(bad).is_err(), "{bad:?}");
        }
        let mut root = sample();
        root.values.insert("bad name".into(), value(0, "Admins"));
        assert!(matches!(
            map_config(Some(&root), "write set"),
            Err(ConfigTxError::IllegalName { set: "write set", .. })
        ));
    }
}
