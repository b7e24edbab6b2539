//! The state layout of the `_lifecycle` namespace, the one place that spells its keys (Fabric's
//! `core/chaincode/lifecycle/{lifecycle.go, serializer.go}`).
//!
//! A structure named `<name>` is stored as one `StateMetadata{datatype, fields}` under `<prefix>/metadata/<name>`
//! and one `StateData` per field under `<prefix>/fields/<name>/<Field>`. A committed chaincode definition lives under
//! [`NAMESPACES`] in public state; an organisation's approval under [`NAMESPACES`] with the name
//! `<name>#<sequence>`, and the package it approved under [`CHAINCODE_SOURCES`], both in the organisation's
//! implicit collection ([`implicit_collection`]).

/// The namespace, and chaincode name, of the lifecycle system chaincode.
pub const LIFECYCLE_NAMESPACE: &str = "_lifecycle";

/// The key prefix of chaincode definitions and approvals (Fabric's `NamespacesName`).
pub const NAMESPACES: &str = "namespaces";

/// The key prefix of the package an organisation approved (Fabric's `ChaincodeSourcesName`).
pub const CHAINCODE_SOURCES: &str = "chaincode-sources";

/// The name prefix of an organisation's implicit private data collection (Fabric's `ImplicitCollectionNameForOrg`).
const IMPLICIT_COLLECTION_PREFIX: &str = "_implicit_org_";

/// The key of structure `name`'s `StateMetadata` under `prefix` (Fabric's `MetadataKey`).
pub fn metadata_key(prefix: &str, name: &str) -> String {
    format!("{prefix}/metadata/{name}")
}

/// The key of field `field` of structure `name` under `prefix` (Fabric's `FieldKey`).
pub fn field_key(prefix: &str, name: &str, field: &str) -> String {
    format!("{prefix}/fields/{name}/{field}")
}

/// The implicit collection of the organisation with MSP ID `mspid`: `_implicit_org_<MSPID>`.
pub fn implicit_collection(mspid: &str) -> String {
    format!("{IMPLICIT_COLLECTION_PREFIX}{mspid}")
}

/// The MSP ID whose implicit collection `collection` is, or `None` for any other collection name (Fabric's
/// `ImplicitCollectionMatcher`).
pub fn implicit_collection_org(collection: &str) -> Option<&str> {
    collection.strip_prefix(IMPLICIT_COLLECTION_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_fabrics_serializer_layout() {
        assert_eq!(metadata_key(NAMESPACES, "mycc"), "namespaces/metadata/mycc");
        assert_eq!(field_key(NAMESPACES, "mycc#2", "Sequence"), "namespaces/fields/mycc#2/Sequence");
        assert_eq!(field_key(CHAINCODE_SOURCES, "mycc#2", "PackageID"), "chaincode-sources/fields/mycc#2/PackageID");
    }

    #[test]
    fn implicit_collection_names_round_trip() {
        assert_eq!(implicit_collection("Org1MSP"), "_implicit_org_Org1MSP");
        assert_eq!(implicit_collection_org("_implicit_org_Org1MSP"), Some("Org1MSP"));
        assert_eq!(implicit_collection_org("marbles"), None);
    }
}
