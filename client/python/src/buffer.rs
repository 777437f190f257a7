//! Host memory for Python: `rig.HostBuffer`, a buffer of a session's host lease that
//! Python reads and writes in place through the buffer protocol (`memoryview(b)`,
//! `numpy.frombuffer(b, ...)`), the GPU through `b.va`.
//!
//! The one module of this crate with `unsafe`: CPython's buffer protocol hands out a
//! raw pointer. What keeps it sound: the exporter is the `HostBuffer` object, which
//! CPython keeps alive for as long as any view of it exists (the view holds a
//! reference), and the `HostBuffer` holds rig-client's `Buffer`, which holds the
//! lease's mapping (an `Arc` of it) and the session; `free()` refuses while a view is
//! exported (`BufferError`, as `mmap.close()` does), so the mapping outlives every
//! pointer handed out.
//!
//! The GPU writes this memory behind Python's back: read it after the wait that covers
//! the GPU's work (docs/python.md, "Memory").

#![allow(unsafe_code)]

use std::{ffi::c_int, sync::Arc};

use pyo3::{
    exceptions::{PyBufferError, PyValueError},
    ffi,
    prelude::*,
    types::PyBytes,
};
use rig_client::session::{Buffer, Session as RSession};

use crate::errors::{IntoPy, closed};

/// Host memory of a session, shared with the device.
#[pyclass(module = "rig_gpu._rig")]
#[derive(Debug)]
pub struct HostBuffer {
    session: Arc<RSession>,
    buf: Option<Buffer>,
    /// Views exported and not yet released.
    exports: usize,
}

impl HostBuffer {
    /// Wraps a buffer of `session`.
    pub fn new(session: Arc<RSession>, buf: Buffer) -> Self {
        Self {
            session,
            buf: Some(buf),
            exports: 0,
        }
    }

    /// The buffer, unless freed.
    pub fn get(&self) -> PyResult<&Buffer> {
        self.buf.as_ref().ok_or_else(|| closed("host buffer"))
    }

    /// The session it belongs to.
    pub fn session(&self) -> &Arc<RSession> {
        &self.session
    }
}

#[pymethods]
impl HostBuffer {
    /// Its first byte for the device: on a GPU rigd serves, its GPU address (what a
    /// kernel's pointer argument holds); else the IOVA or physical address.
    #[getter]
    fn va(&self) -> PyResult<Option<u64>> {
        Ok(self.get()?.device_address().map(|d| d.get()))
    }

    fn __len__(&self) -> PyResult<usize> {
        usize::try_from(self.get()?.len()).map_err(|_| PyValueError::new_err("too long"))
    }

    /// `size` bytes from `offset` (all of it by default), copied out.
    #[pyo3(signature = (offset = 0, size = None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        offset: u64,
        size: Option<u64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.get()?;
        let size = size.unwrap_or_else(|| b.len().saturating_sub(offset));
        let n = usize::try_from(size).map_err(|_| PyValueError::new_err("too long"))?;
        let mut out = vec![0u8; n];
        b.read(offset, &mut out).py()?;
        Ok(PyBytes::new(py, &out))
    }

    /// Copies `data` in at `offset`: `bytes`, or anything with the buffer protocol and
    /// C-contiguous (`bytearray`, `memoryview`, a numpy array), by its bytes.
    #[pyo3(signature = (data, offset = 0))]
    fn write(&self, data: &Bound<'_, PyAny>, offset: u64) -> PyResult<()> {
        if let Ok(b) = data.cast::<PyBytes>() {
            return self.get()?.write(offset, b.as_bytes()).py();
        }
        let bytes = contiguous_bytes(data)?;
        self.get()?.write(offset, &bytes).py()
    }

    /// Gives the memory back to the session (its block to rigd when empty, as the
    /// session keeps). Refused while a `memoryview` of it is alive.
    fn free(&mut self) -> PyResult<()> {
        if self.exports > 0 {
            return Err(PyBufferError::new_err(format!(
                "Cannot free a host buffer while {} view(s) of it exist",
                self.exports
            )));
        }
        self.buf = None;
        Ok(())
    }

    fn __repr__(&self) -> String {
        match &self.buf {
            Some(b) => match b.device_address() {
                Some(d) => format!("<rig.HostBuffer {} bytes at {:#x}>", b.len(), d.get()),
                None => format!("<rig.HostBuffer {} bytes>", b.len()),
            },
            None => "<rig.HostBuffer (freed)>".to_owned(),
        }
    }

    /// The buffer protocol: one contiguous, writable run of bytes.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let (ptr, len) = {
            let me = slf.borrow();
            let b = me.get()?;
            let len = isize::try_from(b.len()).map_err(|_| PyValueError::new_err("too long"))?;
            (b.as_ptr(), len)
        };
        // SAFETY: `view` is the Py_buffer CPython passed to this slot; `ptr..ptr+len` is
        // the buffer's mapping, valid while this object lives (the module head says why),
        // and PyBuffer_FillInfo takes a new reference to the object for the view. It
        // fails (and sets an exception) only when a read-only view was asked to be
        // writable, which this writable buffer never is.
        let rc = unsafe { ffi::PyBuffer_FillInfo(view, slf.as_ptr(), ptr.cast(), len, 0, flags) };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        slf.borrow_mut().exports += 1;
        Ok(())
    }

    /// A view is released.
    unsafe fn __releasebuffer__(&mut self, _view: *mut ffi::Py_buffer) {
        self.exports = self.exports.saturating_sub(1);
    }
}

/// The bytes of any object with the buffer protocol, C-contiguous: viewed as unsigned
/// bytes (`memoryview(o).cast("B")`, which refuses a strided view) and copied out.
pub fn contiguous_bytes(o: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let py = o.py();
    let flat = pyo3::types::PyMemoryView::from(o)?.call_method1("cast", ("B",))?;
    pyo3::buffer::PyBuffer::<u8>::get(&flat)?.to_vec(py)
}
