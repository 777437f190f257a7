//! The records of `.nv.info` sections (EIATTR attributes): what a kernel needs from the
//! launch, and what rig must refuse because it cannot provide it.
//!
//! Flow: `module` hands each `.nv.info` / `.nv.info.<kernel>` section's bytes to
//! [`records`], then asks each record's [`Policy`]: attributes rig reads, attributes it
//! ignores because they only inform tools, and attributes it refuses (cluster launches,
//! system calls, externs, textures, and every code it does not know).
//!
//! Record format (no public NVIDIA document gives it; as cuobjdump prints the fixtures
//! and as CuAssembler's `CuNVInfo.py` and tinygrad's `_parse_elf_info` read it): a byte
//! of format, a byte of attribute code, then a little-endian u16 that is the value for
//! formats 1–3 (NVAL, BVAL, HVAL) and the payload's length for format 4 (SVAL), whose
//! payload follows. Attribute names: redplait/denvdis (`eiattrs` table), which are the
//! names `cuobjdump -elf` prints; the fixtures' `.elf.txt` views check the decoding.

/// `EIFMT_NVAL`: no value.
pub const EIFMT_NVAL: u8 = 1;
/// `EIFMT_BVAL`: a byte value in the u16.
pub const EIFMT_BVAL: u8 = 2;
/// `EIFMT_HVAL`: a u16 value.
pub const EIFMT_HVAL: u8 = 3;
/// `EIFMT_SVAL`: a payload of the u16's length.
pub const EIFMT_SVAL: u8 = 4;

/// An EIATTR code, named as `cuobjdump -elf` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Eiattr(pub u8);

macro_rules! eiattrs {
    ($($name:ident = $code:literal),* $(,)?) => {
        impl Eiattr {
            $(#[doc = concat!("`EIATTR_", stringify!($name), "`.")]
              pub const $name: Eiattr = Eiattr($code);)*

            /// The name `cuobjdump` prints, if the code is known.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($code => Some(concat!("EIATTR_", stringify!($name))),)*
                    _ => None,
                }
            }
        }
    };
}

