//! QMDs, the launch descriptors a compute class reads: one file per QMD version (its
//! field table, taken from the generated header module), one encoder for all of them,
//! and the checks every version shares.
//!
//! Flow: rig-runtime checks a kernel and a launch shape and fills [`Params`] →
//! [`for_class`] picks the version the channel's compute class reads →
//! [`QmdVersion::build`] checks the addresses and encodes → the runtime writes the
//! [`Qmd`] to GPU memory (256-byte aligned) and sends it with
//! `method::compute::send_pcas`.
//!
//! Versions: HOPPER_COMPUTE_A reads V04_00 ([`v04`], what ran on the H100 and H200);
//! BLACKWELL_COMPUTE_A reads V05_00 ([`v05`], encoded from its header and tested
//! against it; never run on a Blackwell GPU). A version is a [`Fields`] table: which
//! field of the header holds each value and in what unit (V05_00 takes the program
//! address, the shared memory size and the local memory sizes shifted).
//!
//! What is set is what ran on the H200 (docs/hardware/nvidia-compute.md, "What the
//! H200 ran"; after Mesa NVK's `Qmd4_0` and the libcuda-free Hopper launcher it
//! cites): QMD_GROUP_ID 0x3f, QMD_TYPE GRID_CTA, the version, API_VISIBLE_CALL_LIMIT
//! NO_CHECK, SAMPLER_INDEX INDEPENDENTLY, the texture header, sampler, texture data and
//! shader data caches invalidated, CWD_MEMBAR_TYPE L1_SYSMEMBAR, grid, block, registers,
//! barriers, shared size and carve-outs, local memory at the window's top (HIGH; CUDA
//! code's stack), program address, constant buffers (each invalidated), and release
//! slot 0 with FE_NONE: the grid's L1_SYSMEMBAR already made its writes visible, and a
//! second system membar before the release cost every launch 0.7 µs on the H200
//! (docs/hardware/nvidia-compute.md, "Completion"). Everything else is 0. A one-word
//! release with PAYLOAD64B was refused on the H200 (Xid 13, SKEDCHECKXX_MISC), so
//! PAYLOAD64B goes only with TWO_WORDS.
//!
//! Not here: the checks that need the kernel (its bank 0 template, its local memory,
//! the shape and carve-out choice): rig-runtime's `qmd`.

pub mod v04;
pub mod v05;

use rig_model::addr::GpuVa;

use crate::class::{clcbc0::HOPPER_COMPUTE_A, clcdc0::BLACKWELL_COMPUTE_A};
use crate::field::{FieldError, MwField};

/// GPU addresses the QMD's address fields hold: below 2^57.
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
/// Alignment of a QMD in memory: SEND_PCAS_A and DEPENDENT_QMD0_POINTER take its
/// address shifted right by 8.
pub const QMD_ALIGN: u64 = 256;
/// The group id every QMD rig builds carries (what ran on the H200).
const QMD_GROUP_ID_RIG: u64 = 0x3f;

/// A QMD layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QmdVersion {
    /// QMD V04_00, 384 bytes: HOPPER_COMPUTE_A.
    V04,
    /// QMD V05_00, 384 bytes: BLACKWELL_COMPUTE_A.
    V05,
}

/// The QMD version compute class `class` reads.
///
/// # Errors
/// [`QmdError::Class`] for a class rig has no QMD for.
pub fn for_class(class: u32) -> Result<QmdVersion, QmdError> {
    match class {
        HOPPER_COMPUTE_A => Ok(QmdVersion::V04),
        BLACKWELL_COMPUTE_A => Ok(QmdVersion::V05),
        _ => Err(QmdError::Class { class }),
    }
}

/// A constant buffer to bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConstantBuffer {
    /// Its index, 0 to 7 (bank N of `c[N][..]`).
    pub index: u8,
    /// Its GPU address.
    pub addr: GpuVa,
    /// Its size in bytes.
    pub size: u32,
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
    /// The alignment its address needs.
    pub fn align(self) -> u64 {
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
    pub addr: GpuVa,
    /// What.
    pub payload: u64,
    /// How many words.
    pub kind: ReleaseKind,
}

