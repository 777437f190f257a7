//! rig-nv: every NVIDIA hardware word rig writes, in one pure crate (no I/O, no async,
//! no `unsafe`).
//!
//! Flow: NVIDIA's public class headers (`headers/`, vendored unmodified) → [`class`]
//! (generated: one constant per `#define`) → the encoders, which turn what rig means
//! into words: [`method`] (pushbuffer headers and the host, copy and compute methods),
//! [`gpfifo`] (ring entries, USERD, the doorbell), [`qmd`] (launch descriptors: one
//! field table per QMD version, one file each, behind one encoder that
//! [`qmd::for_class`] picks by compute class) → rig-client and rig-runtime write the
//! words into device-visible memory; rigd allocates the classes [`generation`] names.
//!
//! [`generation`] says which classes and which QMD version a GPU generation uses, one
//! constant per generation (Hopper, Blackwell). A new generation's facts go there, its
//! headers into `headers/` (regenerate [`class`]), and a new QMD version into `qmd/`.
//!
//! Not here: the RM's objects and control calls (rigd's `nvrm`), the ring's index
//! arithmetic and the doorbell's mapping (rig-client's `channel`), cubins (rig-cubin),
//! the checks a kernel and launch shape need before a QMD is built (rig-runtime).
#![forbid(unsafe_code)]

pub mod class;
pub mod field;
pub mod generation;
pub mod gpfifo;
pub mod method;
pub mod qmd;

pub use field::{Field, FieldError, MwField};
pub use generation::Generation;
