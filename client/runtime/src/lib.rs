//! rig-runtime: the pure core of rig's GPU runtime on Hopper: constant bank 0, the QMD
//! (chosen by compute class), the launch and copy-engine method words, and the memory
//! windows and local memory sizing a compute channel needs.
//!
//! Flow (bytes → module → memory → QMD → channel): rig-cubin parses and places a cubin;
//! the runtime uploads its image, then per launch checks a [`launch::Shape`] and builds
//! constant bank 0 ([`cbank0`]). [`window`] holds the per-channel rules (window bases, SLM
//! size).
//!
//! Invariants: no I/O and no `unsafe`: every function here computes bytes or words from
//! its arguments, and every value a field cannot hold, or a limit forbids, is a typed
//! error naming the value and the limit. Sessions, GPU memory and channels (rig-client)
//! are the layer this one will sit on.
//!
//! References: docs/hardware/nvidia-compute.md; CUDA C++ Programming Guide (sm_90's
//! limits).
#![forbid(unsafe_code)]

pub mod cbank0;
pub mod launch;
#[cfg(test)]
mod testing;
pub mod window;

pub use cbank0::{Bank0, Cbank0Error};
pub use launch::{Dim3, LaunchError, Shape};
pub use window::{Geometry, Slm, WindowError, Windows};
