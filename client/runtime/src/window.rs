//! The shared and local memory windows of a compute channel, and the size of the local
//! memory (SLM) buffer behind the local window.
//!
//! Flow: the runtime picks the two window bases once per channel, clear of every mapping
//! in the client's GPU address space ([`Windows::new`] checks them); `rig_nv::method::compute`
//! programs them; `cbank0` writes them at c[0x0][0x18] and c[0x0][0x20]. When a kernel
//! uses local memory ([`local_bytes`]), the runtime sizes an SLM buffer with [`slm`] for
//! the GPU's geometry ([`Geometry`]) and programs it with `rig_nv::method::compute`.
//!
//! Rules (docs/hardware/nvidia-compute.md, from Mesa NVK `nvk_slm_area_ensure` and
//! tinygrad `ops_nv.py` `_ensure_has_local_memory`): the shared window is 4 GiB wide,
//! 4 GiB aligned and not 0, and hides every global address inside it; the local window
//! is 16 MiB wide. CUDA code keeps its stack at the top of the local window: the stack
//! pointer starts at 16 MiB − 0x240 ([`STACK_TOP`]), so a thread with a stack of S bytes
//! uses S + 0x240 bytes at the window's top, rounded up to 32 ([`local_bytes`]). The SLM
//! buffer holds that per thread for every warp slot of every TPC: per warp
//! round_up(bytes × 32, 0x200), per TPC round_up(per warp × warps per SM × SMs per TPC,
//! 0x8000), in all round_up(per TPC × TPCs, 0x20000).

use rig_cubin::Kernel;
use rig_model::addr::GpuVa;

/// Width of the shared memory window (4 GiB).
pub const SHARED_WINDOW_SIZE: u64 = 1 << 32;
/// Width of the local memory window (16 MiB).
pub const LOCAL_WINDOW_SIZE: u64 = 16 << 20;
/// Bytes above CUDA's initial stack pointer at the top of the local window.
pub const STACK_RESERVE: u32 = 0x240;
/// CUDA's initial stack pointer, c[0x0][0x28]: the local window's top less the reserve.
pub const STACK_TOP: u32 = 0x00ff_fdc0;
/// The window methods take bits 48:32 of a base in 17 bits: bases lie below 2^49.
pub const WINDOW_LIMIT: u64 = 1 << 49;

/// Granularity of local memory per thread.
const PER_THREAD_ALIGN: u32 = 32;
/// Granularity of local memory per warp.
const PER_WARP_ALIGN: u64 = 0x200;
/// Granularity of local memory per TPC.
const PER_TPC_ALIGN: u64 = 0x8000;
/// Granularity of the whole SLM buffer.
const TOTAL_ALIGN: u64 = 0x2_0000;

/// Window bases a compute channel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    shared: u64,
    local: u64,
}

/// A window or SLM geometry rig will not program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// The shared window's base is 0, not 4 GiB aligned, or past 2^49.
    #[error("shared window at {base:#x}: it must be non-zero, 4 GiB aligned and end by 2^49")]
    Shared {
        /// The base asked for.
        base: u64,
    },
    /// The local window's base is not 16 MiB aligned, or past 2^49.
    #[error("local window at {base:#x}: it must be 16 MiB aligned and end by 2^49")]
    Local {
        /// The base asked for.
        base: u64,
    },
    /// The two windows overlap.
    #[error("the local window at {local:#x} lies inside the shared window at {shared:#x}")]
    Overlap {
        /// The shared window's base.
        shared: u64,
        /// The local window's base.
        local: u64,
    },
    /// A geometry with a zero count.
    #[error("a GPU geometry with no TPCs, SMs or warps: {geometry:?}")]
    Geometry {
        /// What was given.
        geometry: Geometry,
    },
    /// Local memory per thread beyond the local window.
    #[error("{bytes} bytes of local memory per thread; the window holds {max}")]
    PerThread {
        /// Bytes asked for.
        bytes: u64,
        /// The limit.
        max: u64,
    },
}

impl Windows {
    /// The shared window at `shared` and the local window at `local`.
    ///
    /// # Errors
    /// [`WindowError::Shared`], [`WindowError::Local`] or [`WindowError::Overlap`].
    pub fn new(shared: GpuVa, local: GpuVa) -> Result<Windows, WindowError> {
        let (shared, local) = (shared.get(), local.get());
        if shared == 0
            || !shared.is_multiple_of(SHARED_WINDOW_SIZE)
            || shared > WINDOW_LIMIT - SHARED_WINDOW_SIZE
        {
            return Err(WindowError::Shared { base: shared });
        }
        if !local.is_multiple_of(LOCAL_WINDOW_SIZE) || local > WINDOW_LIMIT - LOCAL_WINDOW_SIZE {
            return Err(WindowError::Local { base: local });
        }
        if (shared..shared + SHARED_WINDOW_SIZE).contains(&local) {
            return Err(WindowError::Overlap { shared, local });
        }
        Ok(Windows { shared, local })
    }

