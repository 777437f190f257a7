//! QMDs, the launch descriptors a compute class reads: one file per QMD version, chosen
//! by the channel's compute class, and the checks every version shares.
//!
//! Flow: a [`rig_cubin::Kernel`], a checked [`Shape`], the program and constant-buffer
//! addresses (from `rig_cubin::Image` and `cbank0`) and a release slot → [`Launch`] →
//! [`for_class`] picks the version → [`QmdVersion::build`] checks what the fields need and
//! encodes it → the runtime writes the [`Qmd`] to GPU memory (256-byte aligned) and sends
//! it with `method::compute::send_pcas`.
//!
//! Versions: HOPPER_COMPUTE_A (0xCBC0) reads QMD V04_00 (`v04`). Ampere and Ada (V03_00)
//! and Blackwell (V05_00) would be files beside it, chosen here.
//!
//! Reference: NVIDIA open-gpu-doc `classes/compute/clcbc0qmd.h` (V04_00 field positions);
//! docs/hardware/nvidia-compute.md (what a minimal launch sets, and the SM's shared
//! memory carve-outs).

mod v04;

pub use v04::Field;

use rig_cubin::Kernel;
use rig_model::addr::GpuVa;

use crate::launch::{MAX_BLOCKS_PER_SM, MAX_SHARED_PER_SM, MAX_THREADS_PER_SM, Shape};
use crate::window::local_bytes;

/// HOPPER_COMPUTE_A.
pub const HOPPER_COMPUTE_A: u32 = 0xcbc0;

/// GPU addresses the QMD's address fields hold: below 2^57 (a 32-bit lower and a 25-bit
/// upper field, or a 64-byte-unit address in 51 bits).
pub const ADDRESS_LIMIT: u64 = 1 << 57;
/// Alignment of constant buffers (the QMD takes their address in 64-byte units).
pub const BANK_ALIGN: u64 = 64;
/// Granularity of constant buffer sizes (the QMD takes them in 16-byte units).
pub const BANK_SIZE_ALIGN: u32 = 16;
/// The largest constant buffer.
pub const MAX_BANK: u32 = 0x1_0000;
/// Alignment rig asks of a program address (code sections are 128-byte aligned).
pub const PROGRAM_ALIGN: u64 = 128;
/// Granularity of a QMD's shared memory size.
pub const SHARED_ALIGN: u32 = 256;
/// The shared-memory carve-outs of an sm_90 SM in KiB (CUDA C++ Programming Guide,
/// compute capability 9.0; 0 KiB left out: every sm_90 CTA has its reserved KiB).
pub const CARVEOUTS_KIB: [u32; 9] = [8, 16, 32, 64, 100, 132, 164, 196, 228];

/// A QMD layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QmdVersion {
    /// QMD V04_00, 384 bytes: HOPPER_COMPUTE_A.
    V04,
}

/// The QMD version compute class `class` reads.
///
/// # Errors
/// [`QmdError::Class`] for a class rig has no QMD for.
pub fn for_class(class: u32) -> Result<QmdVersion, QmdError> {
    match class {
        HOPPER_COMPUTE_A => Ok(QmdVersion::V04),
        _ => Err(QmdError::Class { class }),
    }
}

/// A constant buffer to bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstantBuffer {
    /// Its index, 0 to 7 (bank N of `c[N][..]`).
    pub index: u8,
    /// Its GPU address.
    pub addr: u64,
    /// Its size in bytes.
    pub size: u32,
}

impl TryFrom<rig_cubin::Bank> for ConstantBuffer {
    type Error = QmdError;

    /// A placed module's bank (`rig_cubin::Image::banks`) as the QMD binds it.
    fn try_from(b: rig_cubin::Bank) -> Result<Self, QmdError> {
        let size = u32::try_from(b.size).map_err(|_| QmdError::Bank {
            index: b.index,
            addr: b.addr,
            size: u32::MAX,
            reason: "the size must be a multiple of 16 from 16 to 64 KiB",
        })?;
        Ok(ConstantBuffer {
            index: b.index,
            addr: b.addr,
            size,
        })
    }
}

