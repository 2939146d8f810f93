//! The `cmm` compiler driver.
fn main() {}
