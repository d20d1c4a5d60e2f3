//! Printing results and failures: stdout for results, one line on stderr for errors.

use std::io::{self, Write};
use std::process::ExitCode;

use ctxlog::{Error, ErrorClass};

/// A failed command: its exit code and a one-line message.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    kind: &'static str,
    message: String,
}

impl Failure {
    /// Any other failure (exit 1).
    pub fn other(message: impl Into<String>) -> Self {
        Failure {
            code: 1,
            kind: "error",
            message: message.into(),
        }
    }

    /// `verify` found the ledger intact but a cache or leftover that needs attention (exit 8).
    pub fn attention(message: impl Into<String>) -> Self {
        Failure::with_code(8, "attention", message)
    }

    /// A failure with an explicit code.
    pub fn with_code(code: u8, kind: &'static str, message: impl Into<String>) -> Self {
        Failure {
            code,
            kind,
            message: message.into(),
        }
    }

    /// The reader of stdout went away (e.g. `ctxlog log c | head`): stop quietly, exit 0.
    fn closed_stdout() -> Self {
        Failure::with_code(0, "closed_stdout", "")
    }

    /// Prints the failure to stderr (as one line of text, or one JSON object with `--json`)
    /// and returns its exit code.
    pub fn report(self, json: bool) -> ExitCode {
        if self.code == 0 {
            return ExitCode::SUCCESS;
        }
        let line = if json {
            serde_json::json!({"error": self.kind, "code": self.code, "message": self.message})
                .to_string()
        } else {
            format!("ctxlog: {}", self.message)
        };
        let _ = writeln!(io::stderr().lock(), "{line}");
        ExitCode::from(self.code)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let code = match e.class() {
            ErrorClass::Usage => 2,
            ErrorClass::OverBudget => 3,
            ErrorClass::Locked | ErrorClass::Busy => 4,
            ErrorClass::Corrupt => 5,
            ErrorClass::Conflict => 6,
            ErrorClass::Lost => 7,
            _ => 1,
        };
        let kind = e.class().name();
        let mut message = e.to_string();
        if let Some(hint) = hint(&e) {
            message.push_str("; ");
            message.push_str(hint);
        }
        Failure::with_code(code, kind, message)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::other(e.to_string())
    }
}

/// What to do next, for the errors where that is not obvious from the message.
fn hint(e: &Error) -> Option<&'static str> {
    match e.class() {
        ErrorClass::Locked => {
            Some("another process is writing this conversation; retry when it is done")
        }
        ErrorClass::Corrupt => Some("nothing was changed"),
        ErrorClass::NotFound => Some("commit a turn first or check --root"),
        ErrorClass::IndexDamaged => Some(
            "the recall index is a cache and the ledger is intact: `ctxlog reindex CONV` rebuilds it",
        ),
        _ => None,
    }
}

/// Writes `bytes` to stdout and flushes. A closed pipe (the reader went away) ends the
/// command quietly with exit 0, so no further work is done for nobody.
pub fn stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Failure::closed_stdout()),
        Err(e) => Err(Failure::other(format!(
            "cannot write to standard output: {e}"
        ))),
    }
}

/// Writes `value` as compact JSON plus a newline to stdout.
pub fn json_line(value: &impl serde::Serialize) -> Result<(), Failure> {
    let mut bytes = serde_json::to_vec(value).map_err(|e| Failure::other(e.to_string()))?;
    bytes.push(b'\n');
    stdout(&bytes)
}