eiattrs! {
    PAD = 0x01, IMAGE_SLOT = 0x02, JUMPTABLE_RELOCS = 0x03, CTAIDZ_USED = 0x04,
    MAX_THREADS = 0x05, IMAGE_OFFSET = 0x06, IMAGE_SIZE = 0x07, TEXTURE_NORMALIZED = 0x08,
    SAMPLER_INIT = 0x09, PARAM_CBANK = 0x0a, SMEM_PARAM_OFFSETS = 0x0b,
    CBANK_PARAM_OFFSETS = 0x0c, SYNC_STACK = 0x0d, TEXID_SAMPID_MAP = 0x0e, EXTERNS = 0x0f,
    REQNTID = 0x10, FRAME_SIZE = 0x11, MIN_STACK_SIZE = 0x12, SAMPLER_FORCE_UNNORMALIZED = 0x13,
    BINDLESS_IMAGE_OFFSETS = 0x14, BINDLESS_TEXTURE_BANK = 0x15, BINDLESS_SURFACE_BANK = 0x16,
    KPARAM_INFO = 0x17, SMEM_PARAM_SIZE = 0x18, CBANK_PARAM_SIZE = 0x19, QUERY_NUMATTRIB = 0x1a,
    MAXREG_COUNT = 0x1b, EXIT_INSTR_OFFSETS = 0x1c, S2RCTAID_INSTR_OFFSETS = 0x1d,
    CRS_STACK_SIZE = 0x1e, NEED_CNP_WRAPPER = 0x1f, NEED_CNP_PATCH = 0x20,
    EXPLICIT_CACHING = 0x21, ISTYPEP_USED = 0x22, MAX_STACK_SIZE = 0x23, SUQ_USED = 0x24,
    LD_CACHEMOD_INSTR_OFFSETS = 0x25, LOAD_CACHE_REQUEST = 0x26, ATOM_SYS_INSTR_OFFSETS = 0x27,
    COOP_GROUP_INSTR_OFFSETS = 0x28, COOP_GROUP_MASK_REGIDS = 0x29, SW1850030_WAR = 0x2a,
    WMMA_USED = 0x2b, HAS_PRE_V10_OBJECT = 0x2c, ATOMF16_EMUL_INSTR_OFFSETS = 0x2d,
    ATOM16_EMUL_INSTR_REG_MAP = 0x2e, REGCOUNT = 0x2f, SW2393858_WAR = 0x30,
    INT_WARP_WIDE_INSTR_OFFSETS = 0x31, SHARED_SCRATCH = 0x32, STATISTICS = 0x33,
    INDIRECT_BRANCH_TARGETS = 0x34, SW2861232_WAR = 0x35, SW_WAR = 0x36, CUDA_API_VERSION = 0x37,
    NUM_MBARRIERS = 0x38, MBARRIER_INSTR_OFFSETS = 0x39, COROUTINE_RESUME_ID_OFFSETS = 0x3a,
    SAM_REGION_STACK_SIZE = 0x3b, PER_REG_TARGET_PERF_STATS = 0x3c, CTA_PER_CLUSTER = 0x3d,
    EXPLICIT_CLUSTER = 0x3e, MAX_CLUSTER_RANK = 0x3f, INSTR_REG_MAP = 0x40,
    RESERVED_SMEM_USED = 0x41, RESERVED_SMEM_0_SIZE = 0x42, UCODE_SECTION_DATA = 0x43,
    UNUSED_LOAD_BYTE_OFFSET = 0x44, KPARAM_INFO_V2 = 0x45, SYSCALL_OFFSETS = 0x46,
    SW_WAR_MEMBAR_SYS_INSTR_OFFSETS = 0x47, GRAPHICS_GLOBAL_CBANK = 0x48, SHADER_TYPE = 0x49,
    VRC_CTA_INIT_COUNT = 0x4a, TOOLS_PATCH_FUNC = 0x4b, NUM_BARRIERS = 0x4c,
    TEXMODE_INDEPENDENT = 0x4d, PERF_STATISTICS = 0x4e, AT_ENTRY_FRAGMENTS = 0x4f,
    SPARSE_MMA_MASK = 0x50, TCGEN05_1CTA_USED = 0x51, TCGEN05_2CTA_USED = 0x52,
    GEN_ERRBAR_AT_EXIT = 0x53, REG_RECONFIG = 0x54, ANNOTATIONS = 0x55, SANITIZE = 0x56,
    STACK_CANARY_TRAP_OFFSETS = 0x57, STUB_FUNCTION_KIND = 0x58,
    LOCAL_CTA_ASYNC_STORE_OFFSETS = 0x59, MERCURY_FINALIZER_OPTIONS = 0x5a,
    MERCURY_ISA_VERSION = 0x5f,
}

impl std::fmt::Display for Eiattr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({:#04x})", self.0),
            None => write!(f, "EIATTR {:#04x}", self.0),
        }
    }
}

/// What rig does with an attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// rig reads it (registers, stack, parameters, barriers, thread limits).
    Read,
    /// It informs tools or the compiler only; a launch needs nothing from it.
    Ignore,
    /// A launch of this kernel needs something rig does not do; the reason says what.
    Refuse(&'static str),
}

