//! The crypto-config.yaml model of Fabric's `cryptogen` (`cmd/cryptogen/main.go`: `Config`, `OrgSpec`,
//! `NodeSpec`, `NodeTemplate`, `UsersSpec`) and its rendering into concrete node lists.

use std::path::Path;

use serde::Deserialize;

use crate::CryptogenError;

/// A whole crypto-config.yaml: the orderer and peer organisations to generate.
///
/// Keys are Fabric's (`OrdererOrgs`, `PeerOrgs`, ...); unknown keys are rejected so a misspelt key is not
/// silently ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct CryptoConfig {
    /// Organisations that run orderers (`ordererOrganizations/<Domain>`).
    #[serde(default)]
    pub orderer_orgs: Vec<OrgSpec>,
    /// Organisations that run peers (`peerOrganizations/<Domain>`).
    #[serde(default)]
    pub peer_orgs: Vec<OrgSpec>,
}

/// One organisation (`OrgSpec`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct OrgSpec {
    /// Display name (not used in paths or certificates, as in cryptogen).
    #[serde(default)]
    pub name: String,
    /// DNS domain: the directory name, the CAs' `O`, and the suffix of node and user names.
    pub domain: String,
    /// Whether identities carry a NodeOU (`client`, `peer`, `admin`, `orderer`) and MSP folders get a
    /// `config.yaml` enabling NodeOUs; without it admins are listed in `admincerts`.
    #[serde(default, rename = "EnableNodeOUs")]
    pub enable_node_ous: bool,
    /// The CA's subject: `Hostname` (default `ca`), `CommonName` (default `<Hostname>.<Domain>`), and the
    /// optional `Country`, `Province`, `Locality`, `OrganizationalUnit`, `StreetAddress`, `PostalCode`
    /// that every certificate of the organisation inherits.
    #[serde(default, rename = "CA")]
    pub ca: NodeSpec,
    /// Nodes named from a template (`peer0`, `peer1`, ... by default).
    #[serde(default)]
    pub template: NodeTemplate,
    /// Explicitly named nodes (generated before the template's).
    #[serde(default)]
    pub specs: Vec<NodeSpec>,
    /// Users in addition to `Admin` (peer organisations only, as in cryptogen).
    #[serde(default)]
    pub users: UsersSpec,
}

/// One node, or the CA (`NodeSpec`). `CommonName` and `SANS` may use `{{.Hostname}}`, `{{.Domain}}` and
/// (in `SANS`) `{{.CommonName}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct NodeSpec {
    /// Host name without the domain, e.g. `peer0`.
    #[serde(default)]
    pub hostname: String,
    /// Certificate CN; default `{{.Hostname}}.{{.Domain}}`.
    #[serde(default)]
    pub common_name: String,
    /// Subject `C` (CA spec only; default `US`).
    #[serde(default)]
    pub country: String,
    /// Subject `ST` (CA spec only; default `California`).
    #[serde(default)]
    pub province: String,
    /// Subject `L` (CA spec only; default `San Francisco`).
    #[serde(default)]
    pub locality: String,
    /// Subject `OU` (CA spec only).
    #[serde(default)]
    pub organizational_unit: String,
    /// Subject `street` (CA spec only).
    #[serde(default)]
    pub street_address: String,
    /// Subject `postalCode` (CA spec only).
    #[serde(default)]
    pub postal_code: String,
    /// Extra TLS subject alternative names (IP addresses are recognised); the CN and the host name are
    /// always included first.
    #[serde(default, rename = "SANS")]
    pub sans: Vec<String>,
}

/// Nodes generated from a name template (`NodeTemplate`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct NodeTemplate {
    /// Number of nodes.
    #[serde(default)]
    pub count: u32,
    /// First index.
    #[serde(default)]
    pub start: u32,
    /// Host name template over `{{.Prefix}}` (`peer` or `orderer`), `{{.Index}}` and `{{.Domain}}`; default
    /// `{{.Prefix}}{{.Index}}`.
    #[serde(default)]
    pub hostname: String,
    /// Extra SANs of every templated node (templated like [`NodeSpec::sans`]).
    #[serde(default, rename = "SANS")]
    pub sans: Vec<String>,
}