/// What a QMD release slot writes when the grid is done (each measured on the H200:
/// docs/hardware/nvidia-compute.md, "Completion").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseKind {
    /// A 32-bit payload (STRUCTURE_SIZE ONE_WORD; 4-byte aligned): the low word only.
    Word,
    /// The 64-bit payload (TWO_WORDS with PAYLOAD64B; 8-byte aligned): a timeline's
    /// release.
    DoubleWord,
    /// A 32-bit payload, a zero word and the 64-bit timestamp (FOUR_WORDS; 16-byte
    /// aligned).
    WithTimestamp,
}

impl ReleaseKind {
    fn align(self) -> u64 {
        match self {
            Self::Word => 4,
            Self::DoubleWord => 8,
            Self::WithTimestamp => 16,
        }
    }
}

/// A release when the grid is done (slot 0), after a system-scope memory barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// Where.
    pub addr: u64,
    /// What.
    pub payload: u64,
    /// How many words.
    pub kind: ReleaseKind,
}

/// Everything one launch's QMD holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// Its grid, block and shared memory, checked.
    pub shape: &'a Shape,
    /// The kernel's entry address (`rig_cubin::Image::entry`).
    pub program: u64,
    /// The constant buffers: 0 (the launch's `cbank0`) and the module's (`Image::banks`).
    pub banks: &'a [ConstantBuffer],
    /// The release slot, if any.
    pub release: Option<Release>,
    /// Local memory per thread the channel's SLM buffer holds (0 without one).
    pub local_capacity: u64,
}

/// A built QMD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qmd {
    version: QmdVersion,
    words: Vec<u32>,
}

impl Qmd {
    /// Its words.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// Its bytes, little-endian, as the GPU reads it.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// Its words in pairs, little-endian, as 64-bit stores write them.
    pub fn to_u64s(&self) -> Vec<u64> {
        self.words
            .chunks(2)
            .map(|p| u64::from(p[0]) | u64::from(p.get(1).copied().unwrap_or(0)) << 32)
            .collect()
    }

    /// Its layout.
    pub fn version(&self) -> QmdVersion {
        self.version
    }

    /// Points constant buffer `index` (0 to 7, already bound) at `addr`: a launch
    /// template's bank 0 moves with the slot it is written to.
    ///
    /// # Errors
    /// [`QmdError::Bank`] for an index above 7 or an address that is misaligned or
    /// past 2^57.
    pub fn set_bank_address(&mut self, index: u8, addr: GpuVa) -> Result<(), QmdError> {
        let addr = addr.get();
        let err = |reason| QmdError::Bank {
            index,
            addr,
            size: 0,
            reason,
        };
        if index >= 8 {
            return Err(err("the QMD binds buffers 0 to 7"));
        }
        if !addr.is_multiple_of(BANK_ALIGN) || addr >= ADDRESS_LIMIT {
            return Err(err("the address must be 64-byte aligned and below 2^57"));
        }
        match self.version {
            QmdVersion::V04 => v04::set_bank_address(&mut self.words, index, addr),
        }
    }

    /// Sets release slot 0's payload (a 64-bit one needs a [`ReleaseKind::DoubleWord`]
    /// release; the others carry 32 bits).
    ///
    /// # Errors
    /// [`QmdError::Field`] (cannot happen for V04: both halves are 32-bit fields).
    pub fn set_release_payload(&mut self, payload: u64) -> Result<(), QmdError> {
        match self.version {
            QmdVersion::V04 => v04::set_release_payload(&mut self.words, payload),
        }
    }

    /// The index, in [`Qmd::to_u64s`], of the 64-bit word that holds release slot 0's
    /// payload whole: a launch patches it in place with one store.
    pub fn release_payload_word(&self) -> usize {
        match self.version {
            QmdVersion::V04 => v04::RELEASE_PAYLOAD_U64,
        }
    }
}

