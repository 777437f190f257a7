//! GPU work for Python: `rig.Runtime` (a session's compute channel, copy channel and
//! copy kernel: rig-runtime's `Runtime`), and `rig.Done` (what a launch or a copy
//! returns, to wait on).
//!
//! Flow: `Session.runtime()` opens the channels → `load(cubin)` puts a module in the
//! session's GPU memory → `launch(kernel, grid, block, args)` checks the shape and each
//! argument against the kernel's parameters (sizes from the cubin; Python values
//! converted in `args`) and submits → `copy(src, dst)` between host and GPU memory
//! → `replay(graph)` queues a `rig.Graph`'s recorded launches (`graph`) in one call
//! → `wait(done)` returns when the engine that did the work released its value, or
//! raises `rig.Fault` with the GPU's error, or `rig.Timeout`. Waits run with the GIL
//! released.
//!
//! Not here: what is checked and how a launch is built (rig-runtime), memory
//! (`session`, `buffer`).

use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use pyo3::{
    buffer::PyBuffer,
    exceptions::{PyTypeError, PyValueError},
    prelude::*,
    types::{PyBool, PyBytes, PyInt},
};
use rig_client::{
    channel::{Engine, Rings, WaitPolicy},
    session::Session as RSession,
    space::{Region, find_region},
};
use rig_model::addr::GpuVa;
use rig_runtime::{
    ComputeOptions, CopyOptions, GpuAlloc, Memory, MemoryError, RuntimeOptions, Span, Submit,
};

use crate::{
    args::{dim3, typed_args},
    block::{block, detached},
    buffer::{HostBuffer, contiguous_bytes},
    errors::{IntoPy, closed},
    events::{ImportedEvent, SharedEvent},
    gpumem::GpuBuffer,
    graph::Graph,
    module::{Kernel, Module},
};

/// What a launch or a copy returns: the engine that releases its value, and the value.
/// It belongs to the runtime that made it: another runtime's channels have their own
/// timelines, so waiting on it, or ordering work after it, elsewhere is refused; another
/// runtime of the session orders its work after it through `Runtime.export(done)`.
#[pyclass(module = "rig_gpu._rig", frozen, from_py_object)]
#[derive(Debug, Clone, Copy)]
pub struct Done {
    /// `"compute"` or `"copy"`.
    #[pyo3(get)]
    pub engine: &'static str,
    /// The value its engine releases when the work is done.
    #[pyo3(get)]
    pub value: u64,
    /// The runtime that made it ([`Runtime::id`]).
    runtime: u64,
}

/// A point in a runtime's work with the GPU's time (`Runtime.record`): CUDA's event with
/// timing. Belongs to its runtime, as a `Done` does.
#[pyclass(module = "rig_gpu._rig", frozen, from_py_object)]
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// `"compute"` or `"copy"`: the channel that recorded it.
    #[pyo3(get)]
    pub engine: &'static str,
    /// Its id in the runtime.
    #[pyo3(get)]
    pub id: u64,
    runtime: u64,
}

#[pymethods]
impl Event {
    fn __repr__(&self) -> String {
        format!("<rig.Event {} {}>", self.engine, self.id)
    }
}

impl Event {
    fn to_rust(self, rt: &Runtime) -> PyResult<rig_runtime::Event> {
        rt.owns(self.runtime, || format!("event {}", self.id))?;
        Ok(rig_runtime::Event {
            engine: engine(self.engine)?,
            id: self.id,
        })
    }
}

/// An engine's name in Python.
fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Compute => "compute",
        _ => "copy",
    }
}

/// `"compute"` or `"copy"` as an engine.
fn engine(name: &str) -> PyResult<Engine> {
    match name {
        "compute" => Ok(Engine::Compute),
        "copy" => Ok(Engine::Copy),
        other => Err(PyValueError::new_err(format!(
            "engine {other:?}: \"compute\" or \"copy\""
        ))),
    }
}

/// Numbers runtimes of this process, so that a `Done` names its own.
static RUNTIMES: AtomicU64 = AtomicU64::new(1);

#[pymethods]
impl Done {
    fn __repr__(&self) -> String {
        format!("<rig.Done {} {}>", self.engine, self.value)
    }
}

impl Done {
    fn of(d: rig_runtime::Done, runtime: u64) -> Self {
        Self {
            engine: engine_name(d.engine),
            value: d.value,
            runtime,
        }
    }