/// The attributes a launch ignores, each with why. Every code not here and not read is
/// refused, so a new attribute is a typed refusal until someone decides otherwise.
pub const IGNORED: &[(Eiattr, &str)] = &[
    (Eiattr::PAD, "padding"),
    (
        Eiattr::CTAIDZ_USED,
        "says the code reads blockIdx.z; the QMD sets the grid either way",
    ),
    (
        Eiattr::MAXREG_COUNT,
        "the compiler's register cap; EIATTR_REGCOUNT is what the code uses",
    ),
    (
        Eiattr::EXIT_INSTR_OFFSETS,
        "where the EXIT instructions are, for debuggers and profilers",
    ),
    // These three as nvcc 13.0 writes them for warp shuffles, votes, CUB and
    // cooperative groups (docs/hardware/nvidia-compute.md, "Warp-synchronous code"):
    // the offsets name ordinary instructions that run as written, with no launch
    // value in them; a grid sync's one need (its workspace) is the launch's, not theirs.
    (
        Eiattr::INT_WARP_WIDE_INSTR_OFFSETS,
        "where the compiler put warp-wide instructions of its own (VOTEU, MATCH, REDUX, \
         SHFL.IDX), for tools",
    ),
    (
        Eiattr::COOP_GROUP_INSTR_OFFSETS,
        "where the instructions that synchronise threads by a member mask are (SHFL, \
         VOTE, WARPSYNC, REDUX, BAR.SYNC), for tools",
    ),
    (
        Eiattr::COOP_GROUP_MASK_REGIDS,
        "the register holding each of those instructions' member mask (0x05000000 | \
         register, or all ones for an immediate mask), for tools",
    ),
    (
        Eiattr::CUDA_API_VERSION,
        "the CUDA version the code was built for",
    ),
    (
        Eiattr::SPARSE_MMA_MASK,
        "which sparse MMA forms the code uses, for tools",
    ),
    (
        Eiattr::MERCURY_ISA_VERSION,
        "the ISA version the code was built for",
    ),
    // These two as read in NVRTC 13.0's cubins of tinygrad's kernels
    // (docs/hardware/nvidia-compute.md, "`.nv.info` records").
    (
        Eiattr::UNUSED_LOAD_BYTE_OFFSET,
        "vector loads some of whose bytes the code never uses (offset, mask of the bytes \
         used), for tools; each load is aligned to its size, so it reads nothing outside \
         the aligned 16 bytes its used bytes lie in",
    ),
    (
        Eiattr::ANNOTATIONS,
        "instructions marked for tools (SpillRefill: register spills to local memory, \
         which EIATTR_FRAME_SIZE sizes)",
    ),
];

/// Why the refused attributes that rig knows are refused.
const REFUSED: &[(Eiattr, &str)] = &[
    (
        Eiattr::CTA_PER_CLUSTER,
        "the kernel must be launched as thread-block clusters",
    ),
    (
        Eiattr::EXPLICIT_CLUSTER,
        "the kernel must be launched as thread-block clusters",
    ),
    (
        Eiattr::MAX_CLUSTER_RANK,
        "the kernel must be launched as thread-block clusters",
    ),
    (
        Eiattr::SYSCALL_OFFSETS,
        "printf, malloc and assert call into the CUDA runtime",
    ),
    (
        Eiattr::EXTERNS,
        "the code calls functions that are not in the cubin",
    ),
    (
        Eiattr::NEED_CNP_WRAPPER,
        "dynamic parallelism needs the CUDA runtime",
    ),
    (
        Eiattr::NEED_CNP_PATCH,
        "dynamic parallelism needs the CUDA runtime",
    ),
    (
        Eiattr::TEXID_SAMPID_MAP,
        "textures and samplers are not bound by rig",
    ),
    (
        Eiattr::TEXTURE_NORMALIZED,
        "textures and samplers are not bound by rig",
    ),
    (
        Eiattr::SAMPLER_INIT,
        "textures and samplers are not bound by rig",
    ),
    (
        Eiattr::SAMPLER_FORCE_UNNORMALIZED,
        "textures and samplers are not bound by rig",
    ),
    (
        Eiattr::BINDLESS_IMAGE_OFFSETS,
        "textures and surfaces are not bound by rig",
    ),
    (
        Eiattr::BINDLESS_TEXTURE_BANK,
        "textures and surfaces are not bound by rig",
    ),
    (
        Eiattr::BINDLESS_SURFACE_BANK,
        "textures and surfaces are not bound by rig",
    ),
    (
        Eiattr::RESERVED_SMEM_USED,
        "the code uses reserved shared memory rig does not set up",
    ),
    (
        Eiattr::RESERVED_SMEM_0_SIZE,
        "the code uses reserved shared memory rig does not set up",
    ),
    (
        Eiattr::ATOM_SYS_INSTR_OFFSETS,
        "system-scope atomics the driver may patch",
    ),
    (Eiattr::NUM_MBARRIERS, "mbarriers rig has not checked"),
    (
        Eiattr::MBARRIER_INSTR_OFFSETS,
        "mbarriers rig has not checked",
    ),
];

