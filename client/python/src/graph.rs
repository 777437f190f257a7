//! Graphs for Python: `rig.Graph`, launches recorded once (rig-runtime's `Graph`: each
//! one's kernel, shape and arguments, checked and laid out when added) and replayed by
//! `Runtime.replay(graph)` in one call, so a replayed launch costs no Python call and
//! no argument conversion; `set_arg` and `set_dims` patch one launch between replays.
//!
//! Not here: what a replay sends and when it rings (rig-runtime's `graph` and
//! `Runtime::replay`); the conversion of a Python value into an argument
//! (`args`, shared with `Runtime.launch`).

use std::sync::{Mutex, MutexGuard, PoisonError};

use pyo3::{prelude::*, types::PyBytes};
use rig_runtime::GraphError;

use crate::{
    args::{arg, dim3, typed_args},
    errors::IntoPy,
    module::Kernel,
};

/// A grid's or a block's three extents, as Python sees them.
type Extents = (u32, u32, u32);

/// Launches recorded once and replayed by `Runtime.replay`: CUDA's graphs, for a
/// runtime that launches the same kernels again and again (tinygrad's `TinyJit`).
#[pyclass(module = "rig_gpu._rig", frozen)]
#[derive(Debug, Default)]
pub struct Graph {
    inner: Mutex<rig_runtime::Graph>,
}

impl Graph {
    /// The recorded graph (a replay holds it for its length, the GIL released).
    pub(crate) fn lock(&self) -> MutexGuard<'_, rig_runtime::Graph> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[pymethods]
impl Graph {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Records a launch of `kernel` on `grid` blocks of `block` threads with `shared`
    /// bytes of dynamic shared memory, `args` one per parameter as `Runtime.launch`
    /// takes them, checked now (`rig.LaunchError`); returns its index. Nothing reaches
    /// the GPU.
    #[pyo3(signature = (kernel, grid, block, args = Vec::new(), shared = 0))]
    fn add(
        &self,
        kernel: PyRef<'_, Kernel>,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: Vec<Bound<'_, PyAny>>,
        shared: u32,
    ) -> PyResult<usize> {
        let mut store = vec![Vec::new(); args.len()];
        let typed = typed_args(&kernel, &args, &mut store)?;
        let (grid, block) = (dim3(grid)?, dim3(block)?);
        self.lock()
            .add(&kernel.inner, grid, block, shared, &typed)
            .py()
    }

    /// Sets argument `index` of launch `launch` to `value` (as `Runtime.launch` takes
    /// it) for the replays from now on.
    fn set_arg(&self, launch: usize, index: usize, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut g = self.lock();
        let size = g.arg_size(launch, index).py()?;
        let mut bytes = Vec::new();
        let a = arg(value, size, index, &mut bytes)?;
        g.set_arg(launch, index, a).py()
    }

    /// Sets launch `launch`'s grid and block, checked as `Runtime.launch` checks them.
    fn set_dims(
        &self,
        launch: usize,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (grid, block) = (dim3(grid)?, dim3(block)?);
        self.lock().set_shape(launch, grid, block).py()
    }

    /// Launch `launch`'s grid and block, as `(x, y, z)` tuples.
    fn dims(&self, launch: usize) -> PyResult<(Extents, Extents)> {
        let g = self.lock();
        let (grid, block) = g.shape(launch).ok_or_else(|| no_launch(&g, launch)).py()?;
        Ok(((grid.x, grid.y, grid.z), (block.x, block.y, block.z)))
    }

    /// Launch `launch`'s parameter bytes as the kernel receives them.
    fn params<'py>(&self, py: Python<'py>, launch: usize) -> PyResult<Bound<'py, PyBytes>> {
        let g = self.lock();
        let p = g.params(launch).ok_or_else(|| no_launch(&g, launch)).py()?;
        Ok(PyBytes::new(py, p))
    }

    fn __len__(&self) -> usize {
        self.lock().len()
    }

    fn __repr__(&self) -> String {
        format!("<rig.Graph launches={}>", self.lock().len())
    }
}

fn no_launch(g: &rig_runtime::Graph, launch: usize) -> GraphError {
    GraphError::NoLaunch {
        launch,
        len: g.len(),
    }
}
