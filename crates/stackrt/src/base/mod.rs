//! The base layer of the runtime: what every other layer may use and which imports nothing
//! else of the crate. The ABI shared with the compiler ([`abi`]), the program's own symbols
//! ([`program`], through [`weak`] references), one-line fatal messages and exit reports
//! ([`diag`]), operating-system helpers ([`os`]), spin locks ([`spin`]), the registers of
//! an interrupted context ([`ucontext`]) and the C calls in progress ([`ccalls`]).
//!
//! The layers above, lowest first: `chunk` (stack memory), `mech` (the mechanisms' runtime
//! halves), `signals`, `green`, `threads` (the `sthread_*` library), `start` (program start).
//! A file imports only its own layer's lower files and lower layers; `tests/tidy.rs` checks it.

pub mod abi;
pub mod ccalls;
pub mod diag;
pub mod os;
pub mod program;
pub mod spin;
pub mod tls;
pub mod ucontext;
pub mod weak;