impl Eiattr {
    /// What rig does with this attribute.
    pub fn policy(self) -> Policy {
        const READ: [Eiattr; 13] = [
            Eiattr::REGCOUNT,
            Eiattr::FRAME_SIZE,
            Eiattr::MIN_STACK_SIZE,
            Eiattr::MAX_STACK_SIZE,
            Eiattr::CRS_STACK_SIZE,
            Eiattr::PARAM_CBANK,
            Eiattr::KPARAM_INFO,
            Eiattr::CBANK_PARAM_SIZE,
            Eiattr::NUM_BARRIERS,
            Eiattr::MAX_THREADS,
            Eiattr::REQNTID,
            Eiattr::SW_WAR,
            Eiattr::INDIRECT_BRANCH_TARGETS,
        ];
        if READ.contains(&self) {
            return Policy::Read;
        }
        if IGNORED.iter().any(|(a, _)| *a == self) {
            return Policy::Ignore;
        }
        Policy::Refuse(REFUSED.iter().find(|(a, _)| *a == self).map_or(
            "an attribute rig does not know how to honour",
            |(_, why)| *why,
        ))
    }
}

/// One record of a `.nv.info` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Offset of the record in its section.
    pub at: usize,
    /// `EIFMT_*`.
    pub format: u8,
    /// The attribute.
    pub attribute: Eiattr,
    /// The u16 value of NVAL/BVAL/HVAL records (0 for SVAL).
    pub value: u16,
    /// The payload of SVAL records (empty otherwise).
    pub payload: &'a [u8],
}

/// A `.nv.info` section that cannot be read, or a record of the wrong shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InfoError {
    /// A record's header or payload runs past the section's end.
    #[error("a record at offset {at:#x} runs past the end of the section ({len:#x} bytes)")]
    Truncated {
        /// Offset of the record.
        at: usize,
        /// The section's length.
        len: usize,
    },
    /// A record's format byte is not one of EIFMT_NVAL..EIFMT_SVAL.
    #[error("the record at offset {at:#x} has format {format}, not 1 to 4")]
    Format {
        /// Offset of the record.
        at: usize,
        /// The format byte.
        format: u8,
    },
    /// A record rig reads has another format or payload length than it expects.
    #[error("{attribute} at offset {at:#x} is not {expected}")]
    Shape {
        /// The attribute.
        attribute: Eiattr,
        /// Offset of the record.
        at: usize,
        /// What was expected, e.g. "an SVAL of 8 bytes".
        expected: &'static str,
    },
}

/// Every record of a `.nv.info` section's `bytes`, in order.
///
/// # Errors
/// [`InfoError::Truncated`] or [`InfoError::Format`].
pub fn records(bytes: &[u8]) -> Result<Vec<Record<'_>>, InfoError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let truncated = InfoError::Truncated {
            at,
            len: bytes.len(),
        };
        let body = at.checked_add(4).ok_or(truncated.clone())?;
        let [format, code, v0, v1]: [u8; 4] = bytes
            .get(at..body)
            .and_then(|h| h.try_into().ok())
            .ok_or(truncated.clone())?;
        let attribute = Eiattr(code);
        let value = u16::from_le_bytes([v0, v1]);
        let (value, payload, next) = match format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => (value, &[][..], body),
            EIFMT_SVAL => {
                let end = body
                    .checked_add(usize::from(value))
                    .filter(|&e| e <= bytes.len())
                    .ok_or(truncated)?;
                (0, bytes.get(body..end).unwrap_or_default(), end)
            }
            _ => return Err(InfoError::Format { at, format }),
        };
        out.push(Record {
            at,
            format,
            attribute,
            value,
            payload,
        });
        at = next;
    }
    Ok(out)
}

