//! Constant bank 0 of an sm_90 launch: the launch words CUDA code reads (block and grid
//! sizes, the memory windows, the stack pointer, the dynamic shared size), then the
//! kernel's parameters.
//!
//! Flow: a [`rig_cubin::Kernel`], a checked [`Shape`], the channel's [`Windows`] and the
//! arguments → [`build`] → bytes the runtime writes to GPU memory, 64-byte aligned, and
//! binds as the QMD's constant buffer 0 (`qmd`).
//!
//! Layout on sm_90 (docs/hardware/nvidia-compute.md; measured on the H200 with CUDA 13.0:
//! a kernel that dumped c[0x0] under CUDA's launches): blockDim at 0x0, gridDim at 0xc,
//! the shared window's base at 0x18, the local window's at 0x20, the initial stack
//! pointer 0x00fffdc0 at 0x28, the dynamic shared bytes at 0x2c, the global memory
//! descriptor (0) at 0x208, the parameters from the kernel's parameter base (0x210), each
//! at the offset EIATTR_KPARAM_INFO gives. Of the words CUDA's driver keeps in
//! 0x30..0x208, the cubins rig loads read only the grid workspace's address (0x44, 0x48),
//! which a cooperative launch's template writes per slot (`template`); the rest stay 0.

use rig_cubin::Kernel;

use crate::launch::Shape;
use crate::window::{STACK_TOP, Windows};

/// c[0x0][0x0]: blockDim.x, .y, .z.
pub const BLOCK_DIM: usize = 0x0;
/// c[0x0][0xc]: gridDim.x, .y, .z.
pub const GRID_DIM: usize = 0xc;
/// c[0x0][0x18]: the shared window's base (u64).
pub const SHARED_WINDOW: usize = 0x18;
/// c[0x0][0x20]: the local window's base (u64).
pub const LOCAL_WINDOW: usize = 0x20;
/// c[0x0][0x28]: the initial stack pointer; every CUDA kernel's first instruction loads
/// it (`LDC R1, c[0x0][0x28]`).
pub const STACK_POINTER: usize = 0x28;
/// c[0x0][0x2c]: dynamic shared bytes.
pub const DYNAMIC_SHARED: usize = 0x2c;
/// c[0x0][0x44]: the high word of a cooperative launch's grid workspace address, what
/// PTX's `%envreg1` reads (cooperative_groups' `get_grid_workspace`; measured in nvcc
/// 13.0's SASS of `coop.cu`, docs/hardware/nvidia-compute.md, "Cooperative launches").
/// 0 in an ordinary launch, as under CUDA: `grid.is_valid()` is false.
pub const GRID_WORKSPACE_HI: usize = 0x44;
/// c[0x0][0x48]: the low word (`%envreg2`).
pub const GRID_WORKSPACE_LO: usize = 0x48;
/// c[0x0][0x208]: the global memory descriptor of `desc[UR]` loads and stores (u64, 0).
pub const GLOBAL_DESCRIPTOR: usize = 0x208;
/// Where sm_90 parameters start: past the launch words.
pub const PARAM_BASE: u32 = 0x210;
/// The QMD takes constant buffer sizes in 16-byte units.
const SIZE_ALIGN: usize = 16;

/// Arguments that do not match the kernel's parameters, or a bank layout other than
/// sm_90's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Cbank0Error {
    /// Not one argument per parameter.
    #[error("{given} arguments for a kernel of {expected} parameters")]
    Count {
        /// Arguments given.
        given: usize,
        /// Parameters the kernel has.
        expected: usize,
    },
    /// An argument of another size than its parameter.
    #[error("argument {ordinal} is {given} bytes; the parameter is {expected}")]
    Size {
        /// The parameter's ordinal.
        ordinal: u16,
        /// Bytes given.
        given: usize,
        /// The parameter's size.
        expected: u32,
    },
    /// Parameters that would overlap the launch words.
    #[error("the kernel's parameters start at {base:#x}; sm_90's start at {PARAM_BASE:#x}")]
    Base {
        /// The kernel's parameter base.
        base: u32,
    },
}

