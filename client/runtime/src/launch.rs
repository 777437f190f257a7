//! A launch's shape (grid, block, dynamic shared memory) checked once against sm_90's
//! limits and the kernel's own, so the QMD and constant bank 0 are built from values
//! that fit.
//!
//! Flow: [`rig_cubin::Kernel`] + grid + block + dynamic shared bytes → [`Shape::new`] →
//! `qmd` (the QMD) and `cbank0` (the launch words) both read the [`Shape`].
//!
//! Reference: CUDA C++ Programming Guide, "Technical Specifications per Compute
//! Capability" (compute capability 9.0: grid, block, threads, registers, shared memory,
//! resident blocks and threads per SM, the shared-memory carve-outs); docs/hardware/
//! nvidia-compute.md. Not here: field widths and addresses (`qmd`).

use rig_cubin::{Kernel, Threads};

/// Largest grid x (2^31 − 1).
pub const MAX_GRID_X: u32 = 0x7fff_ffff;
/// Largest grid y and z.
pub const MAX_GRID_YZ: u32 = 65535;
/// Largest block x and y.
pub const MAX_BLOCK_XY: u32 = 1024;
/// Largest block z.
pub const MAX_BLOCK_Z: u32 = 64;
/// Most threads in a block.
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
/// Most registers per thread.
pub const MAX_REGISTERS_PER_THREAD: u32 = 255;
/// 32-bit registers a block may use (65536).
pub const MAX_REGISTERS_PER_BLOCK: u32 = 0x1_0000;
/// Registers are allocated per warp in units of this many (the CUDA Occupancy
/// Calculator's "register allocation unit size", granularity warp).
pub const REGISTER_ALLOCATION_UNIT: u32 = 256;
/// Threads in a warp.
pub const WARP: u32 = 32;
/// The largest shared-memory carve-out of an SM (228 KiB). A block may use 227 KiB of
/// it; the other 1 KiB is the system's reserved shared memory, which sm_90 cubins count
/// in their own shared size (`rig_cubin::SM90_RESERVED_SHARED`), so a block's total with
/// the reservation counted is at most this.
pub const MAX_SHARED_PER_SM: u32 = 228 * 1024;
/// Named barriers a CTA has (PTX ISA, `barrier`: barrier numbers 0 to 15).
pub const MAX_BARRIERS: u32 = 16;
/// Resident threads per SM.
pub const MAX_THREADS_PER_SM: u32 = 2048;
/// Resident blocks per SM.
pub const MAX_BLOCKS_PER_SM: u32 = 32;

/// Three extents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim3 {
    /// x.
    pub x: u32,
    /// y.
    pub y: u32,
    /// z.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Self { x, y, z }
    }

    /// x · y · z, if it fits 64 bits (it always does for u32 extents).
    pub fn volume(self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Self::new(x, 1, 1)
    }
}

impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        Self::new(x, y, z)
    }
}

/// The axis of a [`Dim3`], for errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// x.
    X,
    /// y.
    Y,
    /// z.
    Z,
}

