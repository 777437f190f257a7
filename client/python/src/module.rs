//! Cubins for Python: `rig.inspect(bytes)` (what rig reads of a cubin, no GPU needed),
//! `rig.Module` (a cubin loaded into a session's GPU memory by `Runtime.load`) and
//! `rig.Kernel` (one of its kernels, as `Runtime.launch` takes it).
//!
//! Not here: parsing (rig-cubin), placing and uploading (rig-runtime's `load`).

use pyo3::prelude::*;
use rig_cubin::{Kernel as CubinKernel, Module as Cubin, Threads};

use crate::errors::IntoPy;

/// What rig read of one kernel of a cubin.
#[pyclass(module = "rig_gpu._rig", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct KernelInfo {
    /// The entry symbol's name.
    pub name: String,
    /// Registers per thread.
    pub registers: u32,
    /// Named barriers it uses.
    pub barriers: u32,
    /// Each parameter's size in bytes, in the signature's order.
    pub params: Vec<u32>,
    /// Static shared memory per block (the reserved bytes included), in bytes.
    pub shared_bytes: u32,
    /// The stack per thread its code needs (local memory), in bytes.
    pub stack_bytes: u32,
    /// The block shape it was compiled for: `("max", (x, y, z))` under
    /// `__launch_bounds__`, `("required", (x, y, z))` under `.reqntid`, else None.
    pub threads: Option<(&'static str, (u32, u32, u32))>,
}

impl KernelInfo {
    pub fn of(k: &CubinKernel) -> Self {
        Self {
            name: k.name().to_owned(),
            registers: k.registers(),
            barriers: k.barriers(),
            params: k.params().iter().map(|p| p.size).collect(),
            shared_bytes: k.shared().bytes(),
            stack_bytes: k.stack().bytes(),
            threads: match k.threads() {
                Threads::Any => None,
                Threads::Max([x, y, z]) => Some(("max", (x, y, z))),
                Threads::Required([x, y, z]) => Some(("required", (x, y, z))),
            },
        }
    }
}

#[pymethods]
impl KernelInfo {
    fn __repr__(&self) -> String {
        format!(
            "<rig.KernelInfo {} params={:?} registers={} shared={}>",
            self.name, self.params, self.registers, self.shared_bytes
        )
    }
}

/// What rig reads of the sm_90 cubin `data`: its kernels, in the cubin's order. A cubin
/// rig cannot run raises `rig.CubinError` naming what it is refused for.
#[pyfunction]
pub fn inspect(data: &[u8]) -> PyResult<Vec<KernelInfo>> {
    let m = Cubin::parse(data).py()?;
    Ok(m.kernels().iter().map(KernelInfo::of).collect())
}

/// A cubin loaded into a session's GPU memory. Its memory is freed when it and every
/// kernel taken from it are gone.
#[pyclass(module = "rig_gpu._rig", frozen)]
#[derive(Debug)]
pub struct Module {
    pub(crate) inner: rig_runtime::Module,
}

#[pymethods]
impl Module {
    /// The names of its kernels.
    #[getter]
    fn kernels(&self) -> Vec<String> {
        self.inner.kernels().map(str::to_owned).collect()
    }

    /// The kernel `name` (`KeyError` when there is none).
    fn kernel(&self, name: &str) -> PyResult<Kernel> {
        let k = self.inner.kernel(name).py()?;
        let info = KernelInfo::of(k.info());
        Ok(Kernel { inner: k, info })
    }

    /// The GPU address of the `__constant__` or `__device__` variable `name`, or None.
    fn variable(&self, name: &str) -> Option<u64> {
        self.inner.variable(name).map(|v| v.0)
    }

    fn __getitem__(&self, name: &str) -> PyResult<Kernel> {
        self.kernel(name)
    }

    fn __repr__(&self) -> String {
        format!("<rig.Module kernels={:?}>", self.kernels())
    }
}

/// A kernel of a loaded module.
#[pyclass(module = "rig_gpu._rig", frozen)]
#[derive(Debug)]
pub struct Kernel {
    pub(crate) inner: rig_runtime::Kernel,
    info: KernelInfo,
}

#[pymethods]
impl Kernel {
    /// Its name.
    #[getter]
    fn name(&self) -> String {
        self.info.name.clone()
    }

    /// What rig read of it.
    #[getter]
    fn info(&self) -> KernelInfo {
        self.info.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "<rig.Kernel {} params={:?}>",
            self.info.name, self.info.params
        )
    }
}

impl Kernel {
    /// Each parameter's size, in order.
    pub fn param_sizes(&self) -> &[u32] {
        &self.info.params
    }
}