/// A built constant bank 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bank0 {
    bytes: Vec<u8>,
}

impl Bank0 {
    /// Its bytes: the cubin's template's size rounded up to 16.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its size, as the QMD binds it (a multiple of 16).
    pub fn size(&self) -> u32 {
        u32::try_from(self.bytes.len()).expect("a bank is at most 64 KiB")
    }
}

fn put(bytes: &mut [u8], at: usize, value: &[u8]) {
    // PANIC: every offset written lies below the bank's end: the launch words end at
    // PARAM_BASE, which `build` checked the parameter base is at or past, and rig-cubin
    // checked that each parameter lies inside the template.
    bytes[at..at + value.len()].copy_from_slice(value);
}

/// Constant bank 0 for launching `kernel` as `shape` says, with the windows of `windows`
/// and `args`, one little-endian byte string per parameter in ordinal order.
///
/// # Errors
/// [`Cbank0Error::Count`] unless there is one argument per parameter;
/// [`Cbank0Error::Size`] for an argument of another size than its parameter;
/// [`Cbank0Error::Base`] for a kernel whose parameters would overlap the launch words.
pub fn build(
    kernel: &Kernel,
    shape: &Shape,
    windows: &Windows,
    args: &[&[u8]],
) -> Result<Bank0, Cbank0Error> {
    if kernel.param_base() < PARAM_BASE {
        return Err(Cbank0Error::Base {
            base: kernel.param_base(),
        });
    }
    let params = kernel.params();
    if args.len() != params.len() {
        return Err(Cbank0Error::Count {
            given: args.len(),
            expected: params.len(),
        });
    }
    for (p, a) in params.iter().zip(args) {
        if usize::try_from(p.size).ok() != Some(a.len()) {
            return Err(Cbank0Error::Size {
                ordinal: p.ordinal,
                given: a.len(),
                expected: p.size,
            });
        }
    }
    // rig-cubin checked that base + bytes lies inside the template, and the template is
    // at most 64 KiB; the launch words end below PARAM_BASE, which the base is past.
    let template = kernel.bank0_template();
    let mut bytes = template.to_vec();
    bytes.resize(template.len().next_multiple_of(SIZE_ALIGN), 0);
    let (g, b) = (shape.grid(), shape.block());
    for (i, v) in [b.x, b.y, b.z].into_iter().enumerate() {
        put(&mut bytes, BLOCK_DIM + 4 * i, &v.to_le_bytes());
    }
    for (i, v) in [g.x, g.y, g.z].into_iter().enumerate() {
        put(&mut bytes, GRID_DIM + 4 * i, &v.to_le_bytes());
    }
    put(
        &mut bytes,
        SHARED_WINDOW,
        &windows.shared().get().to_le_bytes(),
    );
    put(
        &mut bytes,
        LOCAL_WINDOW,
        &windows.local().get().to_le_bytes(),
    );
    // Written for every kernel, as CUDA does: each one loads it first thing, and one
    // without a stack never dereferences it.
    put(&mut bytes, STACK_POINTER, &STACK_TOP.to_le_bytes());
    put(
        &mut bytes,
        DYNAMIC_SHARED,
        &shape.dynamic_shared().to_le_bytes(),
    );
    put(&mut bytes, GLOBAL_DESCRIPTOR, &0u64.to_le_bytes());
    let base = usize::try_from(kernel.param_base()).expect("checked against the template");
    for (p, a) in params.iter().zip(args) {
        put(&mut bytes, base + usize::from(p.offset), a);
    }
    Ok(Bank0 { bytes })
}

#[cfg(test)]
mod tests {
    use rig_model::addr::GpuVa;

    use super::*;
    use crate::testing::kernels;

    fn word(b: &Bank0, at: usize) -> u32 {
        u32::from_le_bytes(b.bytes()[at..at + 4].try_into().expect("4 bytes"))
    }

    fn dword(b: &Bank0, at: usize) -> u64 {
        u64::from_le_bytes(b.bytes()[at..at + 8].try_into().expect("8 bytes"))
    }

