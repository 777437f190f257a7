//! Sessions for Python: `rig.Session`.
//!
//! A `Session` is rig-client's session on one device; host memory (`Session.host`,
//! `buffer::HostBuffer`), GPU memory (`Session.gpu_memory`, `gpumem::GpuBuffer`) and runtimes
//! (`Session.runtime`, `runtime::Runtime`) come from it and each keep it alive:
//! rig-client ends the session (and rigd reclaims all of it) when the last of them is
//! gone, or when the process exits. `Session.close()` lets go of the session's own
//! hold; `with rig.Session(...)` does so at the block's end.
//!
//! Not here: the buffer protocol of host memory (`buffer`), GPU buffers (`gpumem`),
//! channels (`runtime`).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::{prelude::*, types::PyDict};
use rig_client::{gpumem::GpuMemory, session::Session as RSession, space};
use rig_model::addr::GpuVa;

use crate::{
    block::block,
    buffer::HostBuffer,
    errors::{IntoPy, closed},
    events::{ImportedEvent, SharedEvent},
    gpumem::GpuBuffer,
    runtime::Runtime,
    space::Region,
};

/// A session with rigd on one device.
#[pyclass(module = "rig_gpu._rig", frozen)]
#[derive(Debug)]
pub struct Session {
    inner: Mutex<Option<Arc<RSession>>>,
    device: String,
}

impl Session {
    /// The session, unless closed.
    pub fn get(&self) -> PyResult<Arc<RSession>> {
        self.lock().clone().ok_or_else(|| closed("session"))
    }

    fn lock(&self) -> MutexGuard<'_, Option<Arc<RSession>>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl Session {
    /// Opens a session on `device` (a PCI address, `0000:01:00.0`, as `rigctl list`
    /// names it) through rigd at `socket` (a `str` or `os.PathLike`); without one,
    /// `$RIG_SOCKET`, else `rig.DEFAULT_SOCKET`, as rigctl and rig.tinygrad do.
    #[new]
    #[pyo3(signature = (device, socket = None))]
    fn new(py: Python<'_>, device: &str, socket: Option<std::path::PathBuf>) -> PyResult<Self> {
        let socket = crate::devices::socket_path(socket);
        let s = block(py, RSession::open(&socket, device))?.py()?;
        Ok(Self {
            inner: Mutex::new(Some(Arc::new(s))),
            device: device.to_owned(),
        })
    }

    /// rigd's number for the session (as `rigctl dma` shows it).
    #[getter]
    fn id(&self) -> PyResult<u64> {
        Ok(self.get()?.id().0)
    }

    /// The device, as it was named at open.
    #[getter]
    fn device(&self) -> &str {
        &self.device
    }

    /// The size of the blocks host memory is leased in (2 MiB).
    #[getter]
    fn block_bytes(&self) -> PyResult<u64> {
        Ok(self.get()?.block_bytes())
    }

    /// What this uid could still lease from the device's pool when the session opened.
    #[getter]
    fn quota_bytes(&self) -> PyResult<u64> {
        Ok(self.get()?.quota_bytes())
    }