impl Record<'_> {
    fn shape(&self, expected: &'static str) -> InfoError {
        InfoError::Shape {
            attribute: self.attribute,
            at: self.at,
            expected,
        }
    }

    /// The value of an HVAL (or BVAL) record.
    ///
    /// # Errors
    /// [`InfoError::Shape`] for another format.
    pub fn half(&self) -> Result<u16, InfoError> {
        match self.format {
            EIFMT_HVAL | EIFMT_BVAL => Ok(self.value),
            _ => Err(self.shape("an HVAL or BVAL")),
        }
    }

    /// The payload of an SVAL record as `N` little-endian u32 words.
    ///
    /// # Errors
    /// [`InfoError::Shape`] for another format or payload length.
    pub fn words<const N: usize>(&self, expected: &'static str) -> Result<[u32; N], InfoError> {
        if self.format != EIFMT_SVAL || self.payload.len() != N * 4 {
            return Err(self.shape(expected));
        }
        let mut out = [0u32; N];
        for (w, c) in out.iter_mut().zip(self.payload.chunks_exact(4)) {
            *w = u32::from_le_bytes(c.try_into().map_err(|_| self.shape(expected))?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_every_format_and_stop_at_the_end() {
        let bytes = [
            0x04, 0x2f, 0x08, 0x00, 1, 0, 0, 0, 10, 0, 0, 0, // SVAL REGCOUNT (sym 1, 10)
            0x03, 0x19, 0x20, 0x00, // HVAL CBANK_PARAM_SIZE 0x20
            0x02, 0x4c, 0x01, 0x00, // BVAL NUM_BARRIERS 1
            0x01, 0x3e, 0x00, 0x00, // NVAL EXPLICIT_CLUSTER
        ];
        let r = records(&bytes).expect("well formed");
        assert_eq!(r.len(), 4);
        assert_eq!(r[0].words::<2>("x"), Ok([1, 10]));
        assert_eq!(
            (r[1].attribute, r[1].half()),
            (Eiattr::CBANK_PARAM_SIZE, Ok(0x20))
        );
        assert_eq!((r[2].at, r[2].half()), (16, Ok(1)));
        assert_eq!(r[3].attribute, Eiattr::EXPLICIT_CLUSTER);
        assert_eq!(records(&[]), Ok(Vec::new()));
    }

    #[test]
    fn cut_records_and_unknown_formats_are_errors() {
        assert_eq!(
            records(&[0x04, 0x2f, 0x08, 0x00, 1, 0, 0]),
            Err(InfoError::Truncated { at: 0, len: 7 })
        );
        assert_eq!(
            records(&[0x03, 0x19, 0x20]),
            Err(InfoError::Truncated { at: 0, len: 3 })
        );
        assert_eq!(
            records(&[0x03, 0x19, 0x20, 0x00, 0x05, 0x19, 0, 0]),
            Err(InfoError::Format { at: 4, format: 5 })
        );
    }

    #[test]
    fn a_record_of_the_wrong_shape_names_its_attribute() {
        let bytes = [0x04, 0x2f, 0x04, 0x00, 1, 0, 0, 0];
        let r = records(&bytes).expect("well formed");
        assert_eq!(
            r[0].words::<2>("an SVAL of 8 bytes"),
            Err(InfoError::Shape {
                attribute: Eiattr::REGCOUNT,
                at: 0,
                expected: "an SVAL of 8 bytes"
            })
        );
        assert!(matches!(r[0].half(), Err(InfoError::Shape { .. })));
    }

    #[test]
    fn policy_reads_ignores_or_refuses_every_code() {
        assert_eq!(Eiattr::REGCOUNT.policy(), Policy::Read);
        assert_eq!(Eiattr::EXIT_INSTR_OFFSETS.policy(), Policy::Ignore);
        assert!(
            matches!(Eiattr::CTA_PER_CLUSTER.policy(), Policy::Refuse(r) if r.contains("cluster"))
        );
        assert!(matches!(Eiattr(0xee).policy(), Policy::Refuse(_)));
        assert_eq!(
            Eiattr::SYSCALL_OFFSETS.to_string(),
            "EIATTR_SYSCALL_OFFSETS (0x46)"
        );
        assert_eq!(Eiattr(0xee).to_string(), "EIATTR 0xee");
        for code in 0..=u8::MAX {
            // No code is both ignored and read.
            let a = Eiattr(code);
            let ignored = IGNORED.iter().any(|(i, _)| *i == a);
            assert!(!(ignored && a.policy() == Policy::Read), "{a}");
        }
    }
}
