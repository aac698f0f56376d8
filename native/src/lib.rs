//! bucketd's native core: the Python extension module `storage._native`.
//!
//! One crate, modules by concept, each naming its Python reference. The boundary is
//! coarse (one call per batch or per column): bytes in, bytes out, the GIL released for
//! the work on bytes, and a panic turned into `NativeError` for that call (`boundary`).

pub mod blocks;
pub mod boundary;
pub mod bsoncolumn;
pub mod bucket;
pub mod control;
pub mod fixed_width;
pub mod keystring;
pub mod measurements;

use pyo3::prelude::*;

/// The core's own allocations go to mimalloc: buckets' builders made on Python's thread
/// grow and shrink on rayon's, and glibc's arenas serialised those frees and reallocs
/// behind a lock (a third of the fold's time went to the allocator and its futex).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The crate's version, for the start-up log line that says which path is in use.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(version, m)?)?;
    boundary::register(m)?;
    bsoncolumn::register(m)?;
    measurements::bindings::register(m)?;
    control::bindings::register(m)?;
    bucket::register(m)?;
    blocks::register(m)?;
    keystring::register(m)?;
    Ok(())
}
