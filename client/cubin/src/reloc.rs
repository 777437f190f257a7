//! CUDA relocation types: which rig applies, where each writes, and their names.
//!
//! Flow: `module` keeps every relocation whose target section is loaded, refusing the
//! types rig does not apply; `image` computes each value (symbol address + addend) once
//! the sections have GPU addresses, and [`apply`] writes it.
//!
//! Reference: the R_CUDA names as `cuobjdump -elf` prints them (redplait/denvdis's
//! table); where the 32-bit halves go: tinygrad `ops_nv.py` (`ABS32_LO_32`/`HI_32` into
//! bytes 4..8 of the instruction, its 32-bit immediate).

/// A relocation type (`ELF64_R_TYPE`) of `EM_CUDA` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RelocType(pub u32);

/// `R_CUDA_*` names by code (0..=0x73).
const NAMES: [&str; 0x74] = [
    "R_CUDA_NONE",
    "R_CUDA_32",
    "R_CUDA_64",
    "R_CUDA_G32",
    "R_CUDA_G64",
    "R_CUDA_ABS32_26",
    "R_CUDA_TEX_HEADER_INDEX",
    "R_CUDA_SAMP_HEADER_INDEX",
    "R_CUDA_SURF_HW_DESC",
    "R_CUDA_SURF_HW_SW_DESC",
    "R_CUDA_ABS32_LO_26",
    "R_CUDA_ABS32_HI_26",
    "R_CUDA_ABS32_23",
    "R_CUDA_ABS32_LO_23",
    "R_CUDA_ABS32_HI_23",
    "R_CUDA_ABS24_26",
    "R_CUDA_ABS24_23",
    "R_CUDA_ABS16_26",
    "R_CUDA_ABS16_23",
    "R_CUDA_TEX_SLOT",
    "R_CUDA_SAMP_SLOT",
    "R_CUDA_SURF_SLOT",
    "R_CUDA_TEX_BINDLESSOFF13_32",
    "R_CUDA_TEX_BINDLESSOFF13_47",
    "R_CUDA_CONST_FIELD19_28",
    "R_CUDA_CONST_FIELD19_23",
    "R_CUDA_TEX_SLOT9_49",
    "R_CUDA_6_31",
    "R_CUDA_2_47",
    "R_CUDA_TEX_BINDLESSOFF13_41",
    "R_CUDA_TEX_BINDLESSOFF13_45",
    "R_CUDA_FUNC_DESC32_23",
    "R_CUDA_FUNC_DESC32_LO_23",
    "R_CUDA_FUNC_DESC32_HI_23",
    "R_CUDA_FUNC_DESC_32",
    "R_CUDA_FUNC_DESC_64",
    "R_CUDA_CONST_FIELD21_26",
    "R_CUDA_QUERY_DESC21_37",
    "R_CUDA_CONST_FIELD19_26",
    "R_CUDA_CONST_FIELD21_23",
    "R_CUDA_PCREL_IMM24_26",
    "R_CUDA_PCREL_IMM24_23",
    "R_CUDA_ABS32_20",
    "R_CUDA_ABS32_LO_20",
    "R_CUDA_ABS32_HI_20",
    "R_CUDA_ABS24_20",
    "R_CUDA_ABS16_20",
    "R_CUDA_FUNC_DESC32_20",
    "R_CUDA_FUNC_DESC32_LO_20",
    "R_CUDA_FUNC_DESC32_HI_20",
    "R_CUDA_CONST_FIELD19_20",
    "R_CUDA_BINDLESSOFF13_36",
    "R_CUDA_SURF_HEADER_INDEX",
    "R_CUDA_INSTRUCTION64",
    "R_CUDA_CONST_FIELD21_20",
    "R_CUDA_ABS32_32",
    "R_CUDA_ABS32_LO_32",
    "R_CUDA_ABS32_HI_32",
    "R_CUDA_ABS47_34",
    "R_CUDA_ABS16_32",
    "R_CUDA_ABS24_32",
    "R_CUDA_FUNC_DESC32_32",
    "R_CUDA_FUNC_DESC32_LO_32",
    "R_CUDA_FUNC_DESC32_HI_32",
    "R_CUDA_CONST_FIELD19_40",
    "R_CUDA_BINDLESSOFF14_40",
    "R_CUDA_CONST_FIELD21_38",
    "R_CUDA_INSTRUCTION128",
    "R_CUDA_YIELD_OPCODE9_0",
    "R_CUDA_YIELD_CLEAR_PRED4_87",
    "R_CUDA_32_LO",
    "R_CUDA_32_HI",
    "R_CUDA_UNUSED_CLEAR32",
    "R_CUDA_UNUSED_CLEAR64",
    "R_CUDA_ABS24_40",
    "R_CUDA_ABS55_16_34",
    "R_CUDA_8_0",
    "R_CUDA_8_8",
    "R_CUDA_8_16",
    "R_CUDA_8_24",
    "R_CUDA_8_32",
    "R_CUDA_8_40",
    "R_CUDA_8_48",
    "R_CUDA_8_56",
    "R_CUDA_G8_0",
    "R_CUDA_G8_8",
    "R_CUDA_G8_16",
    "R_CUDA_G8_24",
    "R_CUDA_G8_32",
    "R_CUDA_G8_40",
    "R_CUDA_G8_48",
    "R_CUDA_G8_56",
    "R_CUDA_FUNC_DESC_8_0",
    "R_CUDA_FUNC_DESC_8_8",
    "R_CUDA_FUNC_DESC_8_16",
    "R_CUDA_FUNC_DESC_8_24",
    "R_CUDA_FUNC_DESC_8_32",
    "R_CUDA_FUNC_DESC_8_40",
    "R_CUDA_FUNC_DESC_8_48",
    "R_CUDA_FUNC_DESC_8_56",
    "R_CUDA_ABS20_44",
    "R_CUDA_SAMP_HEADER_INDEX_0",
    "R_CUDA_UNIFIED",
    "R_CUDA_UNIFIED_32",
    "R_CUDA_UNIFIED_8_0",
    "R_CUDA_UNIFIED_8_8",
    "R_CUDA_UNIFIED_8_16",
    "R_CUDA_UNIFIED_8_24",
    "R_CUDA_UNIFIED_8_32",
    "R_CUDA_UNIFIED_8_40",
    "R_CUDA_UNIFIED_8_48",
    "R_CUDA_UNIFIED_8_56",
    "R_CUDA_UNIFIED32_LO_32",
    "R_CUDA_UNIFIED32_HI_32",
    "R_CUDA_ABS56_16_34",
    "R_CUDA_CONST_FIELD22_37",
];

