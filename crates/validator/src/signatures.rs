//! Who verifies the ECDSA signatures of a block: this validator, or a trusted verifier whose verdicts it takes.

use ferrofabric_protos::peer::TxValidationCode;

/// Who verifies the ECDSA signatures of a block.
#[derive(Clone, Copy)]
pub(crate) enum Signatures<'a> {
    /// This validator, as a Fabric peer does.
    Verify,
    /// A trusted verifier, whose codes for the block's transactions these are (`Validator::commit_block_attested`).
    Attested(&'a [TxValidationCode]),
}

impl Signatures<'_> {
    /// Whether transaction `i`'s creator signature is to be verified (`None`) or is taken as given.
    pub(crate) fn creator(&self, i: usize) -> Option<bool> {
        match self {
            Signatures::Verify => None,
            Signatures::Attested(codes) => Some(codes.get(i) != Some(&TxValidationCode::BadCreatorSignature)),
        }
    }

    /// Whether transaction `i`'s endorsement signatures are to be verified (`None`) or are taken as all valid
    /// (`Some(true)`) or as satisfying no policy (`Some(false)`).
    pub(crate) fn endorsements(&self, i: usize) -> Option<bool> {
        match self {
            Signatures::Verify => None,
            Signatures::Attested(codes) => Some(codes.get(i) != Some(&TxValidationCode::EndorsementPolicyFailure)),
        }
    }
}
