//! Fabric's X.509 membership service provider (MSP) for Ferrofabric.
//!
//! Follows Hyperledger Fabric 2.5 `msp/` (mspimpl.go, mspimplsetup.go,
//! mspimplvalidate.go, identities.go, cert.go, mspmgrimpl.go) with MSP
//! version 1.4.3 semantics, and `bccsp/sw` + `bccsp/utils/ecdsa.go` for
//! signatures:
//!
//! * [`PublicKey::verify`]: ECDSA P-256 / SHA-256, signature decoded with
//!   Go `asn1.Unmarshal` rules, low-S enforced, verified by `ferrofabric-ecdsa`.
//! * [`Msp::from_config`]: an MSP from a channel's `MSPConfig` (roots,
//!   intermediates, admins, CRLs, OU identifiers, NodeOUs).
//! * [`MspManager`]: the MSPs of a channel, an identity cache keyed by the
//!   SerializedIdentity bytes, and [`MspManager::satisfies_principal`].
//! * [`SigningIdentity`]: signing with a cryptogen key (low-S DER output).
//!
//! Certificate chains are verified with Go `x509.Verify` semantics at the
//! time Fabric uses (the certificate's NotBefore + 1 s), including Go's
//! default server-auth extended key usage filter.

mod asn1;
mod cert;
mod chain;
mod crl;
mod dir;
mod ecdsa;
mod error;
mod identifier;
mod manager;
mod msp;
mod pem;
mod signing;

pub use dir::msp_config_from_dir;
pub use ecdsa::{verify_batch, PublicKey};
pub use error::MspError;
pub use identifier::{IdentityIdentifier, OrganizationalUnit};
pub use manager::MspManager;
pub use msp::{Identity, Msp};
pub use signing::SigningIdentity;

#[cfg(test)]
mod tests {
    #[test]
    fn shared_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<crate::MspManager>();
        check::<crate::Identity>();
        check::<crate::Msp>();
        check::<crate::SigningIdentity>();
        check::<crate::MspError>();
    }
}
