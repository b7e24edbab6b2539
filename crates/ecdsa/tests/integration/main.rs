//! Verdicts of the table-based verifier against aws-lc's on random valid and tampered signatures.

mod agreement;