/// `Users` of an organisation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct UsersSpec {
    /// Number of users `User1@<Domain>` ... `UserN@<Domain>`.
    #[serde(default)]
    pub count: u32,
}

impl CryptoConfig {
    /// Parses crypto-config.yaml text.
    ///
    /// Errors: [`CryptogenError::Config`] for invalid YAML, unknown keys, wrong types or an organisation
    /// without a `Domain`.
    pub fn from_yaml(text: &str) -> Result<CryptoConfig, CryptogenError> {
        let config: CryptoConfig =
            serde_yaml::from_str(text).map_err(|e| CryptogenError::Config(format!("crypto-config: {e}")))?;
        for org in config.orderer_orgs.iter().chain(&config.peer_orgs) {
            if org.domain.is_empty() {
                return Err(CryptogenError::Config(format!("organisation {:?} has no Domain", org.name)));
            }
        }
        Ok(config)
    }

    /// Reads and parses a crypto-config.yaml file.
    ///
    /// Errors: [`CryptogenError::Io`], then as [`CryptoConfig::from_yaml`].
    pub fn from_file(path: &Path) -> Result<CryptoConfig, CryptogenError> {
        let text = std::fs::read_to_string(path).map_err(|e| CryptogenError::io(path, e))?;
        CryptoConfig::from_yaml(&text)
    }
}

/// A node after rendering: its CN and the full TLS SAN list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RenderedNode {
    pub(crate) common_name: String,
    pub(crate) sans: Vec<String>,
}

/// An organisation after rendering its templates.
#[derive(Debug, Clone)]
pub(crate) struct RenderedOrg {
    /// The CA spec with `Hostname` defaulted and `CommonName` rendered.
    pub(crate) ca: NodeSpec,
    /// Explicit specs first, then the template's nodes.
    pub(crate) nodes: Vec<RenderedNode>,
}

/// Expands Go `text/template` actions of the form `{{.Name}}` (spaces allowed inside the braces), the
/// only form cryptogen's templates use. `vars` maps names to values.
///
/// Errors: unterminated actions, anything other than a field reference, or an unknown field.
fn render(template: &str, vars: &[(&str, &str)]) -> Result<String, CryptogenError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end =
            after.find("}}").ok_or_else(|| CryptogenError::Template(format!("unterminated action in {template:?}")))?;
        let action = after[..end].trim();
        let name = action
            .strip_prefix('.')
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .ok_or_else(|| CryptogenError::Template(format!("unsupported action {{{{{action}}}}} in {template:?}")))?;
        let value = vars
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| CryptogenError::Template(format!("unknown field .{name} in {template:?}")))?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// cryptogen's `renderNodeSpec`: CN from its template (default `<Hostname>.<Domain>`), then SANs
/// `[CN, Hostname, rendered extra SANs...]`.
fn render_node(domain: &str, spec: &NodeSpec) -> Result<RenderedNode, CryptogenError> {
    let cn_template = if spec.common_name.is_empty() { "{{.Hostname}}.{{.Domain}}" } else { &spec.common_name };
    let common_name = render(cn_template, &[("Hostname", &spec.hostname), ("Domain", domain), ("CommonName", "")])?;
    let mut sans = vec![common_name.clone(), spec.hostname.clone()];
    for san in &spec.sans {
        sans.push(render(san, &[("Hostname", &spec.hostname), ("Domain", domain), ("CommonName", &common_name)])?);
    }
    Ok(RenderedNode { common_name, sans })
}

