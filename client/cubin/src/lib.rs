//! rig-cubin: an sm_90 CUDA cubin's bytes in, a typed module out: its kernels (code,
//! registers, parameters, shared and local memory, barriers, thread limits), its constant
//! banks and global data, its relocations, and a placement of all of it at GPU addresses.
//!
//! Flow: bytes (from nvcc, ptxas, NVRTC or Triton) → [`Module::parse`] (`module`, reading
//! `.nv.info` through `info`, kernels through `kernel`, relocations through `reloc`) →
//! [`Module::layout`] → [`Layout::place`] (`image`) → rig-runtime uploads the image, builds
//! constant bank 0 and the QMD from a [`Kernel`], and launches.
//!
//! Invariants: no I/O, no `unsafe`, no panics: every offset is checked before it is read
//! (`.get(range)`, checked arithmetic), and a malformed or unsupported cubin is a typed
//! error that names what is wrong. Anything a launch would need but rig cannot provide
//! (clusters, printf and other runtime calls, textures, `-rdc` output, unknown
//! relocations or attributes) is refused by name, never launched wrongly. Cooperative
//! groups load: what a grid sync needs comes from the launch (rig-runtime's cooperative
//! launches), not from the module.
//!
//! References: docs/hardware/nvidia-compute.md (the cubin's sections and EIATTR
//! records); LLVM `BinaryFormat/ELF.h` (the CUDA ELF header). The ELF structures are
//! read by rig-elf. Not here: GPU memory, QMDs, channels (rig-runtime).
#![forbid(unsafe_code)]

pub mod image;
pub mod info;
pub mod kernel;
pub mod module;
pub mod reloc;

pub use image::{Bank, Image, ImageError, Layout};
pub use info::{Eiattr, InfoError};
pub use kernel::{Kernel, KernelError, Param, SM90_RESERVED_SHARED, Shared, Stack, Threads};
pub use module::{Module, ModuleError, Target};
pub use reloc::{RelocError, RelocType};
