//! Policy rule parsers: Fabric's signature-policy DSL (`common/policydsl/policyparser.go` `FromString`)
//! and `ImplicitMeta` rules (`common/policies/implicitmetaparser.go`).

use bytes::Bytes;
use ferrofabric_protos::common::{
    implicit_meta_policy, msp_principal, msp_role, signature_policy, ImplicitMetaPolicy, MspPrincipal, MspRole,
    SignaturePolicy, SignaturePolicyEnvelope,
};
use prost::Message;

use crate::ConfigtxgenError;

/// A parsed argument of a gate.
#[derive(Debug)]
enum Arg {
    Principal { mspid: String, role: msp_role::MspRoleType },
    Gate(Gate),
}

/// `AND(...)`, `OR(...)` or `OutOf(n, ...)` with its threshold resolved.
#[derive(Debug)]
struct Gate {
    threshold: i64,
    args: Vec<Arg>,
}

/// A lexical token.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Number(String),
    Open,
    Close,
    Comma,
}

fn tokenize(rule: &str) -> Result<Vec<Token>, ConfigtxgenError> {
    let mut out = Vec::new();
    let mut chars = rule.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '(' => out.push(Token::Open),
            ')' => out.push(Token::Close),
            ',' => out.push(Token::Comma),
            '\'' | '"' => {
                let start = i + c.len_utf8();
                let end = loop {
                    match chars.next() {
                        Some((j, q)) if q == c => break j,
                        Some(_) => {}
                        None => return Err(ConfigtxgenError::policy(rule, "unterminated string")),
                    }
                };
                out.push(Token::Str(rule[start..end].to_string()));
            }
            c if c.is_ascii_digit() || c == '-' => {
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if !d.is_ascii_digit() {
                        break;
                    }
                    end = j + d.len_utf8();
                    chars.next();
                }
                out.push(Token::Number(rule[i..end].to_string()));
            }
            c if c.is_alphanumeric() || c == '_' || c == '.' => {
                let mut end = i + c.len_utf8();
                while let Some(&(j, d)) = chars.peek() {
                    if !(d.is_alphanumeric() || d == '_' || d == '.' || d == '-') {
                        break;
                    }
                    end = j + d.len_utf8();
                    chars.next();
                }
                out.push(Token::Ident(rule[i..end].to_string()));
            }
            other => return Err(ConfigtxgenError::policy(rule, format!("unexpected character {other:?}"))),
        }
    }
    Ok(out)
}

/// `<MSP ID>.<role>` with Fabric's principal pattern: the MSP ID is ASCII letters, digits, `.` and `-`;
/// the role one of `admin`, `member`, `client`, `peer`, `orderer`.
fn principal(s: &str) -> Option<(String, msp_role::MspRoleType)> {
    let (mspid, role) = s.rsplit_once('.')?;
    let role = match role {
        "admin" => msp_role::MspRoleType::Admin,
        "member" => msp_role::MspRoleType::Member,
        "client" => msp_role::MspRoleType::Client,
        "peer" => msp_role::MspRoleType::Peer,
        "orderer" => msp_role::MspRoleType::Orderer,
        _ => return None,
    };
    let valid = !mspid.is_empty() && mspid.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    valid.then(|| (mspid.to_string(), role))
}

