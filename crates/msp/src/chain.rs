//! Certificate chain building with the semantics of Go's
//! `(*x509.Certificate).Verify` as Fabric calls it (msp/mspimpl.go
//! `getUniqueValidationChain`): roots and intermediates pools, no DNS name,
//! default key usage (server auth), and an explicit verification time.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cert::{Cert, CertKey};

/// Go's `maxChainSignatureChecks`.
const MAX_SIGNATURE_CHECKS: usize = 100;

/// A set of certificates indexed by subject (Go's `CertPool`): adding the
/// same DER twice keeps one copy.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pool {
    certs: Vec<Arc<Cert>>,
    by_subject: HashMap<Vec<u8>, Vec<usize>>,
}

impl Pool {
    pub(crate) fn add(&mut self, cert: Arc<Cert>) {
        if self.contains(&cert) {
            return;
        }
        self.by_subject.entry(cert.raw_subject().to_vec()).or_default().push(self.certs.len());
        self.certs.push(cert);
    }

    pub(crate) fn contains(&self, cert: &Cert) -> bool {
        self.by_subject.get(cert.raw_subject()).is_some_and(|ids| ids.iter().any(|&i| self.certs[i].same_as(cert)))
    }

    /// Candidates whose subject is `cert`'s issuer: those whose subject key
    /// id matches its authority key id first, then those where only one of
    /// the two ids is present, then mismatches (Go's `findPotentialParents`).
    fn potential_parents(&self, cert: &Cert) -> Vec<&Arc<Cert>> {
        let Some(ids) = self.by_subject.get(cert.raw_issuer()) else {
            return Vec::new();
        };
        let empty = Vec::new();
        let aki = cert.authority_key_id.as_ref().unwrap_or(&empty);
        let mut ranked: Vec<(u8, &Arc<Cert>)> = ids
            .iter()
            .map(|&i| {
                let c = &self.certs[i];
                let ski = c.subject_key_id.as_ref().unwrap_or(&empty);
                let rank = if ski == aki {
                    0
                } else if ski.is_empty() != aki.is_empty() {
                    1
                } else {
                    2
                };
                (rank, c)
            })
            .collect();
        ranked.sort_by_key(|(rank, _)| *rank);
        ranked.into_iter().map(|(_, c)| c).collect()
    }
}

/// Go's certificate roles in `isValid`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Leaf,
    Intermediate,
    Root,
}

/// Go's `isValid` for the checks that apply to Fabric's certificates.
fn is_valid(c: &Cert, role: Role, chain: &[Arc<Cert>], now: i64) -> Result<(), String> {
    if c.has_unhandled_critical {
        return Err("unhandled critical extension".into());
    }
    if let Some(child) = chain.last() {
        if child.raw_issuer() != c.raw_subject() {
            return Err("issuer name does not match subject from issuing certificate".into());
        }
    }
    if now < c.not_before {
        return Err("certificate has expired or is not yet valid (not yet valid)".into());
    }
    if now > c.not_after {
        return Err("certificate has expired or is not yet valid (expired)".into());
    }
    if role != Role::Leaf && c.has_name_constraints {
        // Go checks the leaf's SANs against the constraints; we do not
        // implement that and refuse the chain rather than accept wrongly.
        return Err("CA certificates with name constraints are not supported".into());
    }
    if role == Role::Intermediate && (!c.basic_constraints_valid || !c.is_ca) {
        return Err("certificate is not authorized to sign other certificates".into());
    }
    if c.basic_constraints_valid && c.max_path_len >= 0 {
        let intermediates = chain.len() as i64 - 1;
        if intermediates > c.max_path_len {
            return Err("too many intermediates for path length constraint".into());
        }
    }
    Ok(())
}