impl RelocType {
    /// `R_CUDA_32`: the address's low 32 bits as a word; applied only where the address
    /// fits 32 bits.
    pub const R_CUDA_32: RelocType = RelocType(1);
    /// `R_CUDA_64`: the address as a 64-bit word (bank 4's slots for `__device__` data).
    pub const R_CUDA_64: RelocType = RelocType(2);
    /// `R_CUDA_ABS32_LO_32`: the address's low 32 bits into an instruction's immediate.
    pub const R_CUDA_ABS32_LO_32: RelocType = RelocType(0x38);
    /// `R_CUDA_ABS32_HI_32`: the address's high 32 bits into an instruction's immediate.
    pub const R_CUDA_ABS32_HI_32: RelocType = RelocType(0x39);

    /// Its `R_CUDA_*` name, if known.
    pub fn name(self) -> Option<&'static str> {
        usize::try_from(self.0)
            .ok()
            .and_then(|i| NAMES.get(i))
            .copied()
    }

    /// Where it writes, relative to `r_offset`: (start, length), or `None` for a type rig
    /// does not apply.
    pub fn field(self) -> Option<(u64, u64)> {
        match self {
            Self::R_CUDA_32 => Some((0, 4)),
            Self::R_CUDA_64 => Some((0, 8)),
            Self::R_CUDA_ABS32_LO_32 | Self::R_CUDA_ABS32_HI_32 => Some((4, 4)),
            _ => None,
        }
    }
}

impl std::fmt::Display for RelocType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({:#x})", self.0),
            None => write!(f, "relocation type {:#x}", self.0),
        }
    }
}