/// The values one launch's QMD holds, in the units rig counts them in (bytes,
/// addresses); the version's [`Fields`] table converts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Blocks per grid dimension.
    pub grid: [u32; 3],
    /// Threads per block dimension.
    pub block: [u32; 3],
    /// Registers per thread.
    pub registers: u32,
    /// Named barriers.
    pub barriers: u32,
    /// Shared memory per block in bytes, a multiple of [`SHARED_ALIGN`].
    pub shared: u32,
    /// MIN, MAX and TARGET_SM_CONFIG_SHARED_MEM_SIZE ([`carveout_config`] of each).
    pub carveout: [u32; 3],
    /// Local memory per thread at the window's top, in bytes.
    pub local_high: u32,
    /// The kernel's entry.
    pub program: GpuVa,
    /// The constant buffers.
    pub banks: Vec<ConstantBuffer>,
    /// The release slot, if any.
    pub release: Option<Release>,
}

/// A launch a QMD cannot describe. Each names the value and the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QmdError {
    /// A compute class rig has no QMD for.
    #[error(
        "compute class {class:#06x}: rig builds QMDs for HOPPER_COMPUTE_A and BLACKWELL_COMPUTE_A"
    )]
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
    /// No constant buffer 0, or one smaller than the kernel's bank 0 (rig-runtime's
    /// check).
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
    /// More local memory per thread than the channel's SLM buffer holds (rig-runtime's
    /// check).
    #[error(
        "the kernel needs {needed} bytes of local memory per thread; the channel's SLM holds {capacity}"
    )]
    LocalMemory {
        /// Bytes per thread the kernel needs.
        needed: u64,
        /// Bytes per thread the SLM buffer holds.
        capacity: u64,
    },
    /// A dependent QMD's address that DEPENDENT_QMD0_POINTER cannot hold.
    #[error("dependent QMD at {addr:#x}: it must be {QMD_ALIGN}-byte aligned and below 2^40")]
    Dependent {
        /// The address.
        addr: u64,
    },
    /// A value too wide for its field (a check above should have refused it first).
    #[error(transparent)]
    Field(#[from] FieldError),
}

/// The hardware encoding of a carve-out of `kib` KiB: KiB/4 + 1 (Mesa NVK
/// `gv100_sm_config_smem_size`).
pub fn carveout_config(kib: u32) -> u32 {
    kib / 4 + 1
}

/// The index of the 64-bit word that holds `lower` then `upper` (two 32-bit fields),
/// if one does.
pub(crate) const fn u64_holding(lower: MwField, upper: MwField) -> Option<usize> {
    if lower.lo.is_multiple_of(64)
        && lower.hi == lower.lo + 31
        && upper.lo == lower.lo + 32
        && upper.hi == upper.lo + 31
    {
        Some(lower.lo as usize / 64)
    } else {
        None
    }
}

/// A field of a version, or of every element of an indexed one.
type Indexed = fn(u32) -> MwField;

/// One QMD version's layout: the header's field for each value rig sets, the values of
/// its enumerants rig uses, and the units (shifts) its address and size fields take.
#[derive(Debug)]
pub struct Fields {
    /// Words in the QMD.
    pub words: usize,
    /// QMD_MAJOR_VERSION's value.
    pub major: u64,
    /// The index, among the QMD's 64-bit words, of the one that holds release slot 0's
    /// payload whole (a launch patches it in place with one store); `None` where the
    /// payload straddles two (V05_00: bits 607:544).
    pub release_payload_u64: Option<usize>,
    pub qmd_group_id: MwField,
    pub qmd_type: MwField,
    pub qmd_type_grid_cta: u32,
    pub qmd_major_version: MwField,
    pub qmd_minor_version: MwField,
    pub api_visible_call_limit: MwField,
    pub api_visible_call_limit_no_check: u32,
    pub sampler_index: MwField,
    pub sampler_index_independently: u32,
    pub cwd_membar_type: MwField,
    pub cwd_membar_type_l1_sysmembar: u32,
    pub invalidate: [MwField; 4],
    pub grid: [MwField; 3],
    pub block: [MwField; 3],
    pub register_count: MwField,
    pub barrier_count: MwField,
    /// SHARED_MEMORY_SIZE and how far the byte count is shifted into it.
    pub shared_memory_size: (MwField, u32),
    /// MIN, MAX and TARGET_SM_CONFIG_SHARED_MEM_SIZE.
    pub sm_config_shared_mem_size: [MwField; 3],
    /// SHADER_LOCAL_MEMORY_LOW_SIZE and _HIGH_SIZE, and their shift.
    pub local_memory_size: ([MwField; 2], u32),
    /// PROGRAM_ADDRESS_LOWER and _UPPER, and the shift of the address.
    pub program_address: ([MwField; 2], u32),
    pub release_enable: Indexed,
    pub release_structure_size: Indexed,
    /// ONE_WORD, TWO_WORDS, FOUR_WORDS.
    pub release_structure_size_values: [u32; 3],
    pub release_membar_type: Indexed,
    pub release_membar_type_fe_none: u32,
    pub release_payload64b: Indexed,
    pub release0_addr: [MwField; 2],
    pub release0_payload: [MwField; 2],
    pub constant_buffer_valid: Indexed,
    pub constant_buffer_invalidate: Indexed,
    pub constant_buffer_addr_shifted6: [Indexed; 2],
    pub constant_buffer_size_shifted4: Indexed,
    /// DEPENDENT_QMD0's ENABLE, ACTION, PREFETCH and POINTER (the next QMD's address
    /// shifted right by 8), and ACTION's QMD_SCHEDULE: a QMD that, once its grid is
    /// done, schedules the next one itself.
    pub dependent0: [MwField; 4],
    pub dependent_action_schedule: u32,
}

