//! The extension's allocator (mimalloc, the `#[global_allocator]` of this crate) and the
//! one setting of it a caller may change: how soon freed pages go back to the system.
//!
//! mimalloc keeps a freed page resident for `purge_delay` ms (its default: 10), and the
//! delayed purge runs only on a later call into the allocator from the same thread. In
//! the worker, where every batch's decoding and COPY encoding allocates on the event
//! loop's thread, that left 4-10 MB of freed pages resident between bursts (soak,
//! docs/benchmarks.md). The server purges at once (`edgesync.server._heap`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

// `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (libmimalloc-sys names no
// constant for it). tests/server/test_heap_trim.py checks the number against the option
// mimalloc reads from MIMALLOC_PURGE_DELAY.
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Milliseconds mimalloc keeps freed pages resident before giving them back.
#[pyfunction]
#[allow(clippy::useless_conversion)] // `c_long` is 32 bits on armv7, 64 on x86_64
pub(crate) fn heap_purge_delay() -> i64 {
    // SAFETY: reading an option has no precondition.
    i64::from(unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY) })
}

/// Set `heap_purge_delay`: 0 gives freed pages back at once, -1 never.
#[pyfunction]
#[allow(clippy::useless_conversion)] // `c_long` is 32 bits on armv7, 64 on x86_64
pub(crate) fn set_heap_purge_delay(ms: i64) -> PyResult<()> {
    let value = std::os::raw::c_long::try_from(ms)
        .ok()
        .filter(|v| *v >= -1)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "heap purge delay must be -1 (never), 0 (at once) or milliseconds, got {ms}"
            ))
        })?;
    // SAFETY: mimalloc reads its options atomically; setting one at any time is allowed.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, value) };
    Ok(())
}