/// Go's `alreadyInChain`: same subject, same key and same SAN extension.
fn already_in_chain(candidate: &Cert, chain: &[Arc<Cert>]) -> bool {
    for c in chain {
        if c.raw_subject() != candidate.raw_subject() || c.raw_public_key() != candidate.raw_public_key() {
            continue;
        }
        match (&candidate.san_value, &c.san_value) {
            (None, None) => return true,
            (Some(a), Some(b)) => {
                if a == b {
                    return true;
                }
            }
            _ => return false,
        }
    }
    false
}

struct Search<'a> {
    roots: &'a Pool,
    intermediates: &'a Pool,
    now: i64,
    signature_checks: usize,
}

impl Search<'_> {
    fn build(&mut self, chain: &[Arc<Cert>]) -> Result<Vec<Vec<Arc<Cert>>>, String> {
        let Some(current) = chain.last() else {
            return Err("empty chain".into());
        };
        let mut chains = Vec::new();
        let mut last_err: Option<String> = None;
        let candidates: Vec<(Role, Arc<Cert>)> = self
            .roots
            .potential_parents(current)
            .into_iter()
            .map(|c| (Role::Root, c.clone()))
            .chain(self.intermediates.potential_parents(current).into_iter().map(|c| (Role::Intermediate, c.clone())))
            .collect();
        for (role, candidate) in candidates {
            if matches!(candidate.key, CertKey::Other("unknown public key algorithm"))
                || already_in_chain(&candidate, chain)
            {
                continue;
            }
            self.signature_checks += 1;
            if self.signature_checks > MAX_SIGNATURE_CHECKS {
                last_err = Some("signature check attempts limit reached while verifying certificate chain".into());
                continue;
            }
            if let Err(e) = current.check_signature_from(&candidate) {
                last_err.get_or_insert(e);
                continue;
            }
            if let Err(e) = is_valid(&candidate, role, chain, self.now) {
                last_err.get_or_insert(e);
                continue;
            }
            let mut next = chain.to_vec();
            next.push(candidate);
            match role {
                Role::Root => chains.push(next),
                _ => match self.build(&next) {
                    Ok(found) => chains.extend(found),
                    Err(e) => last_err = Some(e),
                },
            }
        }
        if chains.is_empty() {
            Err(format!(
                "certificate signed by unknown authority{}",
                last_err.map(|e| format!(" ({e})")).unwrap_or_default()
            ))
        } else {
            Ok(chains)
        }
    }
}

/// All verified chains from `leaf` (element 0) to a root of `roots`, at
/// Unix time `now`, filtered for Go's default server-auth key usage.
pub(crate) fn verify(
    leaf: &Arc<Cert>,
    roots: &Pool,
    intermediates: &Pool,
    now: i64,
) -> Result<Vec<Vec<Arc<Cert>>>, String> {
    is_valid(leaf, Role::Leaf, &[], now)?;
    let chains = if roots.contains(leaf) {
        vec![vec![leaf.clone()]]
    } else {
        let mut search = Search { roots, intermediates, now, signature_checks: 0 };
        search.build(std::slice::from_ref(leaf))?
    };
    let usable: Vec<_> = chains.into_iter().filter(|chain| !chain.iter().any(|c| c.eku_excludes_server_auth)).collect();
    if usable.is_empty() {
        return Err("certificate specifies an incompatible key usage".into());
    }
    Ok(usable)
}

/// Fabric's `getUniqueValidationChain`: exactly one chain, plus Fabric's
/// re-creation of Go 1.14's name-constraint rule for leaves without SANs
/// (our chains never contain name-constrained CAs, see `is_valid`).
pub(crate) fn unique_chain(
    leaf: &Arc<Cert>,
    roots: &Pool,
    intermediates: &Pool,
    now: i64,
) -> Result<Vec<Arc<Cert>>, String> {
    let mut chains =
        verify(leaf, roots, intermediates, now).map_err(|e| format!("the supplied identity is not valid: {e}"))?;
    if chains.len() != 1 {
        return Err(format!("this MSP only supports a single validation chain, got {}", chains.len()));
    }
    Ok(chains.swap_remove(0))
}