    /// The shared window's base.
    pub fn shared(&self) -> GpuVa {
        GpuVa(self.shared)
    }

    /// The local window's base.
    pub fn local(&self) -> GpuVa {
        GpuVa(self.local)
    }

    /// The GPU virtual ranges both windows take; no mapping may overlap them.
    pub fn reserved(&self) -> [std::ops::Range<GpuVa>; 2] {
        [
            GpuVa(self.shared)..GpuVa(self.shared + SHARED_WINDOW_SIZE),
            GpuVa(self.local)..GpuVa(self.local + LOCAL_WINDOW_SIZE),
        ]
    }
}

/// Bytes of local memory per thread a launch of `kernel` needs at the top of the local
/// window (the QMD's SHADER_LOCAL_MEMORY_HIGH_SIZE): 0 for a kernel with no stack, else
/// its stack and the reserve above the stack pointer, rounded up to 32 bytes.
pub fn local_bytes(kernel: &Kernel) -> u64 {
    match kernel.stack().bytes() {
        0 => 0,
        stack => {
            (u64::from(stack) + u64::from(STACK_RESERVE)).next_multiple_of(PER_THREAD_ALIGN.into())
        }
    }
}

/// The GPU's shape as the SLM buffer is sized for it (NV2080_CTRL_CMD_GR_GET_INFO's
/// LITTER_NUM_GPCS × LITTER_NUM_TPC_PER_GPC, LITTER_NUM_SM_PER_TPC, MAX_WARPS_PER_SM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// TPC slots: GPCs × TPCs per GPC, the full count (tinygrad sizes for it, not for
    /// the TPCs a part has enabled).
    pub tpcs: u32,
    /// SMs per TPC.
    pub sms_per_tpc: u32,
    /// Warps an SM holds at once.
    pub max_warps_per_sm: u32,
    /// SMs enabled on this part (enabled TPCs × SMs per TPC): how many blocks of a
    /// cooperative grid can be resident at once (`occupancy`). 0: not known.
    pub sms: u32,
}

/// GH100's full shape (8 GPCs of 9 TPCs, 2 SMs per TPC, 64 warps per SM): what ran on
/// the H200 (docs/hardware/nvidia-compute.md, "What the H200 ran"). Local memory is
/// sized for the session's own GPU as rigd read it at the claim; this shape only when
/// rigd could not read one (its GR_GET_INFO failed, and said so in its log).
pub const GH100: Geometry = Geometry {
    tpcs: 72,
    sms_per_tpc: 2,
    max_warps_per_sm: 64,
    // GH100 parts enable different SMs (132 on the H100 SXM and H200, 114 on the H100
    // PCIe): without rigd's count none is assumed.
    sms: 0,
};

impl Geometry {
    /// The shape of `session`'s GPU as rigd read it at the claim (every TPC slot:
    /// GPCs × TPCs per GPC), or [`GH100`]'s when rigd read none.
    pub fn of_session(session: &rig_client::session::Session) -> Geometry {
        session
            .gpu()
            .and_then(|g| g.geometry.as_ref())
            .map_or(GH100, |g| Geometry {
                tpcs: g.gpcs.saturating_mul(g.max_tpcs_per_gpc),
                sms_per_tpc: g.sms_per_tpc,
                max_warps_per_sm: g.max_warps_per_sm,
                sms: g.sms(),
            })
    }
}

/// An SLM buffer's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slm {
    /// Bytes per thread it holds (≥ what was asked, rounded to 32).
    pub per_thread: u32,
    /// Bytes per TPC: SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A/B.
    pub per_tpc: u64,
    /// Bytes of the whole buffer.
    pub total: u64,
}

