//! The `ferrofabric` command.
fn main() {}