    /// The runtime's own `Done`, for `rt`.
    fn to_rust(self, rt: &Runtime) -> PyResult<rig_runtime::Done> {
        rt.owns(self.runtime, || format!("{} {}", self.engine, self.value))?;
        Ok(rig_runtime::Done {
            engine: engine(self.engine)?,
            value: self.value,
        })
    }
}

/// A point in one runtime's work that another runtime of the same session (another
/// stream) can wait for on the GPU: `Runtime.export(done)`, then `after=[fence]` there.
#[pyclass(module = "rig_gpu._rig", frozen, from_py_object)]
#[derive(Debug, Clone, Copy)]
pub struct Fence {
    /// `"compute"` or `"copy"`: the engine that releases it.
    #[pyo3(get)]
    pub engine: &'static str,
    /// The value.
    #[pyo3(get)]
    pub value: u64,
    inner: rig_client::channel::Fence,
}

#[pymethods]
impl Fence {
    fn __repr__(&self) -> String {
        format!(
            "<rig.Fence {} {} of channel {}>",
            self.engine, self.value, self.inner.channel
        )
    }
}

/// One entry of `after`: this runtime's `Done`, or any runtime's exported `Fence`.
#[derive(FromPyObject)]
pub enum After {
    Done(Done),
    Fence(Fence),
}

/// `after`, as the runtime's own `Done`s and the fences of other runtimes.
type Deps = (Vec<rig_runtime::Done>, Vec<rig_client::channel::Fence>);

fn deps(rt: &Runtime, after: &[After]) -> PyResult<Deps> {
    let mut out = (Vec::new(), Vec::new());
    for a in after {
        match a {
            After::Done(d) => out.0.push(d.to_rust(rt)?),
            After::Fence(f) => out.1.push(f.inner),
        }
    }
    Ok(out)
}

/// Makes `engine`'s next work wait for each of `fences` (`Runtime::import`).
fn import(
    rt: &mut rig_runtime::Runtime,
    engine: Engine,
    fences: &[rig_client::channel::Fence],
) -> Result<(), rig_runtime::RuntimeError> {
    fences.iter().try_for_each(|f| rt.import(engine, *f))
}

/// A session's compute and copy channels.
#[pyclass(module = "rig_gpu._rig", frozen)]
#[derive(Debug)]
pub struct Runtime {
    session: Arc<RSession>,
    inner: Mutex<Option<rig_runtime::Runtime>>,
    timeout: Duration,
    /// This process's number for it (`Done::runtime`).
    id: u64,
}

fn seconds(s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| PyValueError::new_err(format!("{s} is not a timeout in seconds")))
}

/// The most an upload or a download stages at once.
const STAGING: usize = 64 << 20;

/// A writable, C-contiguous byte view of `o` (`memoryview(o).cast("B")`).
fn writable_bytes(o: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    let flat = pyo3::types::PyMemoryView::from(o)?.call_method1("cast", ("B",))?;
    let b = PyBuffer::<u8>::get(&flat)?;
    if b.readonly() {
        return Err(PyTypeError::new_err("`out` is read-only"));
    }
    Ok(b)
}

impl Runtime {
    /// Refuses what another runtime made (`Done`, `Event`: named by `what`): each
    /// runtime's channels count their own values.
    fn owns(&self, runtime: u64, what: impl FnOnce() -> String) -> PyResult<()> {
        if runtime == self.id {
            return Ok(());
        }
        Err(PyValueError::new_err(format!(
            "{} belongs to another runtime: each runtime's channels count their own values",
            what()
        )))
    }

    /// A host lease of up to `STAGING` bytes for `len` bytes of data.
    fn staging(&self, py: Python<'_>, len: usize) -> PyResult<rig_client::session::Buffer> {
        let n = len.clamp(4, STAGING) as u64;
        block(py, self.session.alloc(n, 4096))?.py()
    }

    /// One copy between `staging`'s first `n` bytes and a span `ends` puts on the other
    /// side, waited for.
    fn through<'a>(
        &self,
        py: Python<'_>,
        staging: &'a rig_client::session::Buffer,
        n: u64,
        ends: impl FnOnce(Span<'a>) -> (Span<'a>, Span<'a>) + Send,
    ) -> PyResult<()> {
        let here = Span::new(staging, 0, n).py()?;
        let (src, dst) = ends(here);
        let (session, timeout) = (&self.session, self.timeout);
        self.with(py, |rt, _| {
            let done = rt.copy(session, src, dst)?;
            rt.wait(done, timeout)
        })?
        .py()
    }

