//! The `cmm` compiler driver: `cmm compile`, `cmm run` and `cmm check` (see `cmm --help`).

mod cli;
mod driver;
mod error;
mod link;
mod runtime;

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _};

fn main() -> ExitCode {
    // The version names the targets whose runtimes this binary carries (known at build time).
    let version: &'static str = Box::leak(runtime::version_text().into_boxed_str());
    let matches = cli::Cli::command().version(version).get_matches();
    let cli = match cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
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
