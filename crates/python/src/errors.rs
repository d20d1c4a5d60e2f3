//! One Python exception per [`ctxlog::ErrorClass`], all under `ctxlog.Error`, with the
//! details a caller acts on as attributes.

use ctxlog::ErrorClass;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    ctxlog,
    Error,
    PyException,
    "Base class of every ctxlog error."
);
create_exception!(
    ctxlog,
    UsageError,
    Error,
    "The arguments are wrong (a bad name, budget, range or option); nothing was touched."
);
create_exception!(
    ctxlog,
    BadInput,
    Error,
    "The data given is wrong (an invalid turn, unknown event kind, a cap exceeded); nothing was written."
);
create_exception!(
    ctxlog,
    MandatoryExceedsBudget,
    Error,
    "The system prompt and input alone exceed the budget; `needed_bytes` and `needed_tokens` say what they need. The ledger is unchanged."
);
create_exception!(
    ctxlog,
    Locked,
    Error,
    "Another writer (another process or Store) holds the conversation."
);
create_exception!(
    ctxlog,
    Busy,
    Error,
    "Other commits of this process held the conversation's writer past the store's writer_wait; retry."
);
create_exception!(
    ctxlog,
    Corrupt,
    Error,
    "The ledger or an artifact is damaged; `offset` and `seq` name the record (None when unknown). Nothing was changed."
);
create_exception!(
    ctxlog,
    Conflict,
    Error,
    "The commit id was used before with different content."
);
create_exception!(
    ctxlog,
    Lost,
    Error,
    "The commit id names a commit lost to damage and given up by a repair; its seqs are never handed out again."
);
create_exception!(
    ctxlog,
    NotFound,
    Error,
    "The conversation does not exist (read-only operations never create one)."
);

create_exception!(
    ctxlog,
    Unavailable,
    Error,
    "The store's database cannot be reached (down, restarting, connection lost); nothing was acknowledged: retry."
);
create_exception!(
    ctxlog,
    IndexDamaged,
    Error,
    "The conversation's recall index is damaged. It is a cache and the ledger is intact: Conversation.reindex() rebuilds it."
);

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    m.add("BadInput", py.get_type::<BadInput>())?;
    m.add(
        "MandatoryExceedsBudget",
        py.get_type::<MandatoryExceedsBudget>(),
    )?;
    m.add("Locked", py.get_type::<Locked>())?;
    m.add("Busy", py.get_type::<Busy>())?;
    m.add("Corrupt", py.get_type::<Corrupt>())?;
    m.add("Conflict", py.get_type::<Conflict>())?;
    m.add("Lost", py.get_type::<Lost>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add("Unavailable", py.get_type::<Unavailable>())?;
    m.add("IndexDamaged", py.get_type::<IndexDamaged>())?;
    Ok(())
}

/// A usage error raised by the adapter itself (an argument Python accepted but ctxlog does
/// not).
pub fn usage(message: String) -> PyErr {
    with_class(UsageError::new_err(message), ErrorClass::Usage)
}

/// Bad data raised by the adapter itself (a value that is not JSON).
pub fn bad_input(message: String) -> PyErr {
    with_class(BadInput::new_err(message), ErrorClass::BadInput)
}

/// `err` with its `error_class` attribute, as every ctxlog exception has.
fn with_class(err: PyErr, class: ErrorClass) -> PyErr {
    Python::attach(|py| {
        // Best effort, like the details below: the message says everything.
        let _ = err.value(py).setattr("error_class", class.name());
    });
    err
}

/// The exception for `e`: its class by [`ctxlog::Error::class`], its message the error's
/// text, and `error_class` plus the class's details as attributes.
pub fn into_py_err(py: Python<'_>, e: &ctxlog::Error) -> PyErr {
    let message = e.to_string();
    let err = match e.class() {
        ErrorClass::Usage => UsageError::new_err(message),
        ErrorClass::BadInput => BadInput::new_err(message),
        ErrorClass::OverBudget => MandatoryExceedsBudget::new_err(message),
        ErrorClass::Locked => Locked::new_err(message),
        ErrorClass::Busy => Busy::new_err(message),
        ErrorClass::Corrupt => Corrupt::new_err(message),
        ErrorClass::Conflict => Conflict::new_err(message),
        ErrorClass::Lost => Lost::new_err(message),
        ErrorClass::NotFound => NotFound::new_err(message),
        ErrorClass::Unavailable => Unavailable::new_err(message),
        ErrorClass::IndexDamaged => IndexDamaged::new_err(message),
        _ => Error::new_err(message),
    };
    let name = e.class().name();
    // Attributes are best effort: an exception without them still says everything in its
    // message.
    let _ = set_details(py, &err, e, name);
    err
}

fn set_details(py: Python<'_>, err: &PyErr, e: &ctxlog::Error, name: &str) -> PyResult<()> {
    let value = err.value(py);
    value.setattr("error_class", name)?;
    if let Some(shortfall) = e.shortfall() {
        value.setattr("needed_bytes", shortfall.needed_bytes)?;
        value.setattr("needed_tokens", shortfall.needed_tokens)?;
    }
    if e.class() == ErrorClass::Corrupt {
        let (offset, seq) = match e.corruption() {
            Some(c) => (Some(c.offset), c.seq),
            None => (None, None),
        };
        value.setattr("offset", offset)?;
        value.setattr("seq", seq)?;
    }
    Ok(())
}