struct Parser<'a> {
    rule: &'a str,
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, reason: impl Into<String>) -> ConfigtxgenError {
        ConfigtxgenError::policy(self.rule, reason)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn gate(&mut self, name: &str) -> Result<Gate, ConfigtxgenError> {
        #[derive(PartialEq)]
        enum Kind {
            And,
            Or,
            OutOf,
        }
        // Fabric registers each gate in three spellings: as documented, lower case and upper case.
        let kind = match name {
            "AND" | "And" | "and" => Kind::And,
            "OR" | "Or" | "or" => Kind::Or,
            "OutOf" | "outof" | "OUTOF" => Kind::OutOf,
            other => return Err(self.err(format!("unrecognized token '{other}'"))),
        };
        if self.next() != Some(Token::Open) {
            return Err(self.err(format!("expected '(' after {name}")));
        }
        let mut raw = Vec::new();
        if self.tokens.get(self.pos) == Some(&Token::Close) {
            self.pos += 1;
        } else {
            loop {
                raw.push(match self.next() {
                    Some(Token::Ident(id)) => RawArg::Gate(self.gate(&id)?),
                    Some(Token::Str(s)) => RawArg::Str(s),
                    Some(Token::Number(n)) => RawArg::Number(n),
                    _ => return Err(self.err("expected a principal, a gate or a number")),
                });
                match self.next() {
                    Some(Token::Comma) => {}
                    Some(Token::Close) => break,
                    _ => return Err(self.err("expected ',' or ')'")),
                }
            }
        }
        let mut raw = raw.into_iter();
        let threshold = match kind {
            Kind::OutOf => {
                let first = raw.next().ok_or_else(|| self.err("OutOf needs a threshold and at least one policy"))?;
                let text = match first {
                    RawArg::Number(n) | RawArg::Str(n) => n,
                    RawArg::Gate(_) => return Err(self.err("OutOf's first argument must be a number")),
                };
                text.parse::<i64>().map_err(|_| self.err(format!("OutOf threshold {text:?} is not an integer")))?
            }
            Kind::Or => 1,
            Kind::And => 0, // set below to the number of arguments
        };
        let args = raw
            .map(|a| match a {
                RawArg::Gate(g) => Ok(Arg::Gate(g)),
                RawArg::Str(s) => principal(&s)
                    .map(|(mspid, role)| Arg::Principal { mspid, role })
                    .ok_or_else(|| self.err(format!("unrecognized token '{s}'"))),
                RawArg::Number(n) => Err(self.err(format!("unexpected number {n} where a principal belongs"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if args.is_empty() {
            return Err(self.err(format!("{name} needs at least one principal or policy")));
        }
        let threshold = if kind == Kind::And { args.len() as i64 } else { threshold };
        // Fabric accepts 0..=n+1 (n+1 can never be met, but is not rejected).
        if threshold < 0 || threshold > args.len() as i64 + 1 {
            return Err(self.err(format!("invalid t-out-of-n predicate, t {threshold}, n {}", args.len())));
        }
        Ok(Gate { threshold, args })
    }
}

/// An argument before the gate knows its role.
enum RawArg {
    Gate(Gate),
    Str(String),
    Number(String),
}

/// Compiles a gate. Fabric's evaluator runs nested gates before the enclosing gate numbers its own
/// principals, so nested principals get the lower identity indices (post-order); one identity per
/// principal occurrence, no de-duplication.
fn compile(gate: Gate, identities: &mut Vec<MspPrincipal>) -> Result<SignaturePolicy, ConfigtxgenError> {
    let mut compiled: Vec<Option<SignaturePolicy>> = Vec::with_capacity(gate.args.len());
    let mut principals = Vec::new();
    for (i, arg) in gate.args.into_iter().enumerate() {
        match arg {
            Arg::Gate(g) => compiled.push(Some(compile(g, identities)?)),
            Arg::Principal { mspid, role } => {
                compiled.push(None);
                principals.push((i, mspid, role));
            }
        }
    }
    for (i, mspid, role) in principals {
        let index = i32::try_from(identities.len())
            .map_err(|_| ConfigtxgenError::policy("", "too many principals in one policy"))?;
        identities.push(MspPrincipal {
            principal_classification: msp_principal::Classification::Role as i32,
            principal: Bytes::from(MspRole { msp_identifier: mspid, role: role as i32 }.encode_to_vec()),
        });
        compiled[i] = Some(SignaturePolicy { r#type: Some(signature_policy::Type::SignedBy(index)) });
    }
    let n = i32::try_from(gate.threshold).map_err(|_| ConfigtxgenError::policy("", "threshold too large"))?;
    Ok(SignaturePolicy {
        r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf {
            n,
            rules: compiled.into_iter().flatten().collect(),
        })),
    })
}

/// Parses a signature policy in Fabric's DSL into the `SignaturePolicyEnvelope` configtxgen encodes
/// (version 0): `AND(p, ...)` (all of), `OR(p, ...)` (one of) and `OutOf(n, p, ...)` (`n` of; `n` may be
/// quoted), nested freely, over principals `'<MSP ID>.<role>'` (single or double quotes; role `member`,
/// `admin`, `client`, `peer` or `orderer`). Each principal becomes an MSPRole identity, numbered as Fabric
/// numbers them (nested gates first).
///
/// Errors: [`ConfigtxgenError::Policy`] for anything else (unknown gate or token, malformed principal,
/// missing arguments, a threshold outside `0..=n+1`). String escapes are not supported.
///
/// ```
/// let env = ferrofabric_configtxgen::signature_policy("OR('Org1MSP.peer', AND('A.admin', 'B.member'))")?;
/// assert_eq!(env.identities.len(), 3);
/// # Ok::<(), ferrofabric_configtxgen::ConfigtxgenError>(())
/// ```
pub fn signature_policy(rule: &str) -> Result<SignaturePolicyEnvelope, ConfigtxgenError> {
    let mut parser = Parser { rule, tokens: tokenize(rule)?, pos: 0 };
    let gate = match parser.next() {
        Some(Token::Ident(name)) => parser.gate(&name)?,
        Some(Token::Str(s)) => return Err(parser.err(format!("a policy must be a gate, not the string '{s}'"))),
        None => return Err(parser.err("empty policy")),
        Some(_) => return Err(parser.err("a policy must start with AND, OR or OutOf")),
    };
    if parser.pos < parser.tokens.len() {
        return Err(parser.err("unexpected text after the policy"));
    }
    let mut identities = Vec::new();
    let rule_policy = compile(gate, &mut identities).map_err(|e| match e {
        ConfigtxgenError::Policy { reason, .. } => ConfigtxgenError::policy(rule, reason),
        other => other,
    })?;
    Ok(SignaturePolicyEnvelope { version: 0, rule: Some(rule_policy), identities })
}

/// Parses an `ImplicitMeta` rule, `<ANY|ALL|MAJORITY> <sub-policy>` (exactly one space between the two
/// tokens, rule names in upper case, as Fabric requires).
///
/// Errors: [`ConfigtxgenError::Policy`] for another token count or rule name.
pub fn implicit_meta_policy(rule: &str) -> Result<ImplicitMetaPolicy, ConfigtxgenError> {
    let parts: Vec<&str> = rule.split(' ').collect();
    let [kind, sub_policy] = parts[..] else {
        return Err(ConfigtxgenError::policy(
            rule,
            format!("expected two space separated tokens, but got {}", parts.len()),
        ));
    };
    let kind = match kind {
        "ANY" => implicit_meta_policy::Rule::Any,
        "ALL" => implicit_meta_policy::Rule::All,
        "MAJORITY" => implicit_meta_policy::Rule::Majority,
        other => {
            return Err(ConfigtxgenError::policy(
                rule,
                format!("unknown rule type '{other}', expected ALL, ANY, or MAJORITY"),
            ))
        }
    };
    Ok(ImplicitMetaPolicy { sub_policy: sub_policy.to_string(), rule: kind as i32 })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use msp_role::MspRoleType::{Admin, Client, Member, Orderer, Peer};

    fn role(mspid: &str, role: msp_role::MspRoleType) -> MspPrincipal {
        MspPrincipal {
            principal_classification: 0,
            principal: Bytes::from(MspRole { msp_identifier: mspid.into(), role: role as i32 }.encode_to_vec()),
        }
    }

    fn signed_by(i: i32) -> SignaturePolicy {
        SignaturePolicy { r#type: Some(signature_policy::Type::SignedBy(i)) }
    }

    fn n_out_of(n: i32, rules: Vec<SignaturePolicy>) -> SignaturePolicy {
        SignaturePolicy { r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf { n, rules })) }
    }

    fn env(rule: SignaturePolicy, identities: Vec<MspPrincipal>) -> SignaturePolicyEnvelope {
        SignaturePolicyEnvelope { version: 0, rule: Some(rule), identities }
    }

    #[test]
    fn gates_and_thresholds() {
        let two = vec![role("A", Member), role("B", Member)];
        assert_eq!(
            signature_policy("OutOf(1, 'A.member', 'B.member')").unwrap(),
            env(n_out_of(1, vec![signed_by(0), signed_by(1)]), two.clone())
        );
        assert_eq!(
            signature_policy("OutOf('2', 'A.member', 'B.member')").unwrap(),
            env(n_out_of(2, vec![signed_by(0), signed_by(1)]), two.clone())
        );
        assert_eq!(
            signature_policy("AND('A.member', 'B.member')").unwrap(),
            env(n_out_of(2, vec![signed_by(0), signed_by(1)]), two.clone())
        );
        assert_eq!(
            signature_policy("or(\"A.member\",\"B.member\")").unwrap(),
            env(n_out_of(1, vec![signed_by(0), signed_by(1)]), two.clone())
        );
        assert_eq!(
            signature_policy("OutOf(0, 'A.member', 'B.member')").unwrap(),
            env(n_out_of(0, vec![signed_by(0), signed_by(1)]), two.clone())
        );
        assert!(signature_policy("OutOf(3, 'A.member', 'B.member')").is_ok());
        for bad in ["OutOf(4, 'A.member', 'B.member')", "OutOf(-1, 'A.member', 'B.member')"] {
            assert!(signature_policy(bad).unwrap_err().to_string().contains("invalid t-out-of-n"), "{bad}");
        }
    }

    #[test]
    fn nested_principals_are_numbered_first() {
        assert_eq!(
            signature_policy("OR('A.member', AND('B.member', 'C.member'))").unwrap(),
            env(
                n_out_of(1, vec![signed_by(2), n_out_of(2, vec![signed_by(0), signed_by(1)])]),
                vec![role("B", Member), role("C", Member), role("A", Member)]
            )
        );
        assert_eq!(
            signature_policy("OR(AND('A.member', 'B.member'), OR('C.admin', 'D.member'))").unwrap(),
            env(
                n_out_of(
                    1,
                    vec![n_out_of(2, vec![signed_by(0), signed_by(1)]), n_out_of(1, vec![signed_by(2), signed_by(3)])]
                ),
                vec![role("A", Member), role("B", Member), role("C", Admin), role("D", Member)]
            )
        );
    }

    #[test]
    fn roles_and_msp_ids_with_dots_and_dashes() {
        let p =
            signature_policy("OR('A.peer', 'B.admin', 'C.orderer', 'D.client', 'MSP.WITH.DOTS.member', 'M-X.peer')")
                .unwrap();
        assert_eq!(
            p.identities,
            vec![
                role("A", Peer),
                role("B", Admin),
                role("C", Orderer),
                role("D", Client),
                role("MSP.WITH.DOTS", Member),
                role("M-X", Peer)
            ]
        );
    }

    #[test]
    fn bad_rules_are_errors() {
        for bad in [
            "",
            "''",
            "'A.member'",
            "OR('A.member', Bmember)",
            "OR('A.member', 'Bmember')",
            "OR('A.member', 'B.boss')",
            "OR('.member')",
            "OR('A B.member')",
            "OutOf(1)",
            "OutOf(1, 2)",
            "OutOf(true, 'A.member')",
            "OutOf(AND('A.member'), 'B.member')",
            "AND()",
            "XOR('A.member')",
            "OR('A.member'",
            "OR('A.member')) ",
            "OR('A.member' 'B.member')",
            "OR('A.member)",
            "OR('A.member') OR('B.member')",
            "OutOf(99999999999999999999, 'A.member')",
        ] {
            assert!(matches!(signature_policy(bad), Err(ConfigtxgenError::Policy { .. })), "{bad:?}");
        }
    }

    #[test]
    fn implicit_meta_rules() {
        assert_eq!(
            implicit_meta_policy("ANY Readers").unwrap(),
            ImplicitMetaPolicy { sub_policy: "Readers".into(), rule: implicit_meta_policy::Rule::Any as i32 }
        );
        assert_eq!(implicit_meta_policy("MAJORITY Endorsement").unwrap().rule, 2);
        assert_eq!(implicit_meta_policy("ALL Admins").unwrap().rule, 1);
        for bad in ["ANY", "ANY  Readers", "any Readers", "SOME Readers", "ANY Readers extra", ""] {
            assert!(implicit_meta_policy(bad).is_err(), "{bad:?}");
        }
    }
}