/// A relocation value that does not fit its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelocError {
    /// `R_CUDA_32` of an address at or above 4 GiB.
    #[error("{kind} needs a value below 4 GiB; the address is {value:#x}")]
    Value {
        /// The type.
        kind: RelocType,
        /// The value.
        value: u64,
    },
    /// A type rig does not apply (the module refuses those first).
    #[error("{kind} is not applied by rig")]
    Unsupported {
        /// The type.
        kind: RelocType,
    },
    /// The field lies outside the section (the module checks this first).
    #[error("{kind} at offset {offset:#x} writes past the end of its section")]
    Range {
        /// The type.
        kind: RelocType,
        /// `r_offset`.
        offset: u64,
    },
}

/// Writes `value` for relocation `kind` at `offset` of `section`.
///
/// # Errors
/// [`RelocError::Value`] for an `R_CUDA_32` value that does not fit 32 bits;
/// [`RelocError::Unsupported`] and [`RelocError::Range`] for what `module` refuses first.
pub fn apply(
    kind: RelocType,
    section: &mut [u8],
    offset: u64,
    value: u64,
) -> Result<(), RelocError> {
    let (start, len) = kind.field().ok_or(RelocError::Unsupported { kind })?;
    let bytes = match kind {
        RelocType::R_CUDA_64 => value.to_le_bytes().to_vec(),
        RelocType::R_CUDA_32 => u32::try_from(value)
            .map_err(|_| RelocError::Value { kind, value })?
            .to_le_bytes()
            .to_vec(),
        RelocType::R_CUDA_ABS32_HI_32 => u32::try_from(value >> 32)
            .expect("the upper half of a u64 fits 32 bits")
            .to_le_bytes()
            .to_vec(),
        _ => u32::try_from(value & 0xffff_ffff)
            .expect("masked to 32 bits")
            .to_le_bytes()
            .to_vec(),
    };
    let range = offset
        .checked_add(start)
        .and_then(|a| Some(a..a.checked_add(len)?))
        .and_then(|r| Some(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?))
        .ok_or(RelocError::Range { kind, offset })?;
    section
        .get_mut(range)
        .ok_or(RelocError::Range { kind, offset })?
        .copy_from_slice(&bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_applied_type_writes_its_field() {
        let mut s = [0u8; 16];
        apply(RelocType::R_CUDA_64, &mut s, 8, 0x1122_3344_5566_7788).expect("fits");
        assert_eq!(&s[8..], &0x1122_3344_5566_7788u64.to_le_bytes());
        let mut s = [0u8; 16];
        apply(RelocType::R_CUDA_ABS32_LO_32, &mut s, 0, 0x1_2345_6789).expect("fits");
        assert_eq!(&s[..8], &[0, 0, 0, 0, 0x89, 0x67, 0x45, 0x23]);
        apply(RelocType::R_CUDA_ABS32_HI_32, &mut s, 8, 0x1_2345_6789).expect("fits");
        assert_eq!(&s[12..], &[1, 0, 0, 0]);
        let mut s = [0u8; 4];
        apply(RelocType::R_CUDA_32, &mut s, 0, 0xffff_ffff).expect("fits");
        assert_eq!(s, [0xff; 4]);
    }

    #[test]
    fn values_and_ranges_that_do_not_fit_are_refused() {
        let mut s = [0u8; 8];
        let k = RelocType::R_CUDA_32;
        assert_eq!(
            apply(k, &mut s, 0, 1 << 32),
            Err(RelocError::Value {
                kind: k,
                value: 1 << 32
            })
        );
        let k = RelocType::R_CUDA_64;
        assert_eq!(
            apply(k, &mut s, 1, 0),
            Err(RelocError::Range { kind: k, offset: 1 })
        );
        assert_eq!(
            apply(k, &mut s, u64::MAX, 0),
            Err(RelocError::Range {
                kind: k,
                offset: u64::MAX
            })
        );
        let k = RelocType(0x37);
        assert_eq!(
            apply(k, &mut s, 0, 0),
            Err(RelocError::Unsupported { kind: k })
        );
        assert_eq!(s, [0; 8], "nothing written on an error");
    }

    #[test]
    fn names_follow_cuobjdump() {
        assert_eq!(RelocType::R_CUDA_64.to_string(), "R_CUDA_64 (0x2)");
        assert_eq!(RelocType(0x37).name(), Some("R_CUDA_ABS32_32"));
        assert_eq!(RelocType(0x73).name(), Some("R_CUDA_CONST_FIELD22_37"));
        assert_eq!(RelocType(0x74).to_string(), "relocation type 0x74");
    }
}
