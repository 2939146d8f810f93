//! How the harness's records go into a run's parts (`part`, JSON) and come back: experiment
//! names, which the records carry as `&'static str`, and times that may be NaN (a run that
//! timed out has no CPU times), which JSON cannot hold.

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

/// An `f64` that may be NaN, as a JSON number or `null`.
pub mod maybe_nan {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}