/// cryptogen's `renderOrgSpec`: appends the template's nodes to the explicit specs and renders all,
/// then the CA. `prefix` is `peer` or `orderer`.
pub(crate) fn render_org(org: &OrgSpec, prefix: &str) -> Result<RenderedOrg, CryptogenError> {
    let mut specs = org.specs.clone();
    let host_template = if org.template.hostname.is_empty() { "{{.Prefix}}{{.Index}}" } else { &org.template.hostname };
    for i in 0..org.template.count {
        let index = (u64::from(i) + u64::from(org.template.start)).to_string();
        let hostname = render(host_template, &[("Prefix", prefix), ("Index", &index), ("Domain", &org.domain)])?;
        specs.push(NodeSpec { hostname, sans: org.template.sans.clone(), ..NodeSpec::default() });
    }
    let nodes = specs.iter().map(|s| render_node(&org.domain, s)).collect::<Result<Vec<_>, _>>()?;
    let mut ca = org.ca.clone();
    if ca.hostname.is_empty() {
        ca.hostname = "ca".to_string();
    }
    ca.common_name = render_node(&org.domain, &ca)?.common_name;
    Ok(RenderedOrg { ca, nodes })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn render_substitutes_fields_and_rejects_others() {
        let vars = [("Hostname", "peer0"), ("Domain", "org1.example.com")];
        assert_eq!(render("{{.Hostname}}.{{ .Domain }}", &vars).unwrap(), "peer0.org1.example.com");
        assert_eq!(render("plain", &vars).unwrap(), "plain");
        assert!(matches!(render("{{.Nope}}", &vars), Err(CryptogenError::Template(_))));
        assert!(matches!(render("{{.Hostname", &vars), Err(CryptogenError::Template(_))));
        assert!(matches!(render("{{printf \"x\"}}", &vars), Err(CryptogenError::Template(_))));
    }

    #[test]
    fn org_rendering_follows_cryptogen() {
        let org = OrgSpec {
            domain: "org1.example.com".into(),
            template: NodeTemplate {
                count: 2,
                start: 3,
                hostname: String::new(),
                sans: vec!["{{.Hostname}}.alt.{{.Domain}}".into(), "10.0.0.1".into()],
            },
            specs: vec![NodeSpec {
                hostname: "foo".into(),
                common_name: "foo27.org5.example.com".into(),
                sans: vec!["{{.CommonName}}-x".into()],
                ..NodeSpec::default()
            }],
            ..OrgSpec::default()
        };
        let r = render_org(&org, "peer").unwrap();
        assert_eq!(r.ca.common_name, "ca.org1.example.com");
        let names: Vec<_> = r.nodes.iter().map(|n| n.common_name.as_str()).collect();
        assert_eq!(names, ["foo27.org5.example.com", "peer3.org1.example.com", "peer4.org1.example.com"]);
        assert_eq!(r.nodes[0].sans, ["foo27.org5.example.com", "foo", "foo27.org5.example.com-x"]);
        assert_eq!(r.nodes[2].sans, ["peer4.org1.example.com", "peer4", "peer4.alt.org1.example.com", "10.0.0.1"]);
    }

    #[test]
    fn yaml_parsing_rejects_unknown_keys_and_missing_domain() {
        let ok = CryptoConfig::from_yaml("PeerOrgs:\n- Name: A\n  Domain: a.com\n  Users:\n    Count: 2\n").unwrap();
        assert_eq!(ok.peer_orgs[0].users.count, 2);
        assert!(ok.orderer_orgs.is_empty());
        assert!(matches!(
            CryptoConfig::from_yaml("PeerOrgs:\n- Name: A\n  Domain: a.com\n  Userz: 1\n"),
            Err(CryptogenError::Config(_))
        ));
        assert!(matches!(CryptoConfig::from_yaml("PeerOrgs:\n- Name: A\n"), Err(CryptogenError::Config(_))));
        assert!(matches!(CryptoConfig::from_yaml("PeerOrgs: [1, 2"), Err(CryptogenError::Config(_))));
    }
}
