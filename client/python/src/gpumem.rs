//! GPU memory for Python: `rig.GpuBuffer`, a buffer of a session's GPU memory at a GPU
//! virtual address (what a kernel's pointer argument holds). `Session.gpu_memory` makes
//! them; `runtime` copies into and out of them and launches kernels on them.
//!
//! Not here: host memory (`buffer`), the session (`session`).

use std::sync::Arc;

use pyo3::{exceptions::PyValueError, prelude::*};
use rig_client::{
    gpumem::{GpuBuffer as RGpuBuffer, GpuMemory},
    session::Session as RSession,
};

use crate::{
    block::block,
    errors::{IntoPy, closed},
};

/// GPU memory of a session: `len(g)` bytes at `g.va` in its GPU address space.
#[pyclass(module = "rig_gpu._rig")]
#[derive(Debug)]
pub struct GpuBuffer {
    session: Arc<RSession>,
    buf: Option<RGpuBuffer>,
}

impl GpuBuffer {
    /// `buf` of `session`.
    pub fn new(session: Arc<RSession>, buf: RGpuBuffer) -> Self {
        Self {
            session,
            buf: Some(buf),
        }
    }

    /// The buffer, unless freed.
    pub fn get(&self) -> PyResult<&RGpuBuffer> {
        self.buf.as_ref().ok_or_else(|| closed("GPU buffer"))
    }

    /// The session it belongs to.
    pub fn session(&self) -> &Arc<RSession> {
        &self.session
    }
}

#[pymethods]
impl GpuBuffer {
    /// Its first byte in the session's GPU address space (what a kernel's pointer
    /// argument holds).
    #[getter]
    fn va(&self) -> PyResult<u64> {
        Ok(self.get()?.va().0)
    }

    fn __len__(&self) -> PyResult<usize> {
        usize::try_from(self.get()?.len()).map_err(|_| PyValueError::new_err("too long"))
    }

    /// Gives the memory back: to the session at once, and its pages to rigd when no
    /// other buffer uses them.
    fn free(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(b) = self.buf.take() else {
            return Ok(());
        };
        block(py, GpuMemory::free(&self.session, b))?.py()
    }

    fn __repr__(&self) -> String {
        match &self.buf {
            Some(b) => format!("<rig.GpuBuffer {} bytes at {:#x}>", b.len(), b.va().0),
            None => "<rig.GpuBuffer (freed)>".to_owned(),
        }
    }
}