    #[test]
    fn launch_words_sit_at_the_measured_offsets() {
        let m = kernels();
        let k = m.kernel("grid_fill").expect("grid_fill");
        let shape = Shape::new(k, (3, 5, 7), (32, 2, 1), 4096).expect("fits");
        let windows =
            Windows::new(GpuVa(0x7f0e_0000_0000), GpuVa(0x7f0d_d100_0000)).expect("CUDA's bases");
        let out = 0x1234_5678_9abc_def0u64.to_le_bytes();
        let b = build(k, &shape, &windows, &[&out]).expect("one pointer");
        assert_eq!([word(&b, 0x0), word(&b, 0x4), word(&b, 0x8)], [32, 2, 1]);
        assert_eq!([word(&b, 0xc), word(&b, 0x10), word(&b, 0x14)], [3, 5, 7]);
        assert_eq!(dword(&b, 0x18), 0x7f0e_0000_0000);
        assert_eq!(dword(&b, 0x20), 0x7f0d_d100_0000);
        assert_eq!(word(&b, 0x28), 0x00ff_fdc0);
        assert_eq!(word(&b, 0x2c), 4096);
        assert_eq!(dword(&b, 0x208), 0);
        assert_eq!(dword(&b, 0x210), 0x1234_5678_9abc_def0);
        assert_eq!(b.size(), 0x220, "0x218 rounded up to 16");
        assert!(b.bytes()[0x30..0x208].iter().all(|&x| x == 0));
    }

    #[test]
    fn mixed_parameters_land_at_their_offsets() {
        let m = kernels();
        let k = m.kernel("mixed_params").expect("mixed_params");
        let shape = Shape::new(k, 1, 1, 0).expect("fits");
        let windows = Windows::new(GpuVa(1 << 32), GpuVa(0xff00_0000)).expect("NVK's bases");
        let mixed: Vec<u8> = (1..=32).collect();
        let args: [&[u8]; 5] = [
            &[0xe1],
            &mixed,
            &2.5f64.to_le_bytes(),
            &[0x34, 0x12],
            &[9; 8],
        ];
        let b = build(k, &shape, &windows, &args).expect("sizes match");
        assert_eq!(b.bytes()[0x210], 0xe1);
        assert_eq!(&b.bytes()[0x218..0x238], mixed.as_slice());
        assert_eq!(&b.bytes()[0x238..0x240], &2.5f64.to_le_bytes());
        assert_eq!(&b.bytes()[0x240..0x242], &[0x34, 0x12]);
        assert_eq!(&b.bytes()[0x248..0x250], &[9; 8]);
        assert_eq!(b.size(), 0x250);
    }

    #[test]
    fn arguments_of_the_wrong_count_or_size_are_refused() {
        let m = kernels();
        let k = m.kernel("saxpy").expect("saxpy");
        let shape = Shape::new(k, 1, 256, 0).expect("fits");
        let windows = Windows::new(GpuVa(1 << 32), GpuVa(0xff00_0000)).expect("NVK's bases");
        let p = [0u8; 8];
        assert_eq!(
            build(k, &shape, &windows, &[&[0; 4], &p, &p]),
            Err(Cbank0Error::Count {
                given: 3,
                expected: 4
            })
        );
        assert_eq!(
            build(k, &shape, &windows, &[&[0; 8], &p, &p, &p]),
            Err(Cbank0Error::Size {
                ordinal: 0,
                given: 8,
                expected: 4
            })
        );
        assert_eq!(
            build(k, &shape, &windows, &[&[0; 4], &p, &p, &[0; 7]]),
            Err(Cbank0Error::Size {
                ordinal: 3,
                given: 7,
                expected: 8
            })
        );
        let empty = m.kernel("empty").expect("empty");
        let b = build(
            empty,
            &Shape::new(empty, 1, 1, 0).expect("fits"),
            &windows,
            &[],
        )
        .expect("no parameters");
        assert_eq!(b.size(), 0x210);
    }
}