/// A launch a QMD cannot describe. Each names the value and the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QmdError {
    /// A compute class rig has no QMD for.
    #[error("compute class {class:#06x}: rig builds QMDs for HOPPER_COMPUTE_A (0xcbc0)")]
    Class {
        /// The class.
        class: u32,
    },
    /// A program address that is misaligned or too high.
    #[error("program address {addr:#x}: it must be {PROGRAM_ALIGN}-byte aligned and below 2^57")]
    Program {
        /// The address.
        addr: u64,
    },
    /// A constant buffer the QMD cannot bind.
    #[error("constant buffer {index} ({size} bytes at {addr:#x}): {reason}")]
    Bank {
        /// Its index.
        index: u8,
        /// Its address.
        addr: u64,
        /// Its size.
        size: u32,
        /// What is wrong: index above 7, a second buffer of that index, the address not
        /// 64-byte aligned or past 2^57, the size not a multiple of 16 or above 64 KiB.
        reason: &'static str,
    },
    /// No constant buffer 0, or one smaller than the kernel's bank 0.
    #[error("constant buffer 0 is {size} bytes; the kernel's bank 0 is {needed}")]
    Bank0 {
        /// Its size (0 when missing).
        size: u32,
        /// The kernel's bank 0 template's size.
        needed: u64,
    },
    /// A release address that is misaligned for its kind, or too high.
    #[error("release at {addr:#x}: a {kind:?} release needs {align}-byte alignment below 2^57")]
    Release {
        /// The address.
        addr: u64,
        /// The kind.
        kind: ReleaseKind,
        /// Its alignment.
        align: u64,
    },
    /// A one- or four-word release of a payload above 32 bits.
    #[error("a one- or four-word release writes 32 bits of payload; the payload is {payload:#x}")]
    Payload {
        /// The payload.
        payload: u64,
    },
    /// More local memory per thread than the channel's SLM buffer holds.
    #[error(
        "the kernel needs {needed} bytes of local memory per thread; the channel's SLM holds {capacity}"
    )]
    LocalMemory {
        /// Bytes per thread the kernel needs (`window::local_bytes`).
        needed: u64,
        /// Bytes per thread the SLM buffer holds.
        capacity: u64,
    },
    /// A value too wide for its field (a check above should have refused it first).
    #[error("{value:#x} does not fit {field} ({bits} bits)")]
    Field {
        /// The field's name in the header.
        field: &'static str,
        /// The value.
        value: u64,
        /// Its width.
        bits: u32,
    },
}

/// The values a QMD encodes, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checked {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers: u32,
    pub barriers: u32,
    pub shared: u32,
    /// MIN, MAX and TARGET_SM_CONFIG_SHARED_MEM_SIZE.
    pub carveout: [u32; 3],
    pub local_high: u32,
    pub program: u64,
    pub banks: Vec<ConstantBuffer>,
    pub release: Option<Release>,
}

/// The hardware encoding of a carve-out of `kib` KiB: KiB/4 + 1 (Mesa NVK
/// `gv100_sm_config_smem_size`).
pub fn carveout_config(kib: u32) -> u32 {
    kib / 4 + 1
}

/// The smallest carve-out that holds `bytes`, in KiB (the largest when none does).
fn carveout_for(bytes: u64) -> u32 {
    CARVEOUTS_KIB
        .into_iter()
        .find(|&k| u64::from(k) * 1024 >= bytes)
        .unwrap_or(CARVEOUTS_KIB[CARVEOUTS_KIB.len() - 1])
}

