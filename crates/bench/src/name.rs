//! Experiment names as the harness's records carry them (`&'static str`), and reading them
//! back from a run's parts (`part`).

use serde::Deserialize;

/// An experiment's name in the harness's records (an alias: written as `&'static str`, serde's
/// derive would borrow it from the input, which a part read from a file cannot lend).
pub type Name = &'static str;

/// Deserializes an experiment's name into a [`Name`] (a name read back from a part lives as
/// long as the run).
pub fn static_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
    let s = String::deserialize(d)?;
    Ok(Box::leak(s.into_boxed_str()))
}