impl QmdVersion {
    /// Its field table.
    pub fn fields(self) -> &'static Fields {
        match self {
            Self::V04 => &v04::FIELDS,
            Self::V05 => &v05::FIELDS,
        }
    }

    /// Its size in bytes.
    pub fn size(self) -> usize {
        self.fields().words * 4
    }

    /// The QMD for `p`.
    ///
    /// # Errors
    /// [`QmdError`] naming the value and its limit: a misaligned or too high program,
    /// constant buffer or release address; a constant buffer index above 7 or given
    /// twice, a size not a multiple of 16 or above 64 KiB; a one-word release of a
    /// 64-bit payload; a value wider than its field in this version.
    pub fn build(self, p: &Params) -> Result<Qmd, QmdError> {
        check(p)?;
        let words = encode(self.fields(), p)?;
        Ok(Qmd {
            version: self,
            words,
        })
    }
}

fn check_bank(b: &ConstantBuffer, seen: &mut [bool; 8]) -> Result<(), QmdError> {
    let err = |reason| QmdError::Bank {
        index: b.index,
        addr: b.addr.get(),
        size: b.size,
        reason,
    };
    let slot = seen
        .get_mut(usize::from(b.index))
        .ok_or(err("the QMD binds buffers 0 to 7"))?;
    if std::mem::replace(slot, true) {
        return Err(err("a second buffer of that index"));
    }
    if !b.addr.get().is_multiple_of(BANK_ALIGN) || b.addr.get() >= ADDRESS_LIMIT {
        return Err(err("the address must be 64-byte aligned and below 2^57"));
    }
    if b.size == 0 || !b.size.is_multiple_of(BANK_SIZE_ALIGN) || b.size > MAX_BANK {
        return Err(err("the size must be a multiple of 16 from 16 to 64 KiB"));
    }
    Ok(())
}

/// The address checks every version shares.
fn check(p: &Params) -> Result<(), QmdError> {
    let program = p.program.get();
    if !program.is_multiple_of(PROGRAM_ALIGN) || program >= ADDRESS_LIMIT {
        return Err(QmdError::Program { addr: program });
    }
    let mut seen = [false; 8];
    for b in &p.banks {
        check_bank(b, &mut seen)?;
    }
    if let Some(r) = p.release {
        let addr = r.addr.get();
        if !addr.is_multiple_of(r.kind.align()) || addr >= ADDRESS_LIMIT {
            return Err(QmdError::Release {
                addr,
                kind: r.kind,
                align: r.kind.align(),
            });
        }
        if r.kind != ReleaseKind::DoubleWord && u32::try_from(r.payload).is_err() {
            return Err(QmdError::Payload { payload: r.payload });
        }
    }
    Ok(())
}

fn split(v: u64) -> (u64, u64) {
    (v & 0xffff_ffff, v >> 32)
}

fn set_pair(w: &mut [u32], fields: [MwField; 2], v: u64) -> Result<(), FieldError> {
    let (lo, hi) = split(v);
    fields[0].set(w, lo)?;
    fields[1].set(w, hi)
}

fn set_bank(w: &mut [u32], f: &Fields, i: u32, addr: GpuVa) -> Result<(), FieldError> {
    let [lower, upper] = f.constant_buffer_addr_shifted6;
    set_pair(w, [lower(i), upper(i)], addr.get() >> 6)
}

