//! rig from Python: the extension module `rig_gpu._rig`, which the `rig_gpu` package
//! (`python/rig/__init__.py`) re-exports. It wraps the lean client library and the
//! runtime above it; it adds no protocol and no GPU knowledge of its own.
//!
//! Flow: a [`session::Session`] opens rigd's session on a device (`Session::open`);
//! from it come host memory ([`buffer::HostBuffer`], readable and writable from Python
//! through the buffer protocol: [`buffer`]), GPU memory ([`gpumem::GpuBuffer`]) and a
//! [`runtime::Runtime`] (a compute and a copy channel), which loads cubins
//! ([`module::Module`]), launches their kernels and copies, each returning a
//! [`runtime::Done`] to wait on, or records them once into a [`graph::Graph`] to
//! replay in one call; events shared with another process of the uid
//! ([`events`]) order work across sessions. [`module::inspect`] reads a cubin without a
//! GPU.
//! [`args`] turns Python values into kernel arguments and launch shapes for both.
//! [`space::Region`] says which lease holds an address (`Session.find`), for callers
//! that name memory by address.
//!
//! Calls are synchronous for Python: each runs on one tokio runtime of the extension
//! ([`block`]) with the GIL released, so other Python threads run while a call waits
//! for rigd or the GPU. Errors become the exceptions of [`errors`], each carrying the
//! whole chain of causes as its message and rigd's reason or the GPU's fault as
//! attributes.
//!
//! Not here: what the objects mean (rig-client, rig-runtime, docs/python.md); the
//! wheel's packing (pyproject.toml, pack-wheel.py).

mod args;
mod block;
pub(crate) mod buffer;
mod devices;
mod errors;
mod events;
mod gpumem;
mod graph;
mod module;
mod runtime;
mod session;
mod space;

use pyo3::prelude::*;

/// The extension module.
#[pymodule]
fn _rig(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add("DEFAULT_SOCKET", rig_client::DEFAULT_SOCKET)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The SM the cubins rig loads are for (rig-cubin refuses others).
    m.add("ARCH", format!("sm_{}", rig_cubin::module::SM))?;
    m.add_class::<session::Session>()?;
    m.add_class::<buffer::HostBuffer>()?;
    m.add_class::<gpumem::GpuBuffer>()?;
    m.add_class::<space::Region>()?;
    m.add_class::<runtime::Runtime>()?;
    m.add_class::<runtime::Done>()?;
    m.add_class::<runtime::Fence>()?;
    m.add_class::<runtime::Event>()?;
    m.add_class::<events::SharedEvent>()?;
    m.add_class::<events::ImportedEvent>()?;
    m.add_class::<module::Module>()?;
    m.add_class::<module::Kernel>()?;
    m.add_class::<module::KernelInfo>()?;
    m.add_class::<graph::Graph>()?;
    m.add_function(wrap_pyfunction!(module::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(devices::devices, m)?)?;
    m.add_function(wrap_pyfunction!(args::_launch_args, m)?)?;
    Ok(())
}
