//! The `cmm` compiler driver: `cmm compile`, `cmm run` and `cmm check` (see `cmm --help`).

mod cli;
mod driver;
mod error;
mod link;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match &cli.command {
        cli::Command::Compile(args) => driver::compile(args),
        cli::Command::Run(args) => driver::run(args),
        cli::Command::Check(args) => driver::check(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(e.status)
        }
    }
}