/// Encodes `p` in layout `f`.
fn encode(f: &Fields, p: &Params) -> Result<Vec<u32>, FieldError> {
    let mut w = vec![0u32; f.words];
    let w = w.as_mut_slice();
    f.qmd_group_id.set(w, QMD_GROUP_ID_RIG)?;
    f.qmd_type.set(w, f.qmd_type_grid_cta.into())?;
    f.qmd_major_version.set(w, f.major)?;
    f.qmd_minor_version.set(w, 0)?;
    f.api_visible_call_limit
        .set(w, f.api_visible_call_limit_no_check.into())?;
    f.sampler_index
        .set(w, f.sampler_index_independently.into())?;
    f.cwd_membar_type
        .set(w, f.cwd_membar_type_l1_sysmembar.into())?;
    for (field, v) in f.grid.iter().zip(p.grid) {
        field.set(w, v.into())?;
    }
    for (field, v) in f.block.iter().zip(p.block) {
        field.set(w, v.into())?;
    }
    f.register_count.set(w, p.registers.into())?;
    f.barrier_count.set(w, p.barriers.into())?;
    let (shared, shift) = f.shared_memory_size;
    shared.set(w, u64::from(p.shared) >> shift)?;
    for field in f.invalidate {
        field.set(w, 1)?;
    }
    for (field, v) in f.sm_config_shared_mem_size.iter().zip(p.carveout) {
        field.set(w, v.into())?;
    }
    let ([low, high], shift) = f.local_memory_size;
    low.set(w, 0)?;
    let local = u64::from(p.local_high).next_multiple_of(1 << shift) >> shift;
    high.set(w, local)?;
    let (program, shift) = f.program_address;
    set_pair(w, program, p.program.get() >> shift)?;
    for b in &p.banks {
        let i = u32::from(b.index);
        set_bank(w, f, i, b.addr)?;
        (f.constant_buffer_size_shifted4)(i).set(w, u64::from(b.size >> 4))?;
        (f.constant_buffer_valid)(i).set(w, 1)?;
        (f.constant_buffer_invalidate)(i).set(w, 1)?;
    }
    if let Some(r) = p.release {
        let [one, two, four] = f.release_structure_size_values;
        let (size, payload64) = match r.kind {
            ReleaseKind::Word => (one, 0),
            ReleaseKind::DoubleWord => (two, 1),
            ReleaseKind::WithTimestamp => (four, 0),
        };
        (f.release_enable)(0).set(w, 1)?;
        (f.release_structure_size)(0).set(w, size.into())?;
        // No membar of the front end's own: CWD_MEMBAR_TYPE L1_SYSMEMBAR above is the
        // one that orders the grid's writes (and a fault) before the release.
        (f.release_membar_type)(0).set(w, f.release_membar_type_fe_none.into())?;
        (f.release_payload64b)(0).set(w, payload64)?;
        set_pair(w, f.release0_addr, r.addr.get())?;
        set_pair(w, f.release0_payload, r.payload)?;
    }
    Ok(w.to_vec())
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
        let err = |reason| QmdError::Bank {
            index,
            addr: addr.get(),
            size: 0,
            reason,
        };
        if index >= 8 {
            return Err(err("the QMD binds buffers 0 to 7"));
        }
        if !addr.get().is_multiple_of(BANK_ALIGN) || addr.get() >= ADDRESS_LIMIT {
            return Err(err("the address must be 64-byte aligned and below 2^57"));
        }
        let f = self.version.fields();
        Ok(set_bank(&mut self.words, f, u32::from(index), addr)?)
    }

    /// Sets release slot 0's payload (a 64-bit one needs a [`ReleaseKind::DoubleWord`]
    /// release; the others carry 32 bits).
    ///
    /// # Errors
    /// [`QmdError::Field`] (cannot happen for V04 or V05: both halves are 32-bit fields).
    pub fn set_release_payload(&mut self, payload: u64) -> Result<(), QmdError> {
        let f = self.version.fields();
        Ok(set_pair(&mut self.words, f.release0_payload, payload)?)
    }

    /// Chains `next` behind this QMD (`Some`): once this grid is done, the compute
    /// engine schedules the QMD at `next` itself, as a SEND_PCAS with SCHEDULE would,
    /// with no host method between them (DEPENDENT_QMD0 with QMD_SCHEDULE, prefetched).
    /// `None` clears the chain. Returns the indices, in [`Qmd::to_u64s`], of the 64-bit
    /// words the fields lie in: what a slot already in memory rewrites.
    ///
    /// # Errors
    /// [`QmdError::Dependent`]: `next` misaligned (256 bytes) or past 2^40, which the
    /// 32-bit shifted pointer cannot hold.
    pub fn set_dependent(&mut self, next: Option<GpuVa>) -> Result<[usize; 2], QmdError> {
        let d = self.dependent();
        let words = d.words(next)?;
        for (at, w) in d.at.into_iter().zip(words) {
            self.words[2 * at] = lower(w);
            self.words[2 * at + 1] = upper(w);
        }
        Ok(d.at)
    }

    /// The two 64-bit words of this QMD that hold DEPENDENT_QMD0, as they are with no
    /// chain: what chains another QMD behind this one, or clears that chain, in a QMD
    /// already in memory, two stores and no copy of the QMD ([`Dependent::words`]).
    /// They hold no field a launch patches in a written QMD (release slot 0's payload,
    /// constant buffers' addresses; a test checks both versions), so one `Dependent`
    /// serves every QMD built from the same parameters.
    pub fn dependent(&self) -> Dependent {
        let f = self.version.fields();
        let [enable, .., pointer] = f.dependent0;
        let at = [(enable.lo / 64) as usize, (pointer.lo / 64) as usize];
        let u64s = |i: usize| u64::from(self.words[2 * i]) | u64::from(self.words[2 * i + 1]) << 32;
        let mut d = Dependent {
            at,
            unchained: [u64s(at[0]), u64s(at[1])],
            version: self.version,
        };
        // PANIC: the fields lie in the two words (a test checks both versions), and
        // clearing them never fails.
        d.unchained = d.words(None).expect("DEPENDENT_QMD0 cleared");
        d
    }

    /// The index, in [`Qmd::to_u64s`], of the 64-bit word that holds release slot 0's
    /// payload whole, so that a launch patches it in place with one store; `None` for a
    /// version whose payload straddles two (V05_00).
    pub fn release_payload_word(&self) -> Option<usize> {
        self.version.fields().release_payload_u64
    }
}

