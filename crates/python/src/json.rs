//! Values across the boundary by way of their JSON: responses are serialized by serde (their
//! documented format) and read by Python's `json`; Python values going in are written by
//! `json.dumps` and parsed by serde. One rule for every type, and what Python sees is
//! exactly what the CLI prints and the server sends.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::bad_input;

/// A serde value as the Python object `json.loads` makes of its JSON.
pub fn to_py<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value).map_err(|e| bad_input(e.to_string()))?;
    py.import("json")?.call_method1("loads", (text,))
}

/// `json.loads(text)` for a str or bytes object.
pub fn loads<'py>(py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// A Python value (dicts, lists, str, numbers, bools, None) as JSON; anything `json.dumps`
/// refuses raises `BadInput`.
pub fn from_py(value: &Bound<'_, PyAny>) -> PyResult<serde_json::Value> {
    let py = value.py();
    let kwargs = PyDict::new(py);
    kwargs.set_item("ensure_ascii", false)?;
    kwargs.set_item("allow_nan", false)?;
    let text: String = py
        .import("json")?
        .call_method("dumps", (value,), Some(&kwargs))
        .map_err(|e| bad_input(format!("not JSON-serializable: {e}")))?
        .extract()?;
    ctxlog::json::from_str(&text).map_err(|e| bad_input(e.to_string()))
}
