//! How many blocks of one launch an SM holds at once, and whether a cooperative grid
//! fits on the GPU all at once.
//!
//! Flow: a [`rig_cubin::Kernel`], a checked [`Shape`] and the GPU's [`Geometry`] →
//! [`blocks_per_sm`] (the least of four limits: warps, blocks, registers, shared
//! memory) → [`cooperative`] checks a grid against it × the SMs enabled, before a
//! cooperative launch is built (`compute`).
//!
//! The rules are CUDA's occupancy calculator's for compute capability 9.0
//! (docs/hardware/nvidia-compute.md, "Cooperative launches"): registers go to warps in
//! units of 256 and each of an SM's 4 sub-partitions holds a quarter of its 65,536;
//! shared memory goes to blocks in units of 128 bytes, each block with its 1 KiB
//! reservation, out of the largest carve-out (every QMD allows it; a cooperative one
//! also asks for at least its share of the grid, `qmd`). Not here: the shape's own
//! limits (`launch`).

use rig_cubin::{Kernel, SM90_RESERVED_SHARED};

use crate::launch::{
    MAX_BLOCKS_PER_SM, MAX_REGISTERS_PER_BLOCK, MAX_SHARED_PER_SM, REGISTER_ALLOCATION_UNIT, Shape,
    WARP,
};
use crate::window::Geometry;

/// An SM's register file is split between this many sub-partitions, each holding its
/// own warps' registers.
pub const SUB_PARTITIONS: u32 = 4;
/// Shared memory is given to blocks in units of this many bytes.
pub const SHARED_ALLOCATION_UNIT: u32 = 128;

/// What bounds the blocks an SM holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The warps an SM holds.
    Warps,
    /// The blocks an SM holds (32).
    Blocks,
    /// The registers of its sub-partitions.
    Registers,
    /// Its shared memory.
    Shared,
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Limit::Warps => "its warps",
            Limit::Blocks => "its block slots",
            Limit::Registers => "its registers",
            Limit::Shared => "its shared memory",
        })
    }
}

/// Blocks of one launch resident on an SM at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Residency {
    /// How many.
    pub per_sm: u32,
    /// The limit that allows no more.
    pub limit: Limit,
}

/// Why a cooperative grid cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CooperativeError {
    /// More blocks than the GPU holds at once: a grid sync would wait forever for blocks
    /// that cannot start until others end.
    #[error(
        "a cooperative grid of {blocks} blocks cannot be resident at once: each of the {sms} SMs holds {per_sm} blocks of this shape (bounded by {limit}), {most} in all"
    )]
    TooLarge {
        /// Blocks in the grid.
        blocks: u64,
        /// SMs enabled.
        sms: u32,
        /// Blocks an SM holds.
        per_sm: u32,
        /// What bounds them.
        limit: Limit,
        /// The most a cooperative grid of this shape may have.
        most: u64,
    },
    /// The channel has no grid workspaces: no module was loaded through it
    /// (`ComputeChannel::load`, which gives it them).
    #[error(
        "the channel has no grid workspaces: load the kernel's module through this channel (ComputeChannel::load or Runtime::load), or call ensure_workspaces"
    )]
    NoWorkspace,
    /// rigd read no SM count for this GPU.
    #[error("the GPU's SM count is not known (rigd read no geometry), so no grid is known to fit")]
    UnknownSms,
}

/// Blocks of `shape` launching `kernel` that one SM of `geometry` holds at once.
pub fn blocks_per_sm(kernel: &Kernel, shape: &Shape, geometry: Geometry) -> Residency {
    let warps_per_block = shape.threads().div_ceil(WARP).max(1);
    let mut best = Residency {
        per_sm: MAX_BLOCKS_PER_SM,
        limit: Limit::Blocks,
    };
    let mut bound = |per_sm: u32, limit: Limit| {
        if per_sm < best.per_sm {
            best = Residency { per_sm, limit };
        }
    };
    bound(geometry.max_warps_per_sm / warps_per_block, Limit::Warps);
    let per_warp = (kernel.registers() * WARP).next_multiple_of(REGISTER_ALLOCATION_UNIT);
    if let Some(per_sub_partition) =
        (MAX_REGISTERS_PER_BLOCK / SUB_PARTITIONS).checked_div(per_warp)
    {
        bound(
            per_sub_partition * SUB_PARTITIONS / warps_per_block,
            Limit::Registers,
        );
    }
    bound(MAX_SHARED_PER_SM / shared_per_block(shape), Limit::Shared);
    best
}

