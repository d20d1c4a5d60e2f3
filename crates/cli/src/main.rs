//! The `ctxlog` command line: parse flags, call the facade, print. Exit codes are part of the
//! contract scripts rely on (docs/design.md#i2-command-line):
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
//! | 8 | `verify`: the ledger is intact, but a cache (sidecar or recall index) or a leftover (a torn tail) needs attention |

mod args;
mod commands;
mod demo;
mod output;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let json_errors = cli.json;
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(json_errors),
    }
}

/// `--help` and `--version` print as clap renders them; a real usage error becomes one line
/// (or one JSON object with `--json`) and exit 2.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    // clap's message is the first paragraph (continuation lines are indented, e.g. the
    // missing arguments); usage and tips follow a blank line.
    let rendered = e.render().to_string();
    let paragraph: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect();
    let joined = paragraph.join(" ");
    let message = joined.strip_prefix("error: ").unwrap_or(&joined);
    let json = std::env::args_os().any(|a| a == "--json");
    let message = if message.is_empty() {
        "invalid arguments"
    } else {
        message
    };
    output::Failure::with_code(2, "usage", format!("{message} (see `ctxlog --help`)")).report(json)
}
