//! QMD V04_00 (HOPPER_COMPUTE_A, 0xCBC0): 384 bytes, every field at the position
//! `NVCBC0_QMDV04_00_<NAME>` gives in NVIDIA open-gpu-doc `classes/compute/clcbc0qmd.h`
//! (`MW(hi:lo)`: bits hi..lo of the QMD counted from bit 0 of word 0). The unit tests
//! read the header (headers/clcbc0qmd.h) and check every field here against it.
//!
//! What is set is what ran on the H200 (docs/hardware/nvidia-compute.md, "What the
//! H200 ran"; after Mesa NVK's `Qmd4_0` and the libcuda-free Hopper launcher it cites):
//! QMD_GROUP_ID 0x3f, QMD_TYPE GRID_CTA, version 4.0, API_VISIBLE_CALL_LIMIT NO_CHECK,
//! SAMPLER_INDEX INDEPENDENTLY, the texture header, sampler, texture data and shader
//! data caches invalidated, CWD_MEMBAR_TYPE L1_SYSMEMBAR, grid, block, registers,
//! barriers, shared size and carve-outs, local memory at the window's top (HIGH; CUDA
//! code's stack), program address, constant buffers (each invalidated), and release
//! slot 0 with FE_NONE: the grid's L1_SYSMEMBAR already made its writes visible, and a
//! second system membar before the release cost every launch 0.7 µs on the H200
//! (docs/hardware/nvidia-compute.md, "Completion"). Everything else is 0. A one-word release with PAYLOAD64B
//! was refused on the H200 (Xid 13, SKEDCHECKXX_MISC), so PAYLOAD64B goes only with
//! TWO_WORDS.

use super::{Checked, QmdError, ReleaseKind};

/// Words in a V04 QMD.
pub const WORDS: usize = 96;
/// Bytes in a V04 QMD.
pub const BYTES: usize = WORDS * 4;

/// A field: bits `hi..=lo` of the QMD, named as the header names it (without the
/// `NVCBC0_QMDV04_00_` prefix; indexed fields carry their index in `index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The header's name.
    pub name: &'static str,
    /// The index of an indexed field (`RELEASE_ENABLE(i)`, …).
    pub index: Option<u32>,
    /// Its highest bit.
    pub hi: u32,
    /// Its lowest bit.
    pub lo: u32,
}

const fn f(name: &'static str, hi: u32, lo: u32) -> Field {
    Field {
        name,
        index: None,
        hi,
        lo,
    }
}

const fn fi(name: &'static str, i: u32, hi: u32, lo: u32) -> Field {
    Field {
        name,
        index: Some(i),
        hi,
        lo,
    }
}

pub(crate) const QMD_GROUP_ID: Field = f("QMD_GROUP_ID", 21, 16);
/// The group id every QMD rig builds carries (what ran on the H200).
pub(crate) const QMD_GROUP_ID_RIG: u64 = 0x3f;
pub(crate) const QMD_TYPE: Field = f("QMD_TYPE", 25, 23);
pub(crate) const QMD_TYPE_GRID_CTA: u64 = 2;
pub(crate) const SHADER_LOCAL_MEMORY_LOW_SIZE: Field = f("SHADER_LOCAL_MEMORY_LOW_SIZE", 535, 512);
pub(crate) const SHADER_LOCAL_MEMORY_HIGH_SIZE: Field =
    f("SHADER_LOCAL_MEMORY_HIGH_SIZE", 567, 544);
pub(crate) const API_VISIBLE_CALL_LIMIT: Field = f("API_VISIBLE_CALL_LIMIT", 568, 568);
pub(crate) const API_VISIBLE_CALL_LIMIT_NO_CHECK: u64 = 1;
pub(crate) const SAMPLER_INDEX: Field = f("SAMPLER_INDEX", 569, 569);
pub(crate) const SAMPLER_INDEX_INDEPENDENTLY: u64 = 0;
pub(crate) const QMD_MINOR_VERSION: Field = f("QMD_MINOR_VERSION", 579, 576);
pub(crate) const QMD_MAJOR_VERSION: Field = f("QMD_MAJOR_VERSION", 583, 580);
pub(crate) const SHARED_MEMORY_SIZE: Field = f("SHARED_MEMORY_SIZE", 601, 584);
pub(crate) const INVALIDATE_TEXTURE_HEADER_CACHE: Field =
    f("INVALIDATE_TEXTURE_HEADER_CACHE", 602, 602);
