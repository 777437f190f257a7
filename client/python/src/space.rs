//! Which lease holds an address, for Python: `rig.Region`, what `Session.find` (a GPU
//! address) and `Session.find_host` (an address in this process) answer. Code that
//! names memory by address (tinygrad's buffers, views and symbolic addresses) asks
//! here rather than keeping its own index; `Runtime.copy` and `Runtime.fill` take a
//! GPU address where they take a buffer, through the same lookup.
//!
//! Not here: the lookup itself (rig-client's `space`), buffers (`buffer`, `gpumem`).

use pyo3::prelude::*;
use rig_client::space::{Holder, Region as RRegion};

/// One lease of a session's GPU address space: host memory the GPU reaches across
/// PCIe, or GPU memory.
#[pyclass(module = "rig_gpu._rig", frozen, eq)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region(pub RRegion);

#[pymethods]
impl Region {
    /// Its first byte in the session's GPU address space.
    #[getter]
    fn va(&self) -> u64 {
        self.0.va.get()
    }

    /// Its length in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.0.bytes
    }

    /// Whether it is host memory (else GPU memory).
    #[getter]
    fn host(&self) -> bool {
        matches!(self.0.holder, Holder::Host(_))
    }

    /// Where host memory is mapped in this process; `None` for GPU memory.
    #[getter]
    fn host_address(&self) -> Option<usize> {
        self.0.host_address
    }

    fn __repr__(&self) -> String {
        let r = &self.0;
        let end = r.va.get().saturating_add(r.bytes);
        match r.host_address {
            Some(h) => format!(
                "<rig.Region host {:#x}..{end:#x} at {h:#x} here>",
                r.va.get()
            ),
            None => format!("<rig.Region gpu {:#x}..{end:#x}>", r.va.get()),
        }
    }
}
