//! Loading a verifying MSP configuration from an MSP directory as
//! cryptogen / Fabric CA lay it out (msp/configbuilder.go
//! `GetVerifyingMspConfig`): cacerts, admincerts, intermediatecerts,
//! tlscacerts, tlsintermediatecerts, crls and config.yaml (OU identifiers
//! and NodeOUs).

use std::path::Path;

use bytes::Bytes;
use ferrofabric_protos::msp::{FabricCryptoConfig, FabricMspConfig, FabricNodeOUs, FabricOuIdentifier, MspConfig};
use prost::Message;

use crate::error::MspError;
use crate::msp::Msp;
use crate::pem;
use crate::signing::{read, sorted_files};

/// The PEM files of `dir` (files without any PEM block are skipped, as
/// Fabric does); `Ok(None)` when the directory does not exist.
fn pem_files(dir: &Path) -> Result<Option<Vec<Bytes>>, MspError> {
    if !dir.exists() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for file in sorted_files(dir)? {
        let content = read(&file)?;
        if pem::decode(&content).is_some() {
            out.push(Bytes::from(content));
        }
    }
    Ok(Some(out))
}

/// A node of the YAML subset used by MSP `config.yaml` files.
#[derive(Debug, Clone, PartialEq)]
enum Yaml {
    Scalar(String),
    Map(Vec<(String, Yaml)>),
    List(Vec<Yaml>),
}

impl Yaml {
    fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn str(&self, key: &str) -> String {
        match self.get(key) {
            Some(Yaml::Scalar(s)) => s.clone(),
            _ => String::new(),
        }
    }
}

fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if i == 0 || line[..i].ends_with([' ', '\t']) => return &line[..i],
            _ => {}
        }
    }
    line
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2 && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\''))) {
        v[1..v.len() - 1].to_owned()
    } else {
        v.to_owned()
    }
}

/// Parses block mappings, block sequences and plain/quoted scalars.
fn parse_yaml(text: &str) -> Result<Yaml, MspError> {
    let mut lines: Vec<(usize, String)> = Vec::new();
    for raw in text.lines() {
        let line = strip_comment(raw).trim_end();
        if line.trim().is_empty() || line.trim() == "---" {
            continue;
        }
        if line.starts_with('\t') {
            return Err(MspError::Config("config.yaml: tabs are not allowed for indentation".into()));
        }
        let indent = line.len() - line.trim_start().len();
        lines.push((indent, line.trim_start().to_owned()));
    }
    if lines.is_empty() {
        return Ok(Yaml::Map(Vec::new()));
    }
    let mut i = 0;
    let indent = lines[0].0;
    let node = parse_block(&mut lines, &mut i, indent)?;
    if i != lines.len() {
        return Err(MspError::Config(format!("config.yaml: unexpected content: {}", lines[i].1)));
    }
    Ok(node)
}

fn is_list_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

fn parse_block(lines: &mut Vec<(usize, String)>, i: &mut usize, indent: usize) -> Result<Yaml, MspError> {
    if is_list_item(&lines[*i].1) {
        let mut items = Vec::new();
        while *i < lines.len() && lines[*i].0 == indent && is_list_item(&lines[*i].1) {
            let content = lines[*i].1.clone();
            let rest = content[1..].trim_start();
            if rest.is_empty() {
                *i += 1;
                if *i < lines.len() && lines[*i].0 > indent {
                    let child_indent = lines[*i].0;
                    items.push(parse_block(lines, i, child_indent)?);
                } else {
                    items.push(Yaml::Scalar(String::new()));
                }
            } else {
                let item_indent = indent + (content.len() - rest.len());
                lines[*i] = (item_indent, rest.to_owned());
                items.push(parse_block(lines, i, item_indent)?);
            }
        }
        return Ok(Yaml::List(items));
    }
    let first = &lines[*i].1;
    if !first.contains(':') {
        *i += 1;
        return Ok(Yaml::Scalar(unquote(first)));
    }
    let mut entries = Vec::new();
    while *i < lines.len() && lines[*i].0 == indent && !is_list_item(&lines[*i].1) {
        let content = lines[*i].1.clone();
        let (key, value) = match content.find(": ") {
            Some(p) => (&content[..p], content[p + 2..].trim()),
            None => match content.strip_suffix(':') {
                Some(k) => (k, ""),
                None => return Err(MspError::Config(format!("config.yaml: expected `key: value`, got {content}"))),
            },
        };
        let key = unquote(key);
        *i += 1;
        let node = if !value.is_empty() {
            Yaml::Scalar(unquote(value))
        } else if *i < lines.len() && (lines[*i].0 > indent || (lines[*i].0 == indent && is_list_item(&lines[*i].1))) {
            let child_indent = lines[*i].0;
            parse_block(lines, i, child_indent)?
        } else {
            Yaml::Scalar(String::new())
        };
        entries.push((key, node));
    }
    if *i < lines.len() && lines[*i].0 > indent {
        return Err(MspError::Config(format!("config.yaml: bad indentation at {}", lines[*i].1)));
    }
    Ok(Yaml::Map(entries))
}

fn yaml_bool(v: &str) -> bool {
    matches!(v, "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y")
}

