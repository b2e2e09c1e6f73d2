//! `JournalRow` and `RowEncoder`: batch entries written from rows Python's `sqlite3`
//! fetched (the fallback of `JournalReader`, with the same bytes).

use edgesync_core as core;
use edgesync_core::rowjson::EntrySource;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple};

/// One journal entry of a batch: its ``commit_seq`` and row JSON (None when gone).
#[pyclass(frozen, name = "JournalRow", module = "edgesync._core")]
pub(crate) struct PyJournalRow {
    #[pyo3(get)]
    pub(crate) commit_seq: i64,
    #[pyo3(get)]
    pub(crate) encoded: Option<Py<PyBytes>>,
}

#[pymethods]
impl PyJournalRow {
    #[new]
    fn new(commit_seq: i64, encoded: Option<Py<PyBytes>>) -> Self {
        PyJournalRow {
            commit_seq,
            encoded,
        }
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let size = self.encoded.as_ref().map(|b| b.bind(py).as_bytes().len());
        format!(
            "JournalRow(commit_seq={}, encoded={})",
            self.commit_seq,
            size.map_or("None".to_owned(), |n| format!("<{n} bytes>"))
        )
    }
}

/// A SQLite value as Python's sqlite3 returns it.
fn sqlite_value<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<core::rowjson::Value<'a>> {
    use core::rowjson::Value;
    if obj.is_none() {
        Ok(Value::Null)
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(Value::Text(s.to_str()?))
    } else if let Ok(i) = obj.cast::<PyInt>() {
        Ok(Value::Integer(i.extract::<i64>()?))
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        Ok(Value::Real(f.value()))
    } else if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(Value::Blob(b.as_bytes()))
    } else {
        Err(PyTypeError::new_err(format!(
            "not a SQLite value: {}",
            obj.get_type().name()?
        )))
    }
}

/// Writes batch entries of one table from rows fetched by Python's sqlite3.
#[pyclass(frozen, name = "RowEncoder", module = "edgesync._core")]
pub(crate) struct PyRowEncoder {
    pub(crate) inner: core::rowjson::RowEncoder,
    pub(crate) live_index: usize,
}

#[pymethods]
impl PyRowEncoder {
    #[new]
    fn new(pk_names: Vec<String>, row_names: Vec<String>, live_index: usize) -> PyResult<Self> {
        let pk: Vec<&str> = pk_names.iter().map(String::as_str).collect();
        let row: Vec<&str> = row_names.iter().map(String::as_str).collect();
        if live_index < 2 {
            return Err(PyValueError::new_err("live_index must be at least 2"));
        }
        Ok(PyRowEncoder {
            inner: core::rowjson::RowEncoder::new(&pk, &row),
            live_index,
        })
    }

    /// One JournalRow per ``(commit_seq, op, *pk, *row, ...)`` tuple.
    fn encode_rows<'py>(
        &self,
        py: Python<'py>,
        rows: &Bound<'py, PyList>,
    ) -> PyResult<Bound<'py, PyList>> {
        let width = self.inner.entry_width(self.live_index);
        let out = PyList::empty(py);
        let mut buf: Vec<u8> = Vec::with_capacity(256);
        for item in rows.iter() {
            let row = item.cast::<PyTuple>()?;
            if row.len() < width {
                return Err(PyValueError::new_err(format!(
                    "row tuple has {} values, needs {width}",
                    row.len()
                )));
            }
            let src = TupleRow(row);
            buf.clear();
            let encoded = self
                .inner
                .encode_entry(&mut buf, self.live_index, &src)?
                .then(|| PyBytes::new(py, &buf).unbind());
            out.append(Py::new(
                py,
                PyJournalRow {
                    commit_seq: src.commit_seq()?,
                    encoded,
                },
            )?)?;
        }
        Ok(out)
    }
}

/// A row tuple fetched by Python's `sqlite3`, as the source of a journal entry.
struct TupleRow<'a, 'py>(&'a Bound<'py, PyTuple>);

impl EntrySource for TupleRow<'_, '_> {
    type Error = PyErr;

    fn commit_seq(&self) -> PyResult<i64> {
        self.0.get_borrowed_item(0)?.extract()
    }

    fn with_op<R>(&self, f: impl FnOnce(&str) -> R) -> PyResult<R> {
        let op = self.0.get_borrowed_item(1)?;
        Ok(f(op.cast::<PyString>()?.to_str()?))
    }

    fn is_null(&self, i: usize) -> PyResult<bool> {
        Ok(self.0.get_borrowed_item(i)?.is_none())
    }

    fn with_value<R>(
        &self,
        i: usize,
        f: impl FnOnce(core::rowjson::Value<'_>) -> R,
    ) -> PyResult<R> {
        let v = self.0.get_borrowed_item(i)?;
        Ok(f(sqlite_value(&v)?))
    }
}
