//! A launch's QMD: the checks that need the kernel and the launch shape, then rig-nv's
//! encoder for the version the channel's compute class reads.
//!
//! Flow: a [`rig_cubin::Kernel`], a checked [`Shape`], the program and constant-buffer
//! addresses (from `rig_cubin::Image` and `cbank0`) and a release slot → [`Launch`] →
//! [`build`] checks bank 0 against the kernel's template and local memory against the
//! channel's SLM, picks the shared-memory carve-outs, and hands rig-nv's
//! [`rig_nv::qmd::Params`] to the version's encoder → the runtime writes the [`Qmd`] to
//! GPU memory (256-byte aligned) and sends it with `rig_nv::method::compute::send_pcas`.
//!
//! Not here: field positions, versions and the address checks every QMD makes
//! (rig-nv's `qmd`); the carve-outs an SM has (rig-nv's `generation`).
//!
//! Reference: docs/hardware/nvidia-compute.md (what a minimal launch sets, and the SM's
//! shared memory carve-outs).

use rig_cubin::Kernel;
use rig_model::addr::GpuVa;
pub use rig_nv::qmd::{
    ADDRESS_LIMIT, BANK_ALIGN, BANK_SIZE_ALIGN, ConstantBuffer, Dependent, MAX_BANK, PROGRAM_ALIGN,
    Params, Qmd, QmdError, QmdVersion, Release, ReleaseKind, SHARED_ALIGN, carveout_config,
    for_class,
};

use crate::launch::{MAX_BLOCKS_PER_SM, MAX_SHARED_PER_SM, MAX_THREADS_PER_SM, Shape};
use crate::window::local_bytes;

/// The shared-memory carve-outs of an sm_90 SM in KiB (CUDA C++ Programming Guide,
/// compute capability 9.0; 0 KiB left out: every sm_90 CTA has its reserved KiB).
pub const CARVEOUTS_KIB: [u32; 9] = [8, 16, 32, 64, 100, 132, 164, 196, 228];

/// Everything one launch's QMD holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// Its grid, block and shared memory, checked.
    pub shape: &'a Shape,
    /// The kernel's entry address (`rig_cubin::Image::entry`).
    pub program: GpuVa,
    /// The constant buffers: 0 (the launch's `cbank0`) and the module's (`Image::banks`).
    pub banks: &'a [ConstantBuffer],
    /// The release slot, if any.
    pub release: Option<Release>,
    /// Local memory per thread the channel's SLM buffer holds (0 without one).
    pub local_capacity: u64,
    /// Blocks each SM must hold at once (a cooperative launch, `occupancy::cooperative`):
    /// the smallest carve-out asked of the SM holds them all. 0: an ordinary launch.
    pub co_resident: u32,
}

/// A placed module's bank (`rig_cubin::Image::banks`) as the QMD binds it.
///
/// # Errors
/// [`QmdError::Bank`] for a bank over 4 GiB (the QMD's own limit, 64 KiB, is checked
/// when the QMD is built).
pub fn constant_buffer(b: rig_cubin::Bank) -> Result<ConstantBuffer, QmdError> {
    let size = u32::try_from(b.size).map_err(|_| QmdError::Bank {
        index: b.index,
        addr: b.addr.get(),
        size: u32::MAX,
        reason: "the size must be a multiple of 16 from 16 to 64 KiB",
    })?;
    Ok(ConstantBuffer {
        index: b.index,
        addr: b.addr,
        size,
    })
}

/// The smallest carve-out that holds `bytes`, in KiB (the largest when none does).
fn carveout_for(bytes: u64) -> u32 {
    CARVEOUTS_KIB
        .into_iter()
        .find(|&k| u64::from(k) * 1024 >= bytes)
        .unwrap_or(CARVEOUTS_KIB[CARVEOUTS_KIB.len() - 1])
}

/// Checks what needs the kernel, and fills the QMD's values.
fn params(l: &Launch<'_>) -> Result<Params, QmdError> {
    let needed = l.kernel.bank0_template().len() as u64;
    let bank0 = l.banks.iter().find(|b| b.index == 0).map_or(0, |b| b.size);
    if u64::from(bank0) < needed {
        return Err(QmdError::Bank0 {
            size: bank0,
            needed,
        });
    }
    let local = local_bytes(l.kernel);
    if local > l.local_capacity {
        return Err(QmdError::LocalMemory {
            needed: local,
            capacity: l.local_capacity,
        });
    }
    let shape = l.shape;
    let shared = shape.shared().next_multiple_of(SHARED_ALIGN);
    // Target the carve-out that lets as many CTAs stay resident as their threads allow.
    let resident = (MAX_THREADS_PER_SM / shape.threads()).clamp(1, MAX_BLOCKS_PER_SM);
    // A cooperative grid's blocks must all fit at once: the least carve-out holds each
    // SM's share of them, as the occupancy check counted them.
    let least = match l.co_resident {
        0 => u64::from(shared),
        n => u64::from(crate::occupancy::shared_per_block(shape)) * u64::from(n),
    };
    let carveout = [
        carveout_config(carveout_for(least)),
        carveout_config(MAX_SHARED_PER_SM / 1024),
        carveout_config(carveout_for(u64::from(shared) * u64::from(resident))),
    ];
    let (g, b) = (shape.grid(), shape.block());
    Ok(Params {
        grid: [g.x, g.y, g.z],
        block: [b.x, b.y, b.z],
        registers: l.kernel.registers(),
        barriers: l.kernel.barriers(),
        shared,
        carveout,
        local_high: u32::try_from(local).map_err(|_| QmdError::LocalMemory {
            needed: local,
            capacity: l.local_capacity,
        })?,
        program: l.program,
        banks: l.banks.to_vec(),
        release: l.release,
    })
}

/// The QMD of `version` for `launch`.
///
/// # Errors
/// [`QmdError`] naming the value and its limit: no bank 0 or one smaller than the
/// kernel's bank 0, more local memory than the channel's SLM holds, and what
/// `rig_nv::qmd::QmdVersion::build` refuses (addresses, banks, release payloads).
pub fn build(version: QmdVersion, launch: &Launch<'_>) -> Result<Qmd, QmdError> {
    version.build(&params(launch)?)
}

#[cfg(test)]
mod tests;