/// A launch shape the hardware or the kernel does not allow. Each names the value and
/// the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    /// A grid extent of 0 or above its limit.
    #[error("grid {axis:?} is {value}; it must be 1 to {max}")]
    Grid {
        /// Which extent.
        axis: Axis,
        /// Its value.
        value: u32,
        /// The limit.
        max: u32,
    },
    /// A block extent of 0 or above its limit.
    #[error("block {axis:?} is {value}; it must be 1 to {max}")]
    Block {
        /// Which extent.
        axis: Axis,
        /// Its value.
        value: u32,
        /// The limit.
        max: u32,
    },
    /// More threads in a block than the hardware or the kernel allows.
    #[error("{threads} threads per block; at most {max} ({why})")]
    Threads {
        /// Threads per block asked for.
        threads: u64,
        /// The limit.
        max: u64,
        /// Whose limit: the hardware's, or the kernel's `__launch_bounds__`.
        why: &'static str,
    },
    /// A block shape other than the one the kernel requires (`.reqntid`).
    #[error("block {block:?}; the kernel requires exactly {required:?}")]
    RequiredBlock {
        /// The block asked for.
        block: Dim3,
        /// The block the kernel was compiled for.
        required: Dim3,
    },
    /// More shared memory than an SM has.
    #[error(
        "{static_bytes} bytes of the kernel's shared memory and {dynamic} dynamic: \
         {total} in all, at most {max} (227 KiB and the 1 KiB reserved)"
    )]
    Shared {
        /// The kernel's static and reserved bytes.
        static_bytes: u32,
        /// Dynamic bytes asked for.
        dynamic: u32,
        /// The total (saturated).
        total: u64,
        /// The limit.
        max: u32,
    },
    /// More registers per thread than there are.
    #[error("the kernel uses {registers} registers per thread; at most {max}")]
    Registers {
        /// The kernel's count.
        registers: u32,
        /// The limit.
        max: u32,
    },
    /// The block's registers do not fit an SM's register file.
    #[error(
        "{threads} threads of {registers} registers need {needed} registers; \
         a block may have {max}"
    )]
    RegisterFile {
        /// Threads per block.
        threads: u32,
        /// Registers per thread.
        registers: u32,
        /// Registers the block needs, allocated per warp.
        needed: u64,
        /// The limit.
        max: u32,
    },
    /// More named barriers than a CTA has.
    #[error("the kernel uses {barriers} barriers; a CTA has {max}")]
    Barriers {
        /// The kernel's count.
        barriers: u32,
        /// The limit.
        max: u32,
    },
}

/// A launch shape that fits sm_90 and the kernel.
///
/// # Invariants
/// Every extent is within its limit, the block's threads are at most
/// [`MAX_THREADS_PER_BLOCK`] and the kernel's limit, and the shared total is at most
/// [`MAX_SHARED_PER_SM`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    grid: Dim3,
    block: Dim3,
    dynamic_shared: u32,
    shared: u32,
}

fn extent(v: u32, max: u32, axis: Axis, grid: bool) -> Result<(), LaunchError> {
    if v == 0 || v > max {
        return Err(if grid {
            LaunchError::Grid {
                axis,
                value: v,
                max,
            }
        } else {
            LaunchError::Block {
                axis,
                value: v,
                max,
            }
        });
    }
    Ok(())
}

impl Shape {
    /// Checks a launch of `kernel` over `grid` blocks of `block` threads with
    /// `dynamic_shared` bytes of dynamic shared memory per block.
    ///
    /// # Errors
    /// [`LaunchError`]: an extent of 0 or above its limit, too many threads (for the
    /// hardware or the kernel's launch bounds), a block other than the kernel's required
    /// one, too much shared memory, or registers and barriers the kernel cannot have.
    pub fn new(
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_shared: u32,
    ) -> Result<Shape, LaunchError> {
        let (grid, block) = (grid.into(), block.into());
        extent(grid.x, MAX_GRID_X, Axis::X, true)?;
        extent(grid.y, MAX_GRID_YZ, Axis::Y, true)?;
        extent(grid.z, MAX_GRID_YZ, Axis::Z, true)?;
        extent(block.x, MAX_BLOCK_XY, Axis::X, false)?;
        extent(block.y, MAX_BLOCK_XY, Axis::Y, false)?;
        extent(block.z, MAX_BLOCK_Z, Axis::Z, false)?;
        let threads = block.volume();
        if threads > u64::from(MAX_THREADS_PER_BLOCK) {
            return Err(LaunchError::Threads {
                threads,
                max: MAX_THREADS_PER_BLOCK.into(),
                why: "the hardware's limit",
            });
        }
        match kernel.threads() {
            Threads::Any => {}
            Threads::Max(m) => {
                let max = Dim3::from((m[0], m[1], m[2])).volume();
                if threads > max {
                    return Err(LaunchError::Threads {
                        threads,
                        max,
                        why: "the kernel's launch bounds",
                    });
                }
            }
            Threads::Required(r) => {
                let required = Dim3::from((r[0], r[1], r[2]));
                if block != required {
                    return Err(LaunchError::RequiredBlock { block, required });
                }
            }
        }
        let threads = u32::try_from(threads).expect("at most 1024 threads");
        check_registers(kernel.registers(), threads)?;
        if kernel.barriers() > MAX_BARRIERS {
            return Err(LaunchError::Barriers {
                barriers: kernel.barriers(),
                max: MAX_BARRIERS,
            });
        }
        let static_bytes = kernel.shared().bytes();
        let total = u64::from(static_bytes) + u64::from(dynamic_shared);
        let shared = u32::try_from(total)
            .ok()
            .filter(|&t| t <= MAX_SHARED_PER_SM)
            .ok_or(LaunchError::Shared {
                static_bytes,
                dynamic: dynamic_shared,
                total,
                max: MAX_SHARED_PER_SM,
            })?;
        Ok(Shape {
            grid,
            block,
            dynamic_shared,
            shared,
        })
    }