pub(crate) const INVALIDATE_TEXTURE_SAMPLER_CACHE: Field =
    f("INVALIDATE_TEXTURE_SAMPLER_CACHE", 603, 603);
pub(crate) const INVALIDATE_TEXTURE_DATA_CACHE: Field =
    f("INVALIDATE_TEXTURE_DATA_CACHE", 604, 604);
pub(crate) const INVALIDATE_SHADER_DATA_CACHE: Field = f("INVALIDATE_SHADER_DATA_CACHE", 605, 605);
pub(crate) const MIN_SM_CONFIG_SHARED_MEM_SIZE: Field =
    f("MIN_SM_CONFIG_SHARED_MEM_SIZE", 613, 608);
pub(crate) const MAX_SM_CONFIG_SHARED_MEM_SIZE: Field =
    f("MAX_SM_CONFIG_SHARED_MEM_SIZE", 619, 614);
pub(crate) const TARGET_SM_CONFIG_SHARED_MEM_SIZE: Field =
    f("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 625, 620);
pub(crate) const RELEASE_SEMAPHORE0_ADDR_LOWER: Field =
    f("RELEASE_SEMAPHORE0_ADDR_LOWER", 671, 640);
pub(crate) const RELEASE_SEMAPHORE0_ADDR_UPPER: Field =
    f("RELEASE_SEMAPHORE0_ADDR_UPPER", 696, 672);
pub(crate) const RELEASE_SEMAPHORE0_PAYLOAD_LOWER: Field =
    f("RELEASE_SEMAPHORE0_PAYLOAD_LOWER", 735, 704);
pub(crate) const RELEASE_SEMAPHORE0_PAYLOAD_UPPER: Field =
    f("RELEASE_SEMAPHORE0_PAYLOAD_UPPER", 767, 736);
pub(crate) const GRID_WIDTH: Field = f("GRID_WIDTH", 1055, 1024);
pub(crate) const GRID_HEIGHT: Field = f("GRID_HEIGHT", 1071, 1056);
pub(crate) const GRID_DEPTH: Field = f("GRID_DEPTH", 1103, 1088);
pub(crate) const CWD_MEMBAR_TYPE: Field = f("CWD_MEMBAR_TYPE", 1137, 1136);
pub(crate) const CWD_MEMBAR_TYPE_L1_SYSMEMBAR: u64 = 1;
pub(crate) const CTA_THREAD_DIMENSION0: Field = f("CTA_THREAD_DIMENSION0", 1167, 1152);
pub(crate) const CTA_THREAD_DIMENSION1: Field = f("CTA_THREAD_DIMENSION1", 1183, 1168);
pub(crate) const CTA_THREAD_DIMENSION2: Field = f("CTA_THREAD_DIMENSION2", 1199, 1184);
pub(crate) const REGISTER_COUNT: Field = f("REGISTER_COUNT", 1208, 1200);
pub(crate) const BARRIER_COUNT: Field = f("BARRIER_COUNT", 1215, 1211);
pub(crate) const PROGRAM_ADDRESS_LOWER: Field = f("PROGRAM_ADDRESS_LOWER", 1247, 1216);
pub(crate) const PROGRAM_ADDRESS_UPPER: Field = f("PROGRAM_ADDRESS_UPPER", 1272, 1248);

pub(crate) const RELEASE_STRUCTURE_SIZE_SEMAPHORE_FOUR_WORDS: u64 = 0;
pub(crate) const RELEASE_STRUCTURE_SIZE_SEMAPHORE_ONE_WORD: u64 = 1;
pub(crate) const RELEASE_STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS: u64 = 2;
pub(crate) const RELEASE_MEMBAR_TYPE_FE_NONE: u64 = 0;

/// `RELEASE_ENABLE(i)`: `MW((320+(i)*16):(320+(i)*16))`.
pub(crate) const fn release_enable(i: u32) -> Field {
    fi("RELEASE_ENABLE", i, 320 + i * 16, 320 + i * 16)
}

/// `RELEASE_STRUCTURE_SIZE(i)`: `MW((322+(i)*16):(321+(i)*16))`.
pub(crate) const fn release_structure_size(i: u32) -> Field {
    fi("RELEASE_STRUCTURE_SIZE", i, 322 + i * 16, 321 + i * 16)
}

/// `RELEASE_MEMBAR_TYPE(i)`: `MW((323+(i)*16):(323+(i)*16))`.
pub(crate) const fn release_membar_type(i: u32) -> Field {
    fi("RELEASE_MEMBAR_TYPE", i, 323 + i * 16, 323 + i * 16)
}

/// `RELEASE_PAYLOAD64B(i)`: `MW((332+(i)*16):(332+(i)*16))`.
pub(crate) const fn release_payload64b(i: u32) -> Field {
    fi("RELEASE_PAYLOAD64B", i, 332 + i * 16, 332 + i * 16)
}

/// `CONSTANT_BUFFER_VALID(i)`: `MW((416+(i)*4):(416+(i)*4))`.
pub(crate) const fn constant_buffer_valid(i: u32) -> Field {
    fi("CONSTANT_BUFFER_VALID", i, 416 + i * 4, 416 + i * 4)
}

/// `CONSTANT_BUFFER_INVALIDATE(i)`: `MW((419+(i)*4):(419+(i)*4))`.
pub(crate) const fn constant_buffer_invalidate(i: u32) -> Field {
    fi("CONSTANT_BUFFER_INVALIDATE", i, 419 + i * 4, 419 + i * 4)
}

/// `CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(i)`: `MW((1567+(i)*64):(1536+(i)*64))`.
pub(crate) const fn constant_buffer_addr_lower_shifted6(i: u32) -> Field {
    fi(
        "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6",
        i,
        1567 + i * 64,
        1536 + i * 64,
    )
}

/// `CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(i)`: `MW((1586+(i)*64):(1568+(i)*64))`.
pub(crate) const fn constant_buffer_addr_upper_shifted6(i: u32) -> Field {
    fi(
        "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6",
        i,
        1586 + i * 64,
        1568 + i * 64,
    )
}

/// `CONSTANT_BUFFER_SIZE_SHIFTED4(i)`: `MW((1599+(i)*64):(1587+(i)*64))`.
pub(crate) const fn constant_buffer_size_shifted4(i: u32) -> Field {
    fi(
        "CONSTANT_BUFFER_SIZE_SHIFTED4",
        i,
        1599 + i * 64,
        1587 + i * 64,
    )
}

impl Field {
    /// Its width in bits.
    pub fn bits(self) -> u32 {
        self.hi - self.lo + 1
    }

    /// Writes `value` into `words`.
    ///
    /// # Errors
    /// [`QmdError::Field`] for a value wider than the field.
    pub(crate) fn set(self, words: &mut [u32; WORDS], value: u64) -> Result<(), QmdError> {
        let bits = self.bits();
        if bits < 64 && value >> bits != 0 {
            return Err(QmdError::Field {
                field: self.name,
                value,
                bits,
            });
        }
        for bit in 0..bits {
            let at = self.lo + bit;
            // PANIC: every field of this file ends below bit 3072 (the unit tests check
            // them against the header), so `at / 32` is below WORDS.
            let word = &mut words[(at / 32) as usize];
            let mask = 1u32 << (at % 32);
            if value >> bit & 1 == 1 {
                *word |= mask;
            } else {
                *word &= !mask;
            }
        }
        Ok(())
    }

    /// Reads the field from `words` (for tests and debugging).
    pub fn get(self, words: &[u32]) -> Option<u64> {
        (0..self.bits()).try_fold(0u64, |v, bit| {
            let at = self.lo + bit;
            let word = words.get(usize::try_from(at / 32).ok()?)?;
            Some(v | u64::from(word >> (at % 32) & 1) << bit)
        })
    }
}

/// The 64-bit word (of the QMD's 48) holding RELEASE_SEMAPHORE0_PAYLOAD_LOWER and
/// _UPPER, bits 767:704: the unit tests check it against the two fields.
pub(crate) const RELEASE_PAYLOAD_U64: usize = 11;

fn words_mut(words: &mut [u32]) -> Result<&mut [u32; WORDS], QmdError> {
    let len = words.len() as u64;
    words.try_into().map_err(|_| QmdError::Field {
        field: "the QMD's length in words",
        value: len,
        bits: 0,
    })
}

/// Points constant buffer `i` at `addr` (64-byte aligned, checked by the caller).
pub(crate) fn set_bank_address(words: &mut [u32], i: u8, addr: u64) -> Result<(), QmdError> {
    let w = words_mut(words)?;
    let (lo, hi) = split(addr >> 6);
    constant_buffer_addr_lower_shifted6(u32::from(i)).set(w, lo)?;
    constant_buffer_addr_upper_shifted6(u32::from(i)).set(w, hi)
}

/// Sets release slot 0's payload.
pub(crate) fn set_release_payload(words: &mut [u32], payload: u64) -> Result<(), QmdError> {
    let w = words_mut(words)?;
    let (lo, hi) = split(payload);
    RELEASE_SEMAPHORE0_PAYLOAD_LOWER.set(w, lo)?;
    RELEASE_SEMAPHORE0_PAYLOAD_UPPER.set(w, hi)
}

fn split(v: u64) -> (u64, u64) {
    (v & 0xffff_ffff, v >> 32)
}

/// Encodes `c` as a V04_00 QMD.
///
/// # Errors
/// [`QmdError::Field`] for a value wider than its field (the checks in `qmd` refuse such
/// launches first).
pub(crate) fn encode(c: &Checked) -> Result<[u32; WORDS], QmdError> {
    let mut w = [0u32; WORDS];
    QMD_GROUP_ID.set(&mut w, QMD_GROUP_ID_RIG)?;
    QMD_TYPE.set(&mut w, QMD_TYPE_GRID_CTA)?;
    QMD_MAJOR_VERSION.set(&mut w, 4)?;
    QMD_MINOR_VERSION.set(&mut w, 0)?;
    API_VISIBLE_CALL_LIMIT.set(&mut w, API_VISIBLE_CALL_LIMIT_NO_CHECK)?;
    SAMPLER_INDEX.set(&mut w, SAMPLER_INDEX_INDEPENDENTLY)?;
    CWD_MEMBAR_TYPE.set(&mut w, CWD_MEMBAR_TYPE_L1_SYSMEMBAR)?;
    GRID_WIDTH.set(&mut w, c.grid[0].into())?;
    GRID_HEIGHT.set(&mut w, c.grid[1].into())?;
    GRID_DEPTH.set(&mut w, c.grid[2].into())?;
    CTA_THREAD_DIMENSION0.set(&mut w, c.block[0].into())?;
    CTA_THREAD_DIMENSION1.set(&mut w, c.block[1].into())?;
    CTA_THREAD_DIMENSION2.set(&mut w, c.block[2].into())?;
    REGISTER_COUNT.set(&mut w, c.registers.into())?;
    BARRIER_COUNT.set(&mut w, c.barriers.into())?;
    SHARED_MEMORY_SIZE.set(&mut w, c.shared.into())?;
    for f in [
        INVALIDATE_TEXTURE_HEADER_CACHE,
        INVALIDATE_TEXTURE_SAMPLER_CACHE,
        INVALIDATE_TEXTURE_DATA_CACHE,
        INVALIDATE_SHADER_DATA_CACHE,
    ] {
        f.set(&mut w, 1)?;
    }
    MIN_SM_CONFIG_SHARED_MEM_SIZE.set(&mut w, c.carveout[0].into())?;
    MAX_SM_CONFIG_SHARED_MEM_SIZE.set(&mut w, c.carveout[1].into())?;
    TARGET_SM_CONFIG_SHARED_MEM_SIZE.set(&mut w, c.carveout[2].into())?;
    SHADER_LOCAL_MEMORY_LOW_SIZE.set(&mut w, 0)?;
    SHADER_LOCAL_MEMORY_HIGH_SIZE.set(&mut w, c.local_high.into())?;
    let (lo, hi) = split(c.program);
    PROGRAM_ADDRESS_LOWER.set(&mut w, lo)?;
    PROGRAM_ADDRESS_UPPER.set(&mut w, hi)?;
    for b in &c.banks {
        let i = u32::from(b.index);
        let (lo, hi) = split(b.addr >> 6);
        constant_buffer_addr_lower_shifted6(i).set(&mut w, lo)?;
        constant_buffer_addr_upper_shifted6(i).set(&mut w, hi)?;
        constant_buffer_size_shifted4(i).set(&mut w, u64::from(b.size >> 4))?;
        constant_buffer_valid(i).set(&mut w, 1)?;
        constant_buffer_invalidate(i).set(&mut w, 1)?;
    }
    if let Some(r) = c.release {
        let (size, payload64) = match r.kind {
            ReleaseKind::Word => (RELEASE_STRUCTURE_SIZE_SEMAPHORE_ONE_WORD, 0),
            ReleaseKind::DoubleWord => (RELEASE_STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS, 1),
            ReleaseKind::WithTimestamp => (RELEASE_STRUCTURE_SIZE_SEMAPHORE_FOUR_WORDS, 0),
        };
        release_enable(0).set(&mut w, 1)?;
        release_structure_size(0).set(&mut w, size)?;
        // No membar of the front end's own: CWD_MEMBAR_TYPE L1_SYSMEMBAR above is the
        // one that orders the grid's writes (and a fault) before the release.
        release_membar_type(0).set(&mut w, RELEASE_MEMBAR_TYPE_FE_NONE)?;
        release_payload64b(0).set(&mut w, payload64)?;
        let (lo, hi) = split(r.addr);
        RELEASE_SEMAPHORE0_ADDR_LOWER.set(&mut w, lo)?;
        RELEASE_SEMAPHORE0_ADDR_UPPER.set(&mut w, hi)?;
        let (lo, hi) = split(r.payload);
        RELEASE_SEMAPHORE0_PAYLOAD_LOWER.set(&mut w, lo)?;
        RELEASE_SEMAPHORE0_PAYLOAD_UPPER.set(&mut w, hi)?;
    }
    Ok(w)
}

/// Every field this file writes, with the indices it writes them at, for the tests.
#[cfg(test)]
pub(crate) fn all_fields() -> Vec<Field> {
    let mut v = vec![
        QMD_GROUP_ID,
        QMD_TYPE,
        SHADER_LOCAL_MEMORY_LOW_SIZE,
        SHADER_LOCAL_MEMORY_HIGH_SIZE,
        API_VISIBLE_CALL_LIMIT,
        SAMPLER_INDEX,
        QMD_MINOR_VERSION,
        QMD_MAJOR_VERSION,
        SHARED_MEMORY_SIZE,
        INVALIDATE_TEXTURE_HEADER_CACHE,
        INVALIDATE_TEXTURE_SAMPLER_CACHE,
        INVALIDATE_TEXTURE_DATA_CACHE,
        INVALIDATE_SHADER_DATA_CACHE,
        MIN_SM_CONFIG_SHARED_MEM_SIZE,
        MAX_SM_CONFIG_SHARED_MEM_SIZE,
        TARGET_SM_CONFIG_SHARED_MEM_SIZE,
        RELEASE_SEMAPHORE0_ADDR_LOWER,
        RELEASE_SEMAPHORE0_ADDR_UPPER,
        RELEASE_SEMAPHORE0_PAYLOAD_LOWER,
        RELEASE_SEMAPHORE0_PAYLOAD_UPPER,
        GRID_WIDTH,
        GRID_HEIGHT,
        GRID_DEPTH,
        CWD_MEMBAR_TYPE,
        CTA_THREAD_DIMENSION0,
        CTA_THREAD_DIMENSION1,
        CTA_THREAD_DIMENSION2,
        REGISTER_COUNT,
        BARRIER_COUNT,
        PROGRAM_ADDRESS_LOWER,
        PROGRAM_ADDRESS_UPPER,
    ];
    for i in 0..3 {
        v.extend([
            release_enable(i),
            release_structure_size(i),
            release_membar_type(i),
            release_payload64b(i),
        ]);
    }
    for i in 0..8 {
        v.extend([
            constant_buffer_valid(i),
            constant_buffer_invalidate(i),
            constant_buffer_addr_lower_shifted6(i),
            constant_buffer_addr_upper_shifted6(i),
            constant_buffer_size_shifted4(i),
        ]);
    }
    v
}
