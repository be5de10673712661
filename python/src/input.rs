//! Text and bytes from Python without copies where the interpreter allows.

use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

/// A `str` or any bytes-like object, held so that it can be read with the
/// GIL released. `bytes` and `str` are borrowed (a `str` is its UTF-8 form;
/// on Python 3.9, whose stable ABI lacks the borrowed form, one copy);
/// `bytearray`, `memoryview` and other buffers are copied once, because
/// Python code could resize them while the GIL is released.
#[derive(Debug)]
pub(crate) enum Input {
    Str(PyBackedStr),
    Bytes(PyBackedBytes),
}

impl Input {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Input::Str(s) => s.as_bytes(),
            Input::Bytes(b) => b,
        }
    }

    /// The bytes, with a lifetime the borrow checker does not tie to `self`.
    ///
    /// # Safety
    ///
    /// The bytes stay where they are while `self` lives, also when it
    /// moves (they are a Python object's, or a Rust allocation that `self`
    /// holds and never changes); the caller must not use them after `self`
    /// is dropped — in practice, keep what borrows them beside `self`
    /// (`PyEvent::from_borrowed`).
    pub(crate) unsafe fn unbound_bytes<'x>(&self) -> &'x [u8] {
        let bytes = self.as_bytes();
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(bytes.as_ptr(), bytes.len()) }
    }
}

impl<'py> FromPyObject<'_, 'py> for Input {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Input> {
        if obj.is_instance_of::<PyString>() {
            return Ok(Input::Str(obj.extract()?));
        }
        if obj.is_instance_of::<PyBytes>() || obj.is_instance_of::<PyByteArray>() {
            return Ok(Input::Bytes(obj.extract()?));
        }
        // Any other buffer (memoryview, mmap, array): one copy through bytes().
        let py = obj.py();
        // Through memoryview, so that only buffers qualify (bytes(12) is
        // twelve zero bytes).
        let view = py.get_type::<PyMemoryView>().call1((obj,));
        let bytes = view.and_then(|v| py.get_type::<PyBytes>().call1((v,)));
        let bytes = bytes.map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "expected str or a bytes-like object, not {}",
                obj.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        Ok(Input::Bytes(bytes.extract()?))
    }
}