/// Builds the `MSPConfig` (type FABRIC) that Fabric's
/// `GetVerifyingMspConfig(dir, mspid, "bccsp")` produces for an MSP folder.
///
/// Errors: [`MspError::Io`] when `cacerts` is missing/empty or a file named
/// by config.yaml for `OrganizationalUnitIdentifiers` cannot be read;
/// [`MspError::Config`] for YAML outside the supported subset (block maps,
/// block lists, scalars).
pub fn msp_config_from_dir(mspid: &str, dir: &Path) -> Result<MspConfig, MspError> {
    let root_certs = pem_files(&dir.join("cacerts"))?.unwrap_or_default();
    if root_certs.is_empty() {
        return Err(MspError::Io(format!(
            "could not load a valid ca certificate from directory {}/cacerts",
            dir.display()
        )));
    }
    let admins = pem_files(&dir.join("admincerts"))?.unwrap_or_default();
    let intermediate_certs = pem_files(&dir.join("intermediatecerts"))?.unwrap_or_default();
    let tls_root_certs = pem_files(&dir.join("tlscacerts"))?.unwrap_or_default();
    let tls_intermediate_certs = if tls_root_certs.is_empty() {
        Vec::new()
    } else {
        pem_files(&dir.join("tlsintermediatecerts"))?.unwrap_or_default()
    };
    let revocation_list = pem_files(&dir.join("crls"))?.unwrap_or_default();

    let mut organizational_unit_identifiers = Vec::new();
    let mut fabric_node_ous = None;
    let config_file = dir.join("config.yaml");
    if config_file.exists() {
        let text =
            String::from_utf8(read(&config_file)?).map_err(|_| MspError::Config("config.yaml is not UTF-8".into()))?;
        let yaml = parse_yaml(&text)?;
        if let Some(Yaml::List(items)) = yaml.get("OrganizationalUnitIdentifiers") {
            for item in items {
                organizational_unit_identifiers.push(FabricOuIdentifier {
                    certificate: Bytes::from(read(&dir.join(item.str("Certificate")))?),
                    organizational_unit_identifier: item.str("OrganizationalUnitIdentifier"),
                });
            }
        }
        if let Some(node) = yaml.get("NodeOUs") {
            if yaml_bool(&node.str("Enable")) {
                let ou = |key: &str| -> Option<FabricOuIdentifier> {
                    let entry = node.get(key)?;
                    let name = entry.str("OrganizationalUnitIdentifier");
                    if name.is_empty() {
                        return None;
                    }
                    let cert_path = entry.str("Certificate");
                    // Fabric only logs a warning when the file is unreadable.
                    let certificate = if cert_path.is_empty() {
                        Bytes::new()
                    } else {
                        read(&dir.join(cert_path)).map(Bytes::from).unwrap_or_default()
                    };
                    Some(FabricOuIdentifier { certificate, organizational_unit_identifier: name })
                };
                fabric_node_ous = Some(FabricNodeOUs {
                    enable: true,
                    client_ou_identifier: ou("ClientOUIdentifier"),
                    peer_ou_identifier: ou("PeerOUIdentifier"),
                    admin_ou_identifier: ou("AdminOUIdentifier"),
                    orderer_ou_identifier: ou("OrdererOUIdentifier"),
                });
            }
        }
    }

    let conf = FabricMspConfig {
        name: mspid.to_owned(),
        root_certs,
        intermediate_certs,
        admins,
        revocation_list,
        signing_identity: None,
        organizational_unit_identifiers,
        crypto_config: Some(FabricCryptoConfig {
            signature_hash_family: "SHA2".into(),
            identity_identifier_hash_function: "SHA256".into(),
        }),
        tls_root_certs,
        tls_intermediate_certs,
        fabric_node_ous,
    };
    Ok(MspConfig { r#type: 0, config: Bytes::from(conf.encode_to_vec()) })
}

impl Msp {
    /// [`msp_config_from_dir`] followed by [`Msp::from_config`].
    pub fn from_msp_dir(mspid: &str, dir: &Path) -> Result<Msp, MspError> {
        Msp::from_config(&msp_config_from_dir(mspid, dir)?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn yaml_subset() {
        let y = parse_yaml(
            "# c\nNodeOUs:\n  Enable: true\n  ClientOUIdentifier:\n    Certificate: \"cacerts/ca.pem\" # x\n    OrganizationalUnitIdentifier: client\nOrganizationalUnitIdentifiers:\n- Certificate: a.pem\n  OrganizationalUnitIdentifier: 'ou1'\n- Certificate: b.pem\n  OrganizationalUnitIdentifier: ou2\n",
        )
        .unwrap();
        let node = y.get("NodeOUs").unwrap();
        assert!(yaml_bool(&node.str("Enable")));
        assert_eq!(node.get("ClientOUIdentifier").unwrap().str("Certificate"), "cacerts/ca.pem");
        let Some(Yaml::List(items)) = y.get("OrganizationalUnitIdentifiers") else { panic!("list expected") };
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].str("OrganizationalUnitIdentifier"), "ou1");
        assert_eq!(items[1].str("Certificate"), "b.pem");
        assert!(parse_yaml("a:\n  b: 1\n c: 2\n").is_err());
    }
}
