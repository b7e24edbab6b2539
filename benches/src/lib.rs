//! Whole-system criterion suites of Ferrofabric (`cargo bench -p ferrofabric-benches`): the suites live in
//! `benches/benches/`; this library is empty.
