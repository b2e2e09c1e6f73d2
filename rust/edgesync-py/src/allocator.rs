//! The extension's allocator: mimalloc for every Rust allocation (decoded batches, COPY
//! buffers), and the one knob a long-running worker turns on it.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// `mi_option_purge_delay` in mimalloc's `mi_option_e` (2 and 3 alike; libmimalloc-sys has
// no constant for it): just before `use_numa_nodes`, which it has.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const _: () = assert!(MI_OPTION_PURGE_DELAY + 1 == libmimalloc_sys::mi_option_use_numa_nodes);

/// How long (ms) pages the Rust heap freed stay committed before they go back to the
/// system: 0 at once, -1 never. mimalloc 3 waits 1,000 ms; in a worker freeing ~10 MB of
/// batches a second, that second of freed pages is resident at any time.
#[pyfunction]
// `c_long` is 32 bits on armv7l: the conversion is not useless there.
#[allow(clippy::useless_conversion)]
pub(crate) fn set_allocator_purge_delay(ms: i64) -> PyResult<()> {
    if ms < -1 {
        return Err(PyValueError::new_err(format!(
            "purge delay {ms} ms: use 0 or more milliseconds, or -1 for never"
        )));
    }
    let value = std::os::raw::c_long::try_from(ms)
        .map_err(|_| PyValueError::new_err(format!("purge delay {ms} ms is too large")))?;
    // SAFETY: a plain option store; mimalloc reads the value at its next purge.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, value) };
    Ok(())
}

/// The purge delay (ms) mimalloc uses now.
#[pyfunction]
#[allow(clippy::useless_conversion)] // as above
pub(crate) fn allocator_purge_delay() -> i64 {
    // SAFETY: a plain option read.
    i64::from(unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) })
}
