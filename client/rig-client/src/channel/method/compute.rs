//! The compute class, HOPPER_COMPUTE_A, bound to [`SUBCH_COMPUTE`] when a compute
//! channel opens (`Channel::open` with `Engine::Compute`). Today a compute channel
//! runs host methods only (releases, acquires); the kernel launch methods of this
//! class (NVCBC0_*: the QMD's address and its send, the shared and local memory
//! windows, constant buffer uploads) belong in this file, beside the class they are
//! methods of, with the QMD itself built per version elsewhere.
//!
//! Reference: open-gpu-kernel-modules 580.142 `src/common/sdk/nvidia/inc/class/
//! clcbc0.h` (HOPPER_COMPUTE_A, NVCBC0_*). Not here: the header encoding (this
//! module's parent), releases and acquires (`host`).

use super::Subchannel;

/// HOPPER_COMPUTE_A (clcbc0.h).
pub const HOPPER_COMPUTE_A: u32 = 0xcbc0;

/// The subchannel rig binds the compute class to (tinygrad's choice, which the RM's
/// classes do not constrain).
pub const SUBCH_COMPUTE: Subchannel = Subchannel(1);
