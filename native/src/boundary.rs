//! What crosses the Python boundary when something goes wrong.
//!
//! `NativeError(code, message)` carries a MongoDB error code (the Python facade
//! `storage/native.py` turns it into `storage.errors.MongoError`); `Declined` says the
//! native path cannot reproduce the Python reference for this input and the caller
//! should use the reference. `guard` runs an entry point's work and turns a panic, which
//! is always a bug, into a `NativeError` with code 1 (InternalError) for that call, so a
//! panic never unwinds into the interpreter and never takes the server down.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _native,
    NativeError,
    PyException,
    "An error with a MongoDB code: args are (code, message)."
);
create_exception!(
    _native,
    Declined,
    PyException,
    "The native path cannot reproduce the Python reference for this input."
);

/// MongoDB's InternalError: only ever for a bug here, never for what a client sent.
pub const INTERNAL_ERROR: i32 = 1;

/// A `NativeError` with MongoDB's `code`.
pub fn native_error(code: i32, message: impl Into<String>) -> PyErr {
    NativeError::new_err((code, message.into()))
}

/// Runs `work`, turning a panic into a `NativeError` (InternalError) naming `entry`.
pub fn guard<T>(entry: &str, work: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(payload) => Err(panicked(entry, payload)),
    }
}

/// The `NativeError` (InternalError) for a panic caught in `entry`.
pub fn panicked(entry: &str, payload: Box<dyn Any + Send>) -> PyErr {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    native_error(
        INTERNAL_ERROR,
        format!("native core panicked in {entry}: {what}"),
    )
}

/// `_native.panic_for_test()`: panics inside `guard`, so tests can see a panic become an
/// exception for that call.
#[pyfunction]
fn panic_for_test() -> PyResult<()> {
    guard("panic_for_test", || panic!("deliberate panic"))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("NativeError", py.get_type::<NativeError>())?;
    m.add("Declined", py.get_type::<Declined>())?;
    m.add_function(wrap_pyfunction!(panic_for_test, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_a_panic_into_an_internal_error() {
        Python::initialize();
        let err = guard("t", || -> PyResult<()> { panic!("boom") }).unwrap_err();
        Python::attach(|py| {
            let args = err.value(py).getattr("args").unwrap();
            let (code, message): (i32, String) = args.extract().unwrap();
            assert_eq!(code, INTERNAL_ERROR);
            assert!(message.contains("boom") && message.contains("in t"));
        });
    }

    #[test]
    fn guard_passes_results_through() {
        assert_eq!(guard("t", || Ok(7)).unwrap(), 7);
    }
}
