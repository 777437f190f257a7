//! rig-runtime: CUDA kernels and copies on a GPU rigd serves, above the lean
//! rig-client: load an sm_90 cubin into the session's memory, launch its kernels on a
//! lent compute channel (`ch.launch(&kernel, grid, block, dynamic_shared, &args)`),
//! copy between host leases and GPU memory, and know each is done when the engine
//! that did it says so.
//!
//! Flow (bytes → module → memory → template → channel): rig-cubin parses and places a
//! cubin, [`load`] uploads its image through a [`copy::CopyChannel`]; a
//! [`compute::ComputeChannel`] checks each launch's [`launch::Shape`] and arguments
//! ([`params`]), builds constant bank 0 ([`cbank0`]) and the QMD ([`qmd`]) once per
//! (kernel, shape) into a template (`template`) whose slots live in the channel's
//! arena (`arena`), patches a slot per launch and sends rig-nv's
//! `method::compute` words; [`window`] holds the per-channel rules (window bases, SLM
//! size). [`runtime::Runtime`] puts a compute channel, a copy channel and the copy
//! kernel ([`builtin`]) together and sends each copy where it is fastest. Memory comes
//! through the [`memory::Memory`] and [`memory::Alloc`] traits (host leases now, GPU
//! memory beside them). [`event`] records the GPU's time on either channel. A
//! [`graph`] records launches once for [`runtime::Runtime::replay`] to queue in one call.
//! [`value`] checks the places of values the channels write and wait on in the
//! session's memory.
//!
//! Completion: a kernel's value is released by its QMD's release slot (64 bits), a
//! copy's by the copy engine in the copy's own LAUNCH_DMA (32 bits, compared
//! circularly); work that faulted never reads as done, and the wait returns the RM's
//! fault (docs/compute.md, "Completion").
//!
//! Invariants: no `unsafe`; every refusal (a cubin rig cannot run, a shape, an
//! argument, memory the session does not hold) is a typed error naming the value and
//! the limit, returned before anything is submitted.
//!
//! References: docs/hardware/nvidia-compute.md; docs/compute.md. The hardware words
//! (methods, QMD fields) and their headers are rig-nv's.
#![forbid(unsafe_code)]

mod arena;
pub mod builtin;
pub mod cbank0;
pub mod compute;
pub mod copy;
pub mod event;
pub mod graph;
pub mod launch;
pub mod load;
pub mod memory;
pub mod occupancy;
pub mod params;
pub mod qmd;
pub mod runtime;
mod template;
#[cfg(test)]
mod testing;
pub mod value;
pub mod window;

pub use cbank0::{Bank0, Cbank0Error};
pub use compute::{ComputeChannel, ComputeError, ComputeOptions};
pub use copy::{CopyChannel, CopyError, CopyOptions};
pub use event::{Event, EventError, EventPage};
pub use graph::{Graph, GraphError, Submit};
pub use launch::{Dim3, LaunchError, Shape};
pub use load::{Kernel, LoadError, Module};
pub use memory::{Alloc, GpuAlloc, HostAlloc, Memory, MemoryError, Place, Span, gpu_va, region_at};
pub use params::Arg;
pub use qmd::{ConstantBuffer, Launch, Qmd, QmdError, QmdVersion, Release, ReleaseKind};
pub use rig_nv::method::compute::PcasAction;
/// A launch's SEND_SIGNALING_PCAS2_B action ([`ComputeOptions::pcas`]).
pub use runtime::{Done, Runtime, RuntimeError, RuntimeOptions};
pub use value::{OverTimeline, ValueError};
pub use window::{Geometry, Slm, WindowError, Windows};
