//! Ferrofabric validator (work in progress).
