//! The `ctxlog` command line: parse flags, call the facade, print. Exit codes are part of the
//! contract scripts rely on (SPEC I2):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success (also when stdout is closed early, e.g. piped into `head`) |
//! | 1 | any other error |
//! | 2 | usage: bad flags or arguments |
//! | 3 | the mandatory input exceeds the budget |
//! | 4 | the conversation is locked by another writer |
//! | 5 | corruption detected |
//! | 6 | commit id conflict |

mod args;
mod commands;
mod demo;
mod output;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json_errors = cli.json;
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(json_errors),
    }
}