    /// Opens the channels in `session`, module images in GPU memory.
    pub fn open(
        py: Python<'_>,
        session: Arc<RSession>,
        timeout: f64,
        gpu_rings: bool,
    ) -> PyResult<Self> {
        let timeout = seconds(timeout)?;
        let rings = if gpu_rings { Rings::Gpu } else { Rings::Host };
        let o = RuntimeOptions {
            compute: ComputeOptions {
                rings,
                timeout,
                ..ComputeOptions::default()
            },
            copy: CopyOptions {
                rings,
                ..CopyOptions::default()
            },
        };
        let rt = block(py, rig_runtime::Runtime::open(&session, &GpuAlloc, o))?.py()?;
        Ok(Self {
            session,
            inner: Mutex::new(Some(rt)),
            timeout,
            id: RUNTIMES.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Runs `f` on the runtime, its lock taken with the GIL released (a wait holds the
    /// lock for its length; `block::detached` says why the GIL must be let go first).
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut rig_runtime::Runtime, &tokio::runtime::Runtime) -> T + Send,
    ) -> PyResult<T> {
        detached(py, |io| {
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            g.as_mut().map(|rt| f(rt, io))
        })?
        .ok_or_else(|| closed("runtime"))
    }
}

/// Memory a copy takes: a host or a GPU buffer, borrowed for the call.
/// One end of a copy or a fill: a buffer, or a GPU address of `session`'s (the lease
/// that holds it, and where in it).
enum Held<'py> {
    Host(PyRef<'py, HostBuffer>),
    Gpu(PyRef<'py, GpuBuffer>),
    At { region: Region, offset: u64 },
}

impl<'py> Held<'py> {
    /// `o` as an end of work on `session`: a buffer of that session, or an `int`, a
    /// GPU address in it.
    fn of(o: &Bound<'py, PyAny>, session: &Arc<RSession>) -> PyResult<Self> {
        let held = if let Ok(h) = o.cast::<HostBuffer>() {
            Self::Host(h.borrow())
        } else if let Ok(g) = o.cast::<GpuBuffer>() {
            Self::Gpu(g.borrow())
        } else if o.is_instance_of::<PyInt>() && !o.is_instance_of::<PyBool>() {
            let va = GpuVa(o.extract::<u64>()?);
            let region = find_region(session, va)
                .ok_or(MemoryError::Unmapped { va })
                .py()?;
            return Ok(Self::At {
                offset: va.get() - region.va.get(),
                region,
            });
        } else {
            return Err(PyTypeError::new_err(format!(
                "Expected a rig.HostBuffer, a rig.GpuBuffer or a GPU address (int), got {}",
                o.get_type()
                    .name()
                    .map_or_else(|_| "?".to_owned(), |n| n.to_string())
            )));
        };
        let theirs = match &held {
            Self::Host(h) => h.session(),
            Self::Gpu(g) => g.session(),
            Self::At { .. } => session,
        };
        if !Arc::ptr_eq(theirs, session) {
            return Err(PyValueError::new_err(
                "A buffer of another session: copies stay inside one session",
            ));
        }
        Ok(held)
    }

    fn memory(&self) -> PyResult<&dyn Memory> {
        Ok(match self {
            Self::Host(h) => h.get()?,
            Self::Gpu(g) => g.get()?,
            Self::At { region, .. } => region,
        })
    }

    /// `size`, or what the end holds from `offset` on: a buffer to its end; an
    /// address names no length (its lease holds other buffers), so it needs `size`.
    fn size(&self, size: Option<u64>, offset: u64, what: &str) -> PyResult<u64> {
        match (size, self) {
            (Some(n), _) => Ok(n),
            (None, Self::At { .. }) => Err(PyValueError::new_err(format!(
                "`size` is needed when {what} is a GPU address"
            ))),
            (None, _) => Ok(self.memory()?.len().saturating_sub(offset)),
        }
    }

    /// `len` bytes from `offset` past the start of the buffer or the address.
    fn span(&self, offset: u64, len: u64) -> PyResult<Span<'_>> {
        let base = match self {
            Self::At { offset, .. } => *offset,
            _ => 0,
        };
        let offset = base
            .checked_add(offset)
            .ok_or_else(|| PyValueError::new_err("the offset overflows"))?;
        Span::new(self.memory()?, offset, len).py()
    }
}

#[pymethods]
impl Runtime {
    /// Loads the sm_90 cubin `data` into the session's GPU memory.
    fn load(&self, py: Python<'_>, data: Vec<u8>) -> PyResult<Module> {
        let session = &self.session;
        let m = self
            .with(py, |rt, io| io.block_on(rt.load(session, &GpuAlloc, &data)))?
            .py()?;
        Ok(Module { inner: m })
    }

    /// Launches `kernel` on `grid` blocks of `block` threads with `shared` bytes of
    /// dynamic shared memory; `args` one per parameter, in order. The grid starts only
    /// once every `Done` (or another runtime's `Fence`) in `after` has landed, waited
    /// for by the GPU (the host does not wait). `cooperative=True` is CUDA's cooperative launch: every block resident
    /// at once, so `cooperative_groups::this_grid().sync()` works; a grid the GPU cannot
    /// hold at once is refused. Returns at once.
    #[pyo3(signature = (kernel, grid, block, args = Vec::new(), shared = 0, after = Vec::new(), cooperative = false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn launch(
        &self,
        py: Python<'_>,
        kernel: PyRef<'_, Kernel>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: Vec<Bound<'_, PyAny>>,
        shared: u32,
        after: Vec<After>,
        cooperative: bool,
    ) -> PyResult<Done> {
        let (after, fences) = deps(self, &after)?;
        let mut store = vec![Vec::new(); args.len()];
        let typed = typed_args(&kernel, &args, &mut store)?;
        let (grid, block) = (dim3(grid)?, dim3(block)?);
        let k = &kernel.inner;
        let done = self
            .with(py, |rt, _| {
                import(rt, Engine::Compute, &fences)?;
                if cooperative {
                    rt.launch_cooperative(k, grid, block, shared, &typed, &after)
                } else {
                    rt.launch(k, grid, block, shared, &typed, &after)
                }
            })?
            .py()?;
        Ok(Done::of(done, self.id))
    }

    /// Copies `size` bytes (all of `src` from `src_offset` by default) from `src` to
    /// `dst` on whichever engine does it fastest. Each end is a host or GPU buffer of
    /// this session, or a GPU address (an `int`) in its address space, checked against
    /// the session's leases (`Session.find`); an address names no length, so a copy
    /// from one needs `size`. It starts once every `Done` in `after` has landed, as
    /// `launch`'s. Returns at once.
    #[pyo3(signature = (dst, src, size = None, dst_offset = 0, src_offset = 0, after = Vec::new()))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn copy(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        size: Option<u64>,
        dst_offset: u64,
        src_offset: u64,
        after: Vec<After>,
    ) -> PyResult<Done> {
        let (after, fences) = deps(self, &after)?;
        let (d, s) = (Held::of(dst, &self.session)?, Held::of(src, &self.session)?);
        let size = s.size(size, src_offset, "src")?;
        let src = s.span(src_offset, size)?;
        let dst = d.span(dst_offset, size)?;
        let session = &self.session;
        let engine = rig_runtime::Runtime::copy_engine(&src, &dst);
        let done = self
            .with(py, |rt, _| {
                import(rt, engine, &fences)?;
                rt.copy_after(session, src, dst, &after)
            })?
            .py()?;
        Ok(Done::of(done, self.id))
    }