    /// Blocks in the grid.
    pub fn grid(&self) -> Dim3 {
        self.grid
    }

    /// Threads in a block.
    pub fn block(&self) -> Dim3 {
        self.block
    }

    /// Dynamic shared bytes per block.
    pub fn dynamic_shared(&self) -> u32 {
        self.dynamic_shared
    }

    /// Shared bytes per block in all: the kernel's (static and reserved) and the dynamic.
    pub fn shared(&self) -> u32 {
        self.shared
    }

    /// Threads per block.
    pub fn threads(&self) -> u32 {
        u32::try_from(self.block.volume()).expect("the invariant: at most 1024 threads")
    }
}

/// Checks `registers` per thread for a block of `threads`.
fn check_registers(registers: u32, threads: u32) -> Result<(), LaunchError> {
    if registers > MAX_REGISTERS_PER_THREAD {
        return Err(LaunchError::Registers {
            registers,
            max: MAX_REGISTERS_PER_THREAD,
        });
    }
    let warps = u64::from(threads.div_ceil(WARP));
    let per_warp = u64::from((registers * WARP).next_multiple_of(REGISTER_ALLOCATION_UNIT));
    let needed = warps * per_warp;
    if needed > u64::from(MAX_REGISTERS_PER_BLOCK) {
        return Err(LaunchError::RegisterFile {
            threads,
            registers,
            needed,
            max: MAX_REGISTERS_PER_BLOCK,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::kernels;

    #[test]
    fn grid_extents_are_1_to_their_limit() {
        let m = kernels();
        let k = m.kernel("empty").expect("empty");
        for (grid, axis, value, max) in [
            ((0, 1, 1), Axis::X, 0, MAX_GRID_X),
            ((MAX_GRID_X + 1, 1, 1), Axis::X, MAX_GRID_X + 1, MAX_GRID_X),
            ((1, 0, 1), Axis::Y, 0, MAX_GRID_YZ),
            ((1, 65536, 1), Axis::Y, 65536, MAX_GRID_YZ),
            ((1, 1, 0), Axis::Z, 0, MAX_GRID_YZ),
            ((1, 1, 65536), Axis::Z, 65536, MAX_GRID_YZ),
        ] {
            assert_eq!(
                Shape::new(k, grid, 1, 0),
                Err(LaunchError::Grid { axis, value, max })
            );
        }
        let s = Shape::new(k, (MAX_GRID_X, MAX_GRID_YZ, MAX_GRID_YZ), 1, 0).expect("at the limits");
        assert_eq!(s.grid(), Dim3::new(MAX_GRID_X, 65535, 65535));
    }

    #[test]
    fn block_extents_and_threads_have_their_limits() {
        let m = kernels();
        let k = m.kernel("empty").expect("empty");
        assert_eq!(
            Shape::new(k, 1, (0, 1, 1), 0),
            Err(LaunchError::Block {
                axis: Axis::X,
                value: 0,
                max: 1024
            })
        );
        assert_eq!(
            Shape::new(k, 1, (1, 1025, 1), 0),
            Err(LaunchError::Block {
                axis: Axis::Y,
                value: 1025,
                max: 1024
            })
        );
        assert_eq!(
            Shape::new(k, 1, (1, 1, 65), 0),
            Err(LaunchError::Block {
                axis: Axis::Z,
                value: 65,
                max: 64
            })
        );
        assert!(matches!(
            Shape::new(k, 1, (32, 32, 2), 0),
            Err(LaunchError::Threads {
                threads: 2048,
                max: 1024,
                ..
            })
        ));
        assert_eq!(
            Shape::new(k, 1, (1024, 1, 1), 0).map(|s| s.threads()),
            Ok(1024)
        );
        assert_eq!(
            Shape::new(k, 1, (16, 16, 4), 0).map(|s| s.threads()),
            Ok(1024)
        );
    }

    #[test]
    fn shared_memory_totals_up_to_228_kib_with_the_reservation() {
        let m = kernels();
        let k = m.kernel("reduce_sum").expect("reduce_sum");
        assert_eq!(k.shared().bytes(), 0x410);
        let max_dynamic = MAX_SHARED_PER_SM - 0x410;
        let s = Shape::new(k, 1, 256, max_dynamic).expect("fits");
        assert_eq!(
            (s.shared(), s.dynamic_shared()),
            (MAX_SHARED_PER_SM, max_dynamic)
        );
        assert_eq!(
            Shape::new(k, 1, 256, max_dynamic + 1),
            Err(LaunchError::Shared {
                static_bytes: 0x410,
                dynamic: max_dynamic + 1,
                total: u64::from(MAX_SHARED_PER_SM) + 1,
                max: MAX_SHARED_PER_SM
            })
        );
        assert!(
            Shape::new(k, 1, 256, u32::MAX).is_err_and(|e| matches!(e, LaunchError::Shared { .. }))
        );
        assert_eq!(Shape::new(k, 1, 256, 0).map(|s| s.shared()), Ok(0x410));
    }

    #[test]
    fn registers_per_block_are_counted_per_warp() {
        // 64 registers × 1024 threads = 65536: fits exactly.
        assert_eq!(check_registers(64, 1024), Ok(()));
        // 65 registers round up to 72 per thread: 72 × 32 × 32 warps > 65536.
        assert!(matches!(
            check_registers(65, 1024),
            Err(LaunchError::RegisterFile { needed: 73728, .. })
        ));
        assert_eq!(check_registers(255, 256), Ok(()));
        assert_eq!(
            check_registers(256, 32),
            Err(LaunchError::Registers {
                registers: 256,
                max: 255
            })
        );
        assert_eq!(check_registers(0, 1), Ok(()));
    }

    #[test]
    fn a_kernel_with_a_required_block_takes_only_that_block() {
        let m = crate::testing::triton();
        let k = m.kernel("add_kernel").expect("add_kernel");
        assert_eq!(Shape::new(k, 4, 128, 0).map(|s| s.threads()), Ok(128));
        assert_eq!(
            Shape::new(k, 4, 64, 0),
            Err(LaunchError::RequiredBlock {
                block: Dim3::new(64, 1, 1),
                required: Dim3::new(128, 1, 1)
            })
        );
    }

    #[test]
    fn a_kernel_with_launch_bounds_takes_at_most_that_many_threads() {
        let m = crate::testing::triton_bounded();
        let k = m.kernel("add_kernel").expect("add_kernel");
        assert_eq!(
            Shape::new(k, 1, (32, 4, 1), 0).map(|s| s.threads()),
            Ok(128)
        );
        assert_eq!(Shape::new(k, 1, 64, 0).map(|s| s.threads()), Ok(64));
        assert_eq!(
            Shape::new(k, 1, 129, 0),
            Err(LaunchError::Threads {
                threads: 129,
                max: 128,
                why: "the kernel's launch bounds"
            })
        );
    }
}