/// Shared bytes an SM gives each block of `shape`. The cubin's shared size counts the
/// block's reserved KiB when its module declares it; a block with none still has it.
pub fn shared_per_block(shape: &Shape) -> u32 {
    shape
        .shared()
        .max(SM90_RESERVED_SHARED)
        .next_multiple_of(SHARED_ALLOCATION_UNIT)
}

/// Checks that every block of `shape` can be resident at once on `geometry`'s SMs, as a
/// grid sync needs; returns the blocks per SM the launch needs.
///
/// # Errors
/// [`CooperativeError::TooLarge`] naming the SMs, the blocks each holds and its limit;
/// [`CooperativeError::UnknownSms`].
pub fn cooperative(
    kernel: &Kernel,
    shape: &Shape,
    geometry: Geometry,
) -> Result<u32, CooperativeError> {
    if geometry.sms == 0 {
        return Err(CooperativeError::UnknownSms);
    }
    let r = blocks_per_sm(kernel, shape, geometry);
    let blocks = shape.grid().volume();
    let most = u64::from(r.per_sm) * u64::from(geometry.sms);
    if blocks > most {
        return Err(CooperativeError::TooLarge {
            blocks,
            sms: geometry.sms,
            per_sm: r.per_sm,
            limit: r.limit,
            most,
        });
    }
    Ok(u32::try_from(blocks.div_ceil(geometry.sms.into())).expect("at most per_sm"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{coop, kernels};
    use crate::window::GH100;
    use rig_cubin::Module;

    const H100: Geometry = Geometry { sms: 132, ..GH100 };

    fn residency(m: &Module, name: &str, block: u32, dynamic: u32) -> Residency {
        let k = m.kernel(name).expect("a fixture kernel");
        let shape = Shape::new(k, 1, block, dynamic).expect("fits");
        blocks_per_sm(k, &shape, H100)
    }

    #[test]
    fn each_limit_bounds_in_turn() {
        let (coop, kernels) = (coop(), kernels());
        // grid_sum, 32 registers: 256 threads are 8 warps, 64 warps an SM.
        let warps = Residency {
            per_sm: 8,
            limit: Limit::Warps,
        };
        assert_eq!(residency(&coop, "grid_sum", 256, 0), warps);
        // 32 threads: 64 warps would fit, 32 block slots do not.
        assert_eq!(residency(&coop, "partial_warp", 32, 0).limit, Limit::Blocks);
        // local_array, 38 registers: 1,216 a warp round to 1,280; 12 warps a
        // sub-partition, 48 an SM: 6 blocks of 8 warps.
        let registers = Residency {
            per_sm: 6,
            limit: Limit::Registers,
        };
        assert_eq!(residency(&kernels, "local_array", 256, 0), registers);
        // 100 KiB of dynamic shared beside the kernel's 1 KiB: 2 blocks in 228 KiB.
        let shared = Residency {
            per_sm: 2,
            limit: Limit::Shared,
        };
        assert_eq!(residency(&kernels, "saxpy", 64, 100 * 1024), shared);
    }

    #[test]
    fn every_block_holds_its_reserved_kib() {
        let coop = coop();
        // partial_warp declares no shared memory of its own; the module's reservation
        // is counted (1 KiB), so 7 KiB of dynamic make 8 KiB a block: 28 in 228 KiB.
        let k = coop.kernel("partial_warp").expect("partial_warp");
        assert_eq!(k.shared().bytes(), SM90_RESERVED_SHARED);
        let r = residency(&coop, "partial_warp", 32, 7 * 1024);
        assert_eq!(
            r,
            Residency {
                per_sm: 28,
                limit: Limit::Shared
            }
        );
    }

    #[test]
    fn a_grid_larger_than_the_gpu_holds_is_refused_by_name() {
        let coop = coop();
        let k = coop.kernel("grid_sum").expect("grid_sum");
        let fits = Shape::new(k, 132 * 8, 256, 0).expect("fits");
        assert_eq!(cooperative(k, &fits, H100), Ok(8));
        let small = Shape::new(k, 133, 256, 0).expect("fits");
        assert_eq!(cooperative(k, &small, H100), Ok(2));
        let one_more = Shape::new(k, 132 * 8 + 1, 256, 0).expect("fits");
        let err = cooperative(k, &one_more, H100).expect_err("one block too many");
        assert_eq!(
            err,
            CooperativeError::TooLarge {
                blocks: 1057,
                sms: 132,
                per_sm: 8,
                limit: Limit::Warps,
                most: 1056
            }
        );
        assert!(err.to_string().contains("1057 blocks"), "{err}");
        assert!(err.to_string().contains("132 SMs"), "{err}");
        assert_eq!(
            cooperative(k, &fits, GH100),
            Err(CooperativeError::UnknownSms)
        );
    }
}
