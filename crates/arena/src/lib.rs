//! Ferrofabric arena (work in progress).
