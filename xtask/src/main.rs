//! Project automation: setup, test, experiments.
fn main() {}