/// The SLM buffer for `per_thread` bytes of local memory per thread on `geometry`.
///
/// # Errors
/// [`WindowError::Geometry`] for a zero count; [`WindowError::PerThread`] for more than
/// the local window holds.
pub fn slm(per_thread: u64, geometry: Geometry) -> Result<Slm, WindowError> {
    if geometry.tpcs == 0 || geometry.sms_per_tpc == 0 || geometry.max_warps_per_sm == 0 {
        return Err(WindowError::Geometry { geometry });
    }
    let per_thread = u32::try_from(per_thread.next_multiple_of(PER_THREAD_ALIGN.into()))
        .ok()
        .filter(|&b| u64::from(b) <= LOCAL_WINDOW_SIZE)
        .ok_or(WindowError::PerThread {
            bytes: per_thread,
            max: LOCAL_WINDOW_SIZE,
        })?;
    // At most 2^24 × 32 × 2^32 × 2^32 × 2^32: computed in u128, then checked.
    let per_warp = u128::from((u64::from(per_thread) * 32).next_multiple_of(PER_WARP_ALIGN));
    let per_tpc =
        (per_warp * u128::from(geometry.max_warps_per_sm) * u128::from(geometry.sms_per_tpc))
            .next_multiple_of(PER_TPC_ALIGN.into());
    let total = (per_tpc * u128::from(geometry.tpcs)).next_multiple_of(TOTAL_ALIGN.into());
    let too_big = || WindowError::PerThread {
        bytes: per_thread.into(),
        max: LOCAL_WINDOW_SIZE,
    };
    Ok(Slm {
        per_thread,
        per_tpc: u64::try_from(per_tpc).map_err(|_| too_big())?,
        total: u64::try_from(total).map_err(|_| too_big())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::kernels;

    #[test]
    fn the_stack_top_is_16_mib_less_the_reserve() {
        assert_eq!(u64::from(STACK_TOP + STACK_RESERVE), LOCAL_WINDOW_SIZE);
    }

    #[test]
    fn windows_need_their_alignment_and_must_not_overlap() {
        let w = Windows::new(GpuVa(1 << 32), GpuVa(0xff00_0000)).expect("NVK's bases");
        assert_eq!(
            w.reserved(),
            [
                GpuVa(1 << 32)..GpuVa(2 << 32),
                GpuVa(0xff00_0000)..GpuVa(0x1_0000_0000)
            ]
        );
        assert_eq!(
            Windows::new(GpuVa(0), GpuVa(0xff00_0000)),
            Err(WindowError::Shared { base: 0 })
        );
        assert_eq!(
            Windows::new(GpuVa((1 << 32) + 4096), GpuVa(0)),
            Err(WindowError::Shared {
                base: (1 << 32) + 4096
            })
        );
        assert_eq!(
            Windows::new(GpuVa(1 << 32), GpuVa(0xff00_1000)),
            Err(WindowError::Local { base: 0xff00_1000 })
        );
        assert_eq!(
            Windows::new(GpuVa(1 << 32), GpuVa((1 << 32) + (16 << 20))),
            Err(WindowError::Overlap {
                shared: 1 << 32,
                local: (1 << 32) + (16 << 20)
            })
        );
        // The highest bases that still end by 2^49, and one step past them.
        let top_shared = WINDOW_LIMIT - SHARED_WINDOW_SIZE;
        let top_local = WINDOW_LIMIT - LOCAL_WINDOW_SIZE;
        Windows::new(GpuVa(top_shared), GpuVa(top_local - SHARED_WINDOW_SIZE))
            .expect("within the limits");
        assert_eq!(
            Windows::new(GpuVa(WINDOW_LIMIT), GpuVa(0)),
            Err(WindowError::Shared { base: WINDOW_LIMIT })
        );
        assert_eq!(
            Windows::new(GpuVa(1 << 32), GpuVa(WINDOW_LIMIT)),
            Err(WindowError::Local { base: WINDOW_LIMIT })
        );
    }

    #[test]
    fn local_bytes_are_the_stack_and_the_reserve_rounded_to_32() {
        let m = kernels();
        assert_eq!(local_bytes(m.kernel("saxpy").expect("saxpy")), 0);
        // 0x400 of stack + 0x240 = 0x640 (CUDA's own figure for such a kernel).
        assert_eq!(
            local_bytes(m.kernel("local_array").expect("local_array")),
            0x640
        );
    }

    #[test]
    fn slm_rounds_per_warp_per_tpc_and_in_all() {
        let s = slm(0x640, GH100).expect("fits");
        // per warp 0x640 × 32 = 0xc800 (a multiple of 0x200); per TPC × 128 warps = 0x640000.
        assert_eq!(
            s,
            Slm {
                per_thread: 0x640,
                per_tpc: 0x64_0000,
                total: 0x64_0000 * 72
            }
        );
        let one = slm(1, GH100).expect("fits");
        assert_eq!(one.per_thread, 32);
        assert_eq!(one.per_tpc, 0x2_0000); // 32 × 32 = 0x400 → × 128 = 0x20000
        assert_eq!(slm(0, GH100).map(|s| s.total), Ok(0));
        assert_eq!(
            slm(LOCAL_WINDOW_SIZE + 1, GH100),
            Err(WindowError::PerThread {
                bytes: LOCAL_WINDOW_SIZE + 1,
                max: LOCAL_WINDOW_SIZE
            })
        );
        slm(LOCAL_WINDOW_SIZE, GH100).expect("within the limits");
        let none = Geometry { tpcs: 0, ..GH100 };
        assert_eq!(slm(32, none), Err(WindowError::Geometry { geometry: none }));
    }
}