fn check_bank(b: &ConstantBuffer, seen: &mut [bool; 8]) -> Result<(), QmdError> {
    let err = |reason| QmdError::Bank {
        index: b.index,
        addr: b.addr,
        size: b.size,
        reason,
    };
    let slot = seen
        .get_mut(usize::from(b.index))
        .ok_or(err("the QMD binds buffers 0 to 7"))?;
    if std::mem::replace(slot, true) {
        return Err(err("a second buffer of that index"));
    }
    if !b.addr.is_multiple_of(BANK_ALIGN) || b.addr >= ADDRESS_LIMIT {
        return Err(err("the address must be 64-byte aligned and below 2^57"));
    }
    if b.size == 0 || !b.size.is_multiple_of(BANK_SIZE_ALIGN) || b.size > MAX_BANK {
        return Err(err("the size must be a multiple of 16 from 16 to 64 KiB"));
    }
    Ok(())
}

/// Checks what every QMD version needs of `l`.
fn check(l: &Launch<'_>) -> Result<Checked, QmdError> {
    if !l.program.is_multiple_of(PROGRAM_ALIGN) || l.program >= ADDRESS_LIMIT {
        return Err(QmdError::Program { addr: l.program });
    }
    let mut seen = [false; 8];
    for b in l.banks {
        check_bank(b, &mut seen)?;
    }
    let needed = l.kernel.bank0_template().len() as u64;
    let bank0 = l.banks.iter().find(|b| b.index == 0).map_or(0, |b| b.size);
    if u64::from(bank0) < needed {
        return Err(QmdError::Bank0 {
            size: bank0,
            needed,
        });
    }
    if let Some(r) = l.release {
        if !r.addr.is_multiple_of(r.kind.align()) || r.addr >= ADDRESS_LIMIT {
            return Err(QmdError::Release {
                addr: r.addr,
                kind: r.kind,
                align: r.kind.align(),
            });
        }
        if r.kind != ReleaseKind::DoubleWord && u32::try_from(r.payload).is_err() {
            return Err(QmdError::Payload { payload: r.payload });
        }
    }
    let local = local_bytes(l.kernel);
    if local > l.local_capacity {
        return Err(QmdError::LocalMemory {
            needed: local,
            capacity: l.local_capacity,
        });
    }
    let field = |field, value: u64, bits| QmdError::Field { field, value, bits };
    let shape = l.shape;
    let shared = shape.shared().next_multiple_of(SHARED_ALIGN);
    // Target the carve-out that lets as many CTAs stay resident as their threads allow.
    let resident = (MAX_THREADS_PER_SM / shape.threads()).clamp(1, MAX_BLOCKS_PER_SM);
    let carveout = [
        carveout_config(carveout_for(shared.into())),
        carveout_config(MAX_SHARED_PER_SM / 1024),
        carveout_config(carveout_for(u64::from(shared) * u64::from(resident))),
    ];
    let (g, b) = (shape.grid(), shape.block());
    Ok(Checked {
        grid: [g.x, g.y, g.z],
        block: [b.x, b.y, b.z],
        registers: l.kernel.registers(),
        barriers: l.kernel.barriers(),
        shared,
        carveout,
        local_high: u32::try_from(local)
            .map_err(|_| field("SHADER_LOCAL_MEMORY_HIGH_SIZE", local, 24))?,
        program: l.program,
        banks: l.banks.to_vec(),
        release: l.release,
    })
}

impl QmdVersion {
    /// Its size in bytes.
    pub fn size(self) -> usize {
        match self {
            Self::V04 => v04::BYTES,
        }
    }

    /// The QMD for `launch`.
    ///
    /// # Errors
    /// [`QmdError`] naming the value and its limit: a misaligned or too high program,
    /// constant buffer or release address; a constant buffer index above 7 or given
    /// twice, a size not a multiple of 16 or above 64 KiB, no buffer 0 or one smaller than
    /// the kernel's bank 0; a one-word release of a 64-bit payload; more local memory than
    /// the channel's SLM holds.
    pub fn build(self, launch: &Launch<'_>) -> Result<Qmd, QmdError> {
        let checked = check(launch)?;
        let words = match self {
            Self::V04 => v04::encode(&checked)?.to_vec(),
        };
        Ok(Qmd {
            version: self,
            words,
        })
    }
}

#[cfg(test)]
mod tests;