    /// On a GPU rigd serves: what rigd said of it at the claim (a dict: page size, the
    /// GPU memory range, what the uid may still hold, the SM count when known); `None`
    /// on any other device.
    #[getter]
    fn gpu<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let s = self.get()?;
        let Some(g) = s.gpu() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("page_bytes", g.page_bytes)?;
        d.set_item("gpu_memory", (g.gpu_memory.start.0, g.gpu_memory.end.0))?;
        d.set_item("gpu_memory_quota_bytes", g.gpu_memory_quota_bytes)?;
        d.set_item("va_end", g.va_end.0)?;
        if let Some(geo) = &g.geometry {
            d.set_item("sms", geo.sms())?;
        }
        Ok(Some(d))
    }

    /// `size` bytes of host memory the device reaches, aligned to `align` (a power of
    /// two up to the block size): a `HostBuffer`, readable and writable through
    /// `memoryview`.
    #[pyo3(signature = (size, align = 64))]
    fn host(&self, py: Python<'_>, size: u64, align: u64) -> PyResult<HostBuffer> {
        let s = self.get()?;
        let buf = block(py, s.alloc(size, align))?.py()?;
        Ok(HostBuffer::new(s, buf))
    }

    /// `size` bytes of GPU memory in the session's GPU address space, aligned to
    /// `align` (a power of two up to 2 MiB). Holds zeros or what this session wrote
    /// there, never another session's data.
    #[pyo3(signature = (size, align = 256))]
    fn gpu_memory(&self, py: Python<'_>, size: u64, align: u64) -> PyResult<GpuBuffer> {
        let s = self.get()?;
        let buf = block(py, GpuMemory::alloc_aligned(&s, size, align))?.py()?;
        Ok(GpuBuffer::new(s, buf))
    }

    /// The lease of the session's GPU address space that holds the GPU address `va`
    /// (host memory or GPU memory), or `None`.
    fn find(&self, va: u64) -> PyResult<Option<Region>> {
        Ok(space::find_region(&*self.get()?, GpuVa(va)).map(Region))
    }

    /// The host lease mapped at `addr` in this process (a `HostBuffer`'s CPU address,
    /// or one inside it), or `None`.
    fn find_host(&self, addr: usize) -> PyResult<Option<Region>> {
        Ok(space::find_host_region(&*self.get()?, addr).map(Region))
    }

    /// GPU memory the session leases from rigd, in bytes (what `rigctl dma` counts).
    #[getter]
    fn gpu_memory_leased(&self) -> PyResult<u64> {
        let s = self.get()?;
        Ok(GpuMemory::leases(&s).iter().map(|l| l.bytes).sum())
    }

    /// Gives the GPU memory pages no buffer uses back to rigd, beyond what the session
    /// keeps for later allocations (32 MiB unless `keep` says otherwise; `keep` stays in
    /// force for later frees); returns how many leases went.
    #[pyo3(signature = (keep = None))]
    fn trim(&self, py: Python<'_>, keep: Option<u64>) -> PyResult<usize> {
        let s = self.get()?;
        if let Some(k) = keep {
            GpuMemory::set_keep_bytes(&s, k);
        }
        block(py, GpuMemory::trim(&s))?.py()
    }

    /// A compute channel and a copy channel on the session's GPU, with module images
    /// in GPU memory. `timeout` (seconds) bounds each wait the runtime makes itself
    /// and is `wait`'s default; `gpu_rings` puts the channels' rings in GPU memory
    /// (rigd lends those to root and its `gpu_rings_group` only).
    #[pyo3(signature = (timeout = 10.0, gpu_rings = false))]
    fn runtime(&self, py: Python<'_>, timeout: f64, gpu_rings: bool) -> PyResult<Runtime> {
        Runtime::open(py, self.get()?, timeout, gpu_rings)
    }

    /// Exports a new event of the session's GPU: pass its `token` to another process
    /// of the same uid, which imports it (`import_event`) and waits for its records
    /// (`Runtime.wait_shared`, `Runtime.wait_event`); records are `Runtime.record_shared`.
    fn export_event(&self, py: Python<'_>) -> PyResult<SharedEvent> {
        SharedEvent::export(py, &self.get()?)
    }

    /// Imports the event another process of this uid exported (its `token`, 16 bytes).
    /// Raises `rig.Refused` with reason `unknown_event` for a token never given,
    /// `event_refused` for another uid's, `event_gone` once its exporter ended.
    fn import_event(&self, py: Python<'_>, token: &[u8]) -> PyResult<ImportedEvent> {
        ImportedEvent::import(py, &self.get()?, token)
    }

    /// Lets go of the session's own hold: the session ends when every buffer and
    /// runtime made from it is also gone.
    fn close(&self) {
        self.lock().take();
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) {
        self.close();
    }

    fn __repr__(&self) -> String {
        match self.lock().as_ref() {
            Some(s) => format!("<rig.Session {} on {}>", s.id().0, self.device),
            None => format!("<rig.Session on {} (closed)>", self.device),
        }
    }
}