/// The two 64-bit words of a QMD that hold DEPENDENT_QMD0 ([`Qmd::dependent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dependent {
    /// Their indices in [`Qmd::to_u64s`] (ENABLE's, ACTION's and PREFETCH's, then
    /// POINTER's; the same index twice where one word holds all four).
    at: [usize; 2],
    /// Their values with no chain.
    unchained: [u64; 2],
    version: QmdVersion,
}

impl Dependent {
    /// The indices, in [`Qmd::to_u64s`], of the two words.
    pub fn at(&self) -> [usize; 2] {
        self.at
    }

    /// The two words chaining the QMD at `next` (`Some`; QMD_SCHEDULE, prefetched) or
    /// with no chain (`None`).
    ///
    /// # Errors
    /// [`QmdError::Dependent`]: `next` misaligned (256 bytes) or past 2^40, which the
    /// 32-bit shifted pointer cannot hold.
    pub fn words(&self, next: Option<GpuVa>) -> Result<[u64; 2], QmdError> {
        let f = self.version.fields();
        let (on, act, ptr) = match next {
            Some(va) => {
                if !va.get().is_multiple_of(QMD_ALIGN) || va.get() >> 8 > u64::from(u32::MAX) {
                    return Err(QmdError::Dependent { addr: va.get() });
                }
                (1, u64::from(f.dependent_action_schedule), va.get() >> 8)
            }
            None => (0, 0, 0),
        };
        let [a, b] = self.unchained;
        let mut w = [lower(a), upper(a), lower(b), upper(b)];
        let [enable, action, prefetch, pointer] = f.dependent0;
        // POINTER goes to the second of `w`'s two words unless one word holds all four.
        let second = usize::from(self.at[1] != self.at[0]);
        // Each field moved from its word of the whole QMD (bit `from` on) to word `to`
        // of `w`.
        let local = |field: MwField, from: MwField, to: u32| {
            let shift = from.lo / 64 * 64;
            MwField::new(
                field.name,
                field.hi - shift + 64 * to,
                field.lo - shift + 64 * to,
            )
        };
        local(enable, enable, 0).set(&mut w, on)?;
        local(action, enable, 0).set(&mut w, act)?;
        local(prefetch, enable, 0).set(&mut w, on)?;
        local(pointer, pointer, u32::from(second == 1)).set(&mut w, ptr)?;
        let first = u64::from(w[0]) | u64::from(w[1]) << 32;
        let last = u64::from(w[2 * second]) | u64::from(w[2 * second + 1]) << 32;
        Ok([first, last])
    }
}

fn lower(w: u64) -> u32 {
    (w & 0xffff_ffff) as u32
}

fn upper(w: u64) -> u32 {
    (w >> 32) as u32
}

#[cfg(test)]
mod tests;
