//! Deterministic protobuf encoding of the config messages that contain maps.
//!
//! prost keeps proto maps in `HashMap`s and writes them in hash order, so encoding the same config twice
//! (or on two orderers) could give different bytes, and therefore different block hashes. Here map entries
//! are written sorted by key. Each entry carries both its key and its value, as Go's protobuf runtime writes
//! them. Fields are emitted in field-number order and proto3 defaults are omitted, as prost and Go do, so any
//! protobuf decoder reads the same message back.

use bytes::Bytes;
use ferrofabric_protos::common::{Config, ConfigEnvelope, ConfigGroup, ConfigUpdate};
use prost::encoding::{encode_key, encode_varint, WireType};
use prost::Message;

fn put_len_delimited(buf: &mut Vec<u8>, tag: u32, data: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(data.len() as u64, buf);
    buf.extend_from_slice(data);
}

fn put_u64(buf: &mut Vec<u8>, tag: u32, value: u64) {
    if value != 0 {
        encode_key(tag, WireType::Varint, buf);
        encode_varint(value, buf);
    }
}

fn put_string(buf: &mut Vec<u8>, tag: u32, value: &str) {
    if !value.is_empty() {
        put_len_delimited(buf, tag, value.as_bytes());
    }
}

/// Write the map `entries` as field `tag`: one length-delimited entry {1: key, 2: value} per key, in key order.
fn put_map<'a, V: 'a>(
    buf: &mut Vec<u8>,
    tag: u32,
    entries: impl Iterator<Item = (&'a String, &'a V)>,
    encode_value: impl Fn(&V) -> Vec<u8>,
) {
    let mut entries: Vec<_> = entries.collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    for (key, value) in entries {
        let mut entry = Vec::new();
        put_len_delimited(&mut entry, 1, key.as_bytes());
        put_len_delimited(&mut entry, 2, &encode_value(value));
        put_len_delimited(buf, tag, &entry);
    }
}

/// `common.ConfigGroup` with sorted maps (fields: version 1, groups 2, values 3, policies 4, mod_policy 5).
pub(crate) fn config_group(group: &ConfigGroup) -> Vec<u8> {
    let mut buf = Vec::new();
    put_u64(&mut buf, 1, group.version);
    put_map(&mut buf, 2, group.groups.iter(), config_group);
    put_map(&mut buf, 3, group.values.iter(), |v| v.encode_to_vec());
    put_map(&mut buf, 4, group.policies.iter(), |p| p.encode_to_vec());
    put_string(&mut buf, 5, &group.mod_policy);
    buf
}

/// `common.Config` (sequence 1, channel_group 2).
pub(crate) fn config(config: &Config) -> Vec<u8> {
    let mut buf = Vec::new();
    put_u64(&mut buf, 1, config.sequence);
    if let Some(group) = &config.channel_group {
        put_len_delimited(&mut buf, 2, &config_group(group));
    }
    buf
}

/// `common.ConfigEnvelope` (config 1, last_update 2).
pub(crate) fn config_envelope(env: &ConfigEnvelope) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Some(cfg) = &env.config {
        put_len_delimited(&mut buf, 1, &config(cfg));
    }
    if let Some(last_update) = &env.last_update {
        put_len_delimited(&mut buf, 2, &last_update.encode_to_vec());
    }
    buf
}

/// `common.ConfigUpdate` (channel_id 1, read_set 2, write_set 3, isolated_data 5).
pub(crate) fn config_update(update: &ConfigUpdate) -> Vec<u8> {
    let mut buf = Vec::new();
    put_string(&mut buf, 1, &update.channel_id);
    if let Some(group) = &update.read_set {
        put_len_delimited(&mut buf, 2, &config_group(group));
    }
    if let Some(group) = &update.write_set {
        put_len_delimited(&mut buf, 3, &config_group(group));
    }
    put_map(&mut buf, 5, update.isolated_data.iter(), |v: &Bytes| v.to_vec());
    buf
}

/// Deterministic bytes of a `common.ConfigEnvelope` (maps sorted by key): the `Payload.data` of a CONFIG
/// transaction. Decodes with any protobuf decoder to a message equal to `env`.
pub fn marshal_config_envelope(env: &ConfigEnvelope) -> Bytes {
    Bytes::from(config_envelope(env))
}

/// Deterministic bytes of a `common.ConfigUpdate` (maps sorted by key): `ConfigUpdateEnvelope.config_update`.
pub fn marshal_config_update(update: &ConfigUpdate) -> Bytes {
    Bytes::from(config_update(update))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrofabric_protos::common::{ConfigPolicy, ConfigValue, Envelope, Policy};

    fn sample() -> ConfigGroup {
        let mut root = ConfigGroup { version: 3, mod_policy: "Admins".into(), ..Default::default() };
        for name in ["b", "a", "c", "zz", "m"] {
            let mut child = ConfigGroup { version: 1, ..Default::default() };
            child.values.insert(
                format!("{name}v"),
                ConfigValue { version: 2, value: Bytes::from(name.as_bytes().to_vec()), mod_policy: "Admins".into() },
            );
            root.groups.insert(name.into(), child);
            root.policies.insert(
                name.into(),
                ConfigPolicy {
                    version: 0,
                    policy: Some(Policy { r#type: 3, value: Bytes::from_static(b"p") }),
                    mod_policy: "/Channel/Admins".into(),
                },
            );
        }
        // An empty group as a map value: prost would drop the entry's value field, Go and we keep it.
        root.groups.insert("empty".into(), ConfigGroup::default());
        root
    }

    #[test]
    fn decodes_back_to_the_same_message() {
        let env = ConfigEnvelope {
            config: Some(Config { sequence: 7, channel_group: Some(sample()) }),
            last_update: Some(Envelope { payload: Bytes::from_static(b"pl"), signature: Bytes::from_static(b"sg") }),
        };
        let bytes = marshal_config_envelope(&env);
        assert_eq!(ConfigEnvelope::decode(bytes).unwrap(), env);

        let mut update =
            ConfigUpdate { channel_id: "ch".into(), read_set: Some(sample()), write_set: None, ..Default::default() };
        update.isolated_data.insert("k".into(), Bytes::from_static(b"v"));
        update.isolated_data.insert("a".into(), Bytes::new());
        assert_eq!(ConfigUpdate::decode(marshal_config_update(&update)).unwrap(), update);
    }

    #[test]
    fn output_does_not_depend_on_hash_order() {
        let group = sample();
        let first = config_group(&group);
        // Each decode builds new HashMaps with fresh random hash seeds, so iteration orders differ.
        for _ in 0..8 {
            let again = ConfigGroup::decode(Bytes::from(first.clone())).unwrap();
            assert_eq!(config_group(&again), first);
        }
        // Group entries are written in key order: find each entry's key field (tag 1, length, name).
        let find = |name: &str| {
            let mut needle = vec![0x0a, name.len() as u8];
            needle.extend_from_slice(name.as_bytes());
            first.windows(needle.len()).position(|w| w == needle.as_slice()).unwrap()
        };
        let positions: Vec<usize> = ["a", "b", "c", "empty", "m", "zz"].iter().map(|n| find(n)).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    }
}