    /// Fills `dst` (from `offset`, `size` bytes: all of it by default) with the 32-bit
    /// `value` on the copy engine. `dst` may be a GPU address, as for `copy` (then
    /// `size` is needed). It starts once every `Done` in `after` has landed.
    /// Returns at once.
    #[pyo3(signature = (dst, value = 0, size = None, offset = 0, after = Vec::new()))]
    fn fill(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        value: u32,
        size: Option<u64>,
        offset: u64,
        after: Vec<After>,
    ) -> PyResult<Done> {
        let (after, fences) = deps(self, &after)?;
        let d = Held::of(dst, &self.session)?;
        let size = d.size(size, offset, "dst")?;
        let span = d.span(offset, size)?;
        let session = &self.session;
        let done = self
            .with(py, |rt, _| {
                import(rt, Engine::Copy, &fences)?;
                rt.fill(session, span, value, &after)
            })?
            .py()?;
        Ok(Done::of(done, self.id))
    }

    /// Writes the 64-bit `value` at `dst` (a buffer of the session, from `offset`, or a
    /// GPU address in one) from the `engine` channel once that engine finished
    /// everything submitted to it before and every `Done` in `after` landed: CUDA's
    /// `cuStreamWriteValue64`. With `timestamp` (the default) the GPU's nanosecond
    /// time follows the value (16 bytes, 16-byte aligned; else 8 bytes, 8-byte
    /// aligned). The host reads it in memory; `wait_value` makes a channel wait for
    /// it. Returns a `Done` that lands once the value is written. A place outside the
    /// session's memory, short, misaligned or over one of the runtime's timelines is a
    /// `ValueError`, with nothing sent. Returns at once.
    #[pyo3(signature = (dst, value, engine = "compute", offset = 0, timestamp = true, after = Vec::new()))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn write_value(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        value: u64,
        engine: &str,
        offset: u64,
        timestamp: bool,
        after: Vec<After>,
    ) -> PyResult<Done> {
        let which = self::engine(engine)?;
        let (after, fences) = deps(self, &after)?;
        let d = Held::of(dst, &self.session)?;
        let len = if timestamp {
            rig_runtime::value::WRITTEN_BYTES
        } else {
            rig_runtime::value::WAITED_BYTES
        };
        let span = d.span(offset, len)?;
        let session = &self.session;
        let done = self
            .with(py, |rt, _| {
                import(rt, which, &fences)?;
                rt.write_value(session, which, span, value, timestamp, &after)
            })?
            .py()?;
        Ok(Done::of(done, self.id))
    }

    /// Makes the next work on the `engine` channel wait on the GPU until the 64-bit
    /// value at `src` (a buffer of the session, from `offset`, or a GPU address in
    /// one) has reached `value`: CUDA's `cuStreamWaitValue64` (GEQ, compared
    /// circularly). Whoever sets it, the host writing the memory included, the channel
    /// goes on; other sessions run meanwhile. The host does not wait. Returns a `Done`
    /// that lands once the value was reached and the channel's earlier work is done:
    /// what work on the other channel puts in its `after`. Returns at once.
    #[pyo3(signature = (src, value, engine = "compute", offset = 0))]
    fn wait_value(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        value: u64,
        engine: &str,
        offset: u64,
    ) -> PyResult<Done> {
        let which = self::engine(engine)?;
        let s = Held::of(src, &self.session)?;
        let span = s.span(offset, rig_runtime::value::WAITED_BYTES)?;
        let session = &self.session;
        let done = self
            .with(py, |rt, _| rt.wait_value(session, which, span, value))?
            .py()?;
        Ok(Done::of(done, self.id))
    }

    /// A fence for `done` that another runtime of the same session (another stream)
    /// puts in its `after` to wait for it on the GPU. The work that releases it is sent
    /// to the GPU now, even under `hold()`.
    fn export(&self, py: Python<'_>, done: Done) -> PyResult<Fence> {
        let d = done.to_rust(self)?;
        let inner = self.with(py, |rt, _| rt.export(d))?.py()?;
        Ok(Fence {
            engine: done.engine,
            value: done.value,
            inner,
        })
    }

    /// Waits until `done`'s engine released its value: returns, or raises `rig.Fault`
    /// (the GPU stopped the channel: its error) or `rig.Timeout`. `timeout` in seconds
    /// (the runtime's by default).
    #[pyo3(signature = (done, timeout = None))]
    fn wait(&self, py: Python<'_>, done: Done, timeout: Option<f64>) -> PyResult<()> {
        let t = timeout.map_or(Ok(self.timeout), seconds)?;
        let done = done.to_rust(self)?;
        self.with(py, |rt, _| rt.wait(done, t))?.py()
    }

    /// Copies `data` (`bytes`, or anything with the buffer protocol, C-contiguous: a
    /// numpy array) into `dst` (a buffer of this session or a GPU address in it) from
    /// `offset`, through staging host leases of at most 64 MiB, and waits for it.
    #[pyo3(signature = (dst, data, offset = 0))]
    fn upload(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        offset: u64,
    ) -> PyResult<()> {
        let bytes = contiguous_bytes(data)?;
        let d = Held::of(dst, &self.session)?;
        // The whole range first: nothing is copied into a range that does not fit.
        d.span(offset, bytes.len() as u64)?;
        let staging = self.staging(py, bytes.len())?;
        for (i, chunk) in bytes.chunks(STAGING).enumerate() {
            let at = offset + (i * STAGING) as u64;
            staging.write(0, chunk).py()?;
            let dst = d.span(at, chunk.len() as u64)?;
            self.through(py, &staging, chunk.len() as u64, |src| (src, dst))?;
        }
        Ok(())
    }

    /// The bytes of `src` (a buffer of this session or a GPU address in it) from
    /// `offset`: `size` of them (all of a buffer from `offset` by default; an address
    /// needs `size`), through staging host leases, waited for. Into `out` when given
    /// (anything writable with the buffer protocol, C-contiguous: a numpy array, whose
    /// length is then the size), which is returned; else as `bytes`.
    #[pyo3(signature = (src, out = None, size = None, offset = 0))]
    fn download<'py>(
        &self,
        py: Python<'py>,
        src: &Bound<'py, PyAny>,
        out: Option<Bound<'py, PyAny>>,
        size: Option<u64>,
        offset: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = Held::of(src, &self.session)?;
        let target = match &out {
            Some(o) => Some(writable_bytes(o)?),
            None => None,
        };
        let size = match (&target, size) {
            (Some(t), None) => t.item_count() as u64,
            (Some(t), Some(n)) if n != t.item_count() as u64 => {
                return Err(PyValueError::new_err(format!(
                    "`out` holds {} bytes, `size` says {n}",
                    t.item_count()
                )));
            }
            (_, n) => s.size(n, offset, "src")?,
        };
        s.span(offset, size)?;
        let len = usize::try_from(size).map_err(|_| PyValueError::new_err("too long"))?;
        let mut bytes = vec![0u8; len];
        let staging = self.staging(py, len)?;
        for (i, chunk) in bytes.chunks_mut(STAGING).enumerate() {
            let n = chunk.len() as u64;
            let from = s.span(offset + (i * STAGING) as u64, n)?;
            self.through(py, &staging, n, |dst| (from, dst))?;
            staging.read(0, chunk).py()?;
        }
        match (out, target) {
            (Some(o), Some(t)) => {
                t.copy_from_slice(py, &bytes)?;
                Ok(o)
            }
            _ => Ok(PyBytes::new(py, &bytes).into_any()),
        }
    }

    /// Replays `graph` (a `rig.Graph`) on the compute channel in one call: its first
    /// launch starts once every `Done` in `after` has landed, each after the one
    /// before. `submit="early"` (the default) rings the doorbell after the first
    /// launch, then after runs of 1, 2, 4, 8… launches, so the GPU starts while the
    /// rest are queued; `"once"` rings once, after the last. Held doorbells (`hold()`)
    /// keep all of it for `submit()`. Returns the last launch's `Done`, which lands
    /// after every launch of the graph. A launch refused mid-graph raises, naming it,
    /// with the launches before it submitted.
    #[pyo3(signature = (graph, after = Vec::new(), submit = "early"))]
    fn replay(
        &self,
        py: Python<'_>,
        graph: PyRef<'_, Graph>,
        after: Vec<After>,
        submit: &str,
    ) -> PyResult<Done> {
        let submit = submit.parse::<Submit>().py()?;
        let (after, fences) = deps(self, &after)?;
        let graph = &*graph;
        let done = self
            .with(py, |rt, _| {
                import(rt, Engine::Compute, &fences)?;
                rt.replay(&graph.lock(), &after, submit)
            })?
            .py()?;
        Ok(Done::of(done, self.id))
    }

    /// Holds the doorbells: launches, copies, fills and events from now on are queued
    /// on their channels and reach the GPU at `submit()` (or at a wait, which submits
    /// first), one submission per channel, so the GPU's time between two events is the
    /// work's and not the host's time between the calls.
    fn hold(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |rt, _| rt.hold())
    }

    /// Rings both channels' doorbells for everything queued and ends a `hold()`.
    fn submit(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |rt, _| rt.submit())?.py()
    }

    /// Records an event on the `engine` channel (`"compute"` by default): when that
    /// engine has finished everything submitted to it before, the GPU writes its timer
    /// there; after every `Done` in `after` too, waited for by the GPU. Returns at once.
    #[pyo3(signature = (engine = "compute", after = Vec::new()))]
    fn record(&self, py: Python<'_>, engine: &str, after: Vec<After>) -> PyResult<Event> {
        let which = self::engine(engine)?;
        let (after, fences) = deps(self, &after)?;
        let ev = self
            .with(py, |rt, _| {
                import(rt, which, &fences)?;
                rt.record(which, &after)
            })?
            .py()?;
        Ok(Event {
            engine: engine_name(which),
            id: ev.id,
            runtime: self.id,
        })
    }

    /// Records `event` (exported by this session) on the `engine` channel: once that
    /// engine finished everything submitted to it before, and every `Done` in `after`
    /// landed, the GPU releases its next value with its timer. Sent at once, even
    /// under `hold()`. Returns the value.
    #[pyo3(signature = (event, engine = "compute", after = Vec::new()))]
    fn record_shared(
        &self,
        py: Python<'_>,
        event: &SharedEvent,
        engine: &str,
        after: Vec<After>,
    ) -> PyResult<u64> {
        let which = self::engine(engine)?;
        let (after, fences) = deps(self, &after)?;
        // The event's lock is taken with the GIL let go, as the runtime's is (`with`).
        self.with(py, |rt, _| {
            let mut g = event.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let ev = g.as_mut()?;
            Some(import(rt, which, &fences).and_then(|()| rt.record_shared(ev, which, &after)))
        })?
        .ok_or_else(|| closed("shared event"))?
        .py()
    }

    /// Makes the next work on the `engine` channel wait on the GPU for `event`'s last
    /// record as of now (imported from another process): no host wait. Returns the
    /// value (0: nothing recorded yet, nothing to wait for); `event.check(value)` after
    /// that work says whether the exporter's work released it.
    #[pyo3(signature = (event, engine = "compute"))]
    fn wait_shared(&self, py: Python<'_>, event: &ImportedEvent, engine: &str) -> PyResult<u64> {
        let which = self::engine(engine)?;
        self.with(py, |rt, _| {
            let g = event.inner.lock().unwrap_or_else(PoisonError::into_inner);
            g.as_ref().map(|ev| rt.wait_shared(which, ev))
        })?
        .ok_or_else(|| closed("imported event"))?
        .py()
    }

    /// Waits on the host for `event`'s last record as of now, as the runtime's wait
    /// policy says (sleeping until the GPU's interrupt by default); returns the value,
    /// or raises `rig.Timeout` (naming the event and the value) or `rig.ExporterGone`.
    /// Adds no work to any channel.
    #[pyo3(signature = (event, timeout = None))]
    fn wait_event(
        &self,
        py: Python<'_>,
        event: &ImportedEvent,
        timeout: Option<f64>,
    ) -> PyResult<u64> {
        let t = timeout.map_or(Ok(self.timeout), seconds)?;
        self.with(py, |rt, _| {
            let g = event.inner.lock().unwrap_or_else(PoisonError::into_inner);
            g.as_ref().map(|ev| rt.wait_event(ev, t))
        })?
        .ok_or_else(|| closed("imported event"))?
        .py()
    }

    /// The GPU's time at `event`, in nanoseconds (its timer, the clock `%globaltimer`
    /// reads), waiting for it as `wait` does.
    #[pyo3(signature = (event, timeout = None))]
    fn event_time(&self, py: Python<'_>, event: Event, timeout: Option<f64>) -> PyResult<u64> {
        let t = timeout.map_or(Ok(self.timeout), seconds)?;
        let ev = event.to_rust(self)?;
        self.with(py, |rt, _| rt.event_time(ev, t))?.py()
    }

    /// The GPU's nanoseconds from `start` to `end` (CUDA's `cuEventElapsedTime`, in
    /// nanoseconds), waiting for both.
    #[pyo3(signature = (start, end, timeout = None))]
    fn elapsed(
        &self,
        py: Python<'_>,
        start: Event,
        end: Event,
        timeout: Option<f64>,
    ) -> PyResult<u64> {
        let t = timeout.map_or(Ok(self.timeout), seconds)?;
        let (a, b) = (start.to_rust(self)?, end.to_rust(self)?);
        self.with(py, |rt, _| rt.elapsed(a, b, t))?.py()
    }

    /// How `wait` spends its time until the value lands: `"spin"` (reads the
    /// semaphore throughout), `"yield"` (and yields the CPU past 50 µs), `"block"`
    /// (sleeps in the kernel until the GPU's interrupt), or `"spin_then_block"` (the
    /// default: yields for `spin_then_block_s`, then sleeps).
    #[getter]
    fn wait_policy(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(match self.with(py, |rt, _| rt.wait_policy())? {
            WaitPolicy::Spin => "spin",
            WaitPolicy::Yield => "yield",
            WaitPolicy::Block => "block",
            WaitPolicy::SpinThenBlock(_) => "spin_then_block",
        })
    }

    /// Whether launches queued back to back (under `hold()`) chain through their QMDs,
    /// each started by the one before when it is done, with no host word between them
    /// (on by default; docs/compute.md, "Chained launches").
    #[getter]
    fn chain(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |rt, _| rt.compute().chains())
    }

    #[setter]
    fn set_chain(&self, py: Python<'_>, on: bool) -> PyResult<()> {
        self.with(py, |rt, _| rt.compute().set_chain(on))
    }

    #[setter]
    fn set_wait_policy(&self, py: Python<'_>, policy: &str) -> PyResult<()> {
        let p = match policy {
            "spin" => WaitPolicy::Spin,
            "yield" => WaitPolicy::Yield,
            "block" => WaitPolicy::Block,
            "spin_then_block" => WaitPolicy::default(),
            other => {
                return Err(PyValueError::new_err(format!(
                    "A wait policy is \"spin\", \"yield\", \"block\" or \"spin_then_block\", not {other:?}"
                )));
            }
        };
        self.with(py, |rt, _| rt.set_wait_policy(p))
    }

    /// How long a `"spin_then_block"` wait yields before it sleeps, in seconds; setting
    /// it sets that policy.
    #[getter]
    fn spin_then_block_s(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        Ok(match self.with(py, |rt, _| rt.wait_policy())? {
            WaitPolicy::SpinThenBlock(d) => Some(d.as_secs_f64()),
            _ => None,
        })
    }

    #[setter]
    fn set_spin_then_block_s(&self, py: Python<'_>, spin: f64) -> PyResult<()> {
        let d = seconds(spin)?;
        self.with(py, |rt, _| rt.set_wait_policy(WaitPolicy::SpinThenBlock(d)))
    }

    /// For an event loop: has the GPU raise its interrupt once `done` has landed, and
    /// returns the descriptor that then turns readable (read 8 bytes to clear it, then
    /// ask `done()`); None when rigd lent the channel none, or it has no room for the
    /// words now (poll `done()` instead). `rig_gpu.wait_async` does all of it.
    fn wake_fd(&self, py: Python<'_>, done: Done) -> PyResult<Option<i32>> {
        let done = done.to_rust(self)?;
        self.with(py, |rt, _| rt.arm(done))?.py()
    }

    /// Whether `done`'s engine released its value, without waiting; raises `rig.Fault`
    /// when the GPU stopped the channel (faulted work never reads as done).
    fn done(&self, py: Python<'_>, done: Done) -> PyResult<bool> {
        let done = done.to_rust(self)?;
        self.with(py, |rt, _| rt.poll(done))?.py()
    }

    /// `<rig.Runtime of session S: compute channel C, copy channel K>`; never waits (a
    /// runtime in a wait on another thread shows as busy).
    fn __repr__(&self) -> String {
        let session = self.session.id().0;
        match self.inner.try_lock() {
            Ok(mut g) => match g.as_mut() {
                Some(rt) => format!(
                    "<rig.Runtime of session {session}: compute channel {}, copy channel {}>",
                    rt.compute().channel().id(),
                    rt.copies().channel().id()
                ),
                None => format!("<rig.Runtime of session {session} (closed)>"),
            },
            Err(_) => format!("<rig.Runtime of session {session} (busy)>"),
        }
    }

    /// Closes both channels in rigd (work in flight is waited for first).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = detached(py, |_| {
            self.inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        })?;
        let Some(rt) = taken else {
            return Ok(());
        };
        block(py, rt.close(&self.session))?.py()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        self.close(py)
    }
}
