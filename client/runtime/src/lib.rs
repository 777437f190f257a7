//! rig-runtime: the pure core of rig's GPU runtime on Hopper: constant bank 0, the QMD
//! (chosen by compute class), the launch and copy-engine method words, and the memory
//! windows and local memory sizing a compute channel needs.
//!
//! Flow (bytes → module → memory → QMD → channel): rig-cubin parses and places a cubin;
//! the runtime uploads its image, then per launch checks a [`launch::Shape`], builds
//! constant bank 0 ([`cbank0`]) and the QMD ([`qmd`]), writes both to GPU memory and sends
//! the `method::compute` words of rig-client on a lent compute channel; copies and fills go through
//! rig-client's `method::copy`. [`window`] holds the per-channel rules (window bases, SLM size).
//!
//! Invariants: no I/O and no `unsafe`: every function here computes bytes or words from
//! its arguments, and every value a field cannot hold, or a limit forbids, is a typed
//! error naming the value and the limit. Sessions, GPU memory and channels (rig-client)
//! are the layer this one will sit on.
//!
//! References: NVIDIA open-gpu-doc `classes/compute/clcbc0.h` and `clcbc0qmd.h`,
//! open-gpu-kernel-modules 580.142 `clc8b5.h` (copies of all three in `headers/`, read
//! by the tests); docs/hardware/nvidia-compute.md.
#![forbid(unsafe_code)]

pub mod cbank0;
pub mod launch;
pub mod qmd;
#[cfg(test)]
mod testing;
pub mod window;

pub use cbank0::{Bank0, Cbank0Error};
pub use launch::{Dim3, LaunchError, Shape};
pub use qmd::{ConstantBuffer, Launch, Qmd, QmdError, QmdVersion, Release, ReleaseKind};
pub use window::{Geometry, Slm, WindowError, Windows};
