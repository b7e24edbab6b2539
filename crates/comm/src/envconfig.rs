//! Fabric's configuration files with environment overrides, as Viper maps them (`core.yaml` with `CORE_*`,
//! `orderer.yaml` with `ORDERER_*`; Fabric's `internal/pkg/config` / `viperutil`): the variable
//! `<PREFIX>_<KEY PATH IN UPPER CASE, '.' AS '_'>` replaces the value of that key of the file, e.g.
//! `ORDERER_GENERAL_LISTENPORT=7050` for `General.ListenPort` and `CORE_PEER_ADDRESS` for `peer.address`. Keys
//! are matched case-insensitively against the keys the file has (Viper only knows those); a variable that names no
//! key is ignored. Values are read as YAML scalars (`7050` a number, `true` a boolean), a bracketed list
//! `[a, b]` as a list of strings, and kept as strings where the file holds a string.

use std::path::PathBuf;

use serde_yaml::Value;

/// Applies the overrides among `vars` (name, value) with `prefix` (`ORDERER`, `CORE`) to `doc`; returns the key
/// paths it replaced, dotted as in the file (`General.ListenPort`).
pub fn apply_env_overrides(
    doc: &mut Value,
    prefix: &str,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Vec<String> {
    let lead = format!("{}_", prefix.to_ascii_uppercase());
    let mut replaced = Vec::new();
    for (name, value) in vars {
        let Some(rest) = name.strip_prefix(&lead) else { continue };
        if let Some(path) = set_path(doc, rest, &value) {
            replaced.push(path);
        }
    }
    replaced
}

/// Finds the key path of `doc` whose upper-cased, `_`-joined form is `rest` and sets it to `raw`; the dotted path.
fn set_path(doc: &mut Value, rest: &str, raw: &str) -> Option<String> {
    let Value::Mapping(map) = doc else { return None };
    for (k, v) in map.iter_mut() {
        let Some(key) = k.as_str() else { continue };
        let upper = key.to_ascii_uppercase();
        if rest == upper {
            *v = override_value(v, raw);
            return Some(key.to_owned());
        }
        if let Some(deeper) = rest.strip_prefix(&upper).and_then(|r| r.strip_prefix('_')) {
            if let Some(path) = set_path(v, deeper, raw) {
                return Some(format!("{key}.{path}"));
            }
        }
    }
    None
}

/// The value an override `raw` gives a key that holds `current`.
fn override_value(current: &Value, raw: &str) -> Value {
    let trimmed = raw.trim();
    if let Some(inner) = trimmed.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let items = inner.split(',').map(str::trim).filter(|s| !s.is_empty());
        return Value::Sequence(items.map(|s| Value::String(s.to_owned())).collect());
    }
    if matches!(current, Value::String(_)) {
        return Value::String(raw.to_owned());
    }
    match serde_yaml::from_str::<Value>(raw) {
        Ok(v @ (Value::Bool(_) | Value::Number(_) | Value::Null)) => v,
        _ => Value::String(raw.to_owned()),
    }
}

/// Where Fabric's programs look for their file `name` (`core.yaml`, `orderer.yaml`): `$FABRIC_CFG_PATH/name` when
/// that variable is set and the file exists.
pub fn fabric_cfg_file(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("FABRIC_CFG_PATH").filter(|d| !d.is_empty())?;
    let path = PathBuf::from(dir).join(name);
    path.is_file().then_some(path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
    }

    #[test]
    fn overrides_follow_vipers_key_mapping() {
        let mut doc: Value = serde_yaml::from_str(
            "General:\n  ListenAddress: 127.0.0.1\n  ListenPort: 7050\n  TLS:\n    Enabled: false\n    RootCAs:\n",
        )
        .unwrap();
        let replaced = apply_env_overrides(
            &mut doc,
            "ORDERER",
            vars(&[
                ("ORDERER_GENERAL_LISTENADDRESS", "0.0.0.0"),
                ("ORDERER_GENERAL_LISTENPORT", "7051"),
                ("ORDERER_GENERAL_TLS_ENABLED", "true"),
                ("ORDERER_GENERAL_TLS_ROOTCAS", "[/a/ca.crt, /b/ca.crt]"),
                ("ORDERER_GENERAL_NOSUCHKEY", "x"),
                ("CORE_PEER_ADDRESS", "ignored"),
            ]),
        );
        assert_eq!(
            replaced,
            ["General.ListenAddress", "General.ListenPort", "General.TLS.Enabled", "General.TLS.RootCAs"]
        );
        let want: Value = serde_yaml::from_str(
            "General:\n  ListenAddress: 0.0.0.0\n  ListenPort: 7051\n  TLS:\n    Enabled: true\n    RootCAs: [/a/ca.crt, /b/ca.crt]\n",
        )
        .unwrap();
        assert_eq!(doc, want);
    }

    #[test]
    fn a_string_key_stays_a_string() {
        let mut doc: Value = serde_yaml::from_str("peer:\n  id: peer0\n  fileSystemPath: /var\n").unwrap();
        apply_env_overrides(&mut doc, "CORE", vars(&[("CORE_PEER_ID", "1234"), ("CORE_PEER_FILESYSTEMPATH", "/d")]));
        assert_eq!(doc["peer"]["id"], Value::String("1234".into()));
        assert_eq!(doc["peer"]["fileSystemPath"], Value::String("/d".into()));
    }
}
