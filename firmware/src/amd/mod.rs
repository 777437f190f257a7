//! AMD amdgpu firmware files: the `common_firmware_header` and the header families built on
//! it (PSP SOS/TA/TOC/ASD, gfx, RLC, SDMA, MES, IMU, SMC, MC, DMCU/DMCUB, VPE, media).
//!
//! Flow: [`ReadAt`] + file name → [`AmdImage::parse`] → report, plan and `stage::psp_layout`.
//! The header says its version but not what it is for, so the block comes from the file name,
//! as it does in amdgpu (which knows what it asked for): `psp_13_0_0_sos.bin` is a PSP SOS,
//! `navi10_rlc.bin` an RLC image. Files whose name is unknown still get their common header
//! and payload checked.
//!
//! Checked: `size_bytes` equals the file length (amdgpu's only check), the payload
//! (`ucode_array_offset_bytes` + `ucode_size_bytes`) and every component's offset and size lie
//! inside the file, descriptor counts are bounded before anything is allocated. Not checked
//! here: the `crc32` field, which amdgpu ignores and which most of Debian's files do not match;
//! the report computes and shows it (`Firmware::crc`).
//!
//! Reference: `drivers/gpu/drm/amd/amdgpu/amdgpu_ucode.h` (struct layouts), `amdgpu_psp.c`
//! (offsets of PSP and TA descriptors are relative to the ucode array), tinygrad `am`.

mod layouts;

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, KnownLayout, Unaligned};

use crate::source::{ReadAt, SourceError, Span};

pub use layouts::{PspFwType, TaFwType};

/// Size of `common_firmware_header`.
pub const COMMON_HEADER_SIZE: u64 = 32;
/// amdgpu's bound on packed PSP/TA descriptors (`UCODE_MAX_PSP_PACKAGING`): a count must be
/// below it. It was 13 (what fits in a 0x100-byte header) and was doubled when PSP v2.1 added
/// auxiliary descriptors; Debian's `psp_13_0_6_sos.bin` has 16.
pub const MAX_PSP_PACKAGING: u32 = 26;

#[derive(FromBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawCommonHeader {
    size_bytes: U32,
    header_size_bytes: U32,
    header_version_major: U16,
    header_version_minor: U16,
    ip_version_major: U16,
    ip_version_minor: U16,
    ucode_version: U32,
    ucode_size_bytes: U32,
    ucode_array_offset_bytes: U32,
    crc32: U32,
}

/// `common_firmware_header`, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CommonHeader {
    /// Size of header and images.
    pub size_bytes: u32,
    /// Size of the header.
    pub header_size_bytes: u32,
    /// Header version, major.
    pub header_version_major: u16,
    /// Header version, minor.
    pub header_version_minor: u16,
    /// IP version, major.
    pub ip_version_major: u16,
    /// IP version, minor.
    pub ip_version_minor: u16,
    /// Ucode version.
    pub ucode_version: u32,
    /// Payload size.
    pub ucode_size_bytes: u32,
    /// Payload offset from the start of the file.
    pub ucode_array_offset_bytes: u32,
    /// The stored CRC-32 (not checked by amdgpu).
    pub crc32: u32,
}

/// What a file is for, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Block {
    /// PSP secure OS and bootloader components (`*_sos.bin`).
    PspSos,
    /// PSP trusted applications (`*_ta.bin`).
    PspTa,
    /// PSP table of contents (`psp_*_toc.bin`, `*_toc.bin` of APUs).
    PspToc,
    /// PSP AMD secure driver (`*_asd.bin`).
    PspAsd,
    /// PSP CAP firmware (`*_cap.bin`, SR-IOV).
    PspCap,
    /// RLC autoload table of contents (`gc_*_toc.bin`).
    RlcToc,
    /// Command processor: PFP, ME, CE, MEC, MEC2 (and `_wks`, `sjt_mec` variants).
    Gfx,
    /// RLC.
    Rlc,
    /// SDMA.
    Sdma,
    /// VPE.
    Vpe,
    /// MES.
    Mes,
    /// UMSCH_MM (multimedia scheduler).
    Umsch,
    /// IMU.
    Imu,
    /// SMC/SMU.
    Smc,
    /// Memory controller.
    Mc,
    /// DMCU.
    Dmcu,
    /// DMCUB (display microcontroller).
    Dmcub,
    /// GPU info table.
    GpuInfo,
    /// UVD, VCE, VCN, JPEG, ISP: a single payload.
    Media,
    /// A name this reader does not know: common header and payload only.
    Unknown,
}

/// IP prefixes of the names amdgpu builds from IP versions (`gc_11_0_0_pfp.bin`).
const IP_PREFIXES: [&str; 10] = [
    "psp", "gc", "sdma", "smu", "vcn", "vpe", "isp", "dcn", "jpeg", "umsch",
];

/// Block suffixes of codename files (`navi10_mec2.bin`), longest first where they overlap.
const SUFFIXES: [(&str, Block); 36] = [
    ("mec2_wks", Block::Gfx),
    ("mec_wks", Block::Gfx),
    ("pfp_wks", Block::Gfx),
    ("me_wks", Block::Gfx),
    ("ce_wks", Block::Gfx),
    ("sjt_mec", Block::Gfx),
    ("rlc_am4", Block::Rlc),
    ("gpu_info", Block::GpuInfo),
    ("smc_sk", Block::Smc),
    ("k_smc", Block::Smc),
    ("uni_mes", Block::Mes),
    ("mes_2", Block::Mes),
    ("mes1", Block::Mes),
    ("mes", Block::Mes),
    ("rlc_1", Block::Rlc),
    ("sdma1", Block::Sdma),
    ("sdma", Block::Sdma),
    ("mec2", Block::Gfx),
    ("mec", Block::Gfx),
    ("pfp", Block::Gfx),
    ("me", Block::Gfx),
    ("ce", Block::Gfx),
    ("rlc", Block::Rlc),
    ("sos", Block::PspSos),
    ("ta", Block::PspTa),
    ("toc", Block::PspToc),
    ("asd", Block::PspAsd),
    ("cap", Block::PspCap),
    ("imu", Block::Imu),
    ("smc", Block::Smc),
    ("mc", Block::Mc),
    ("dmcub", Block::Dmcub),
    ("dmcu", Block::Dmcu),
    ("uvd", Block::Media),
    ("vce", Block::Media),
    ("vcn", Block::Media),
];

/// Strips directories and `.bin`/`.zst`/`.xz` from a file name.
pub fn stem(name: &str) -> &str {
    let base = name.rsplit('/').next().unwrap_or(name);
    let base = base
        .strip_suffix(".zst")
        .or_else(|| base.strip_suffix(".xz"))
        .unwrap_or(base);
    base.strip_suffix(".bin").unwrap_or(base)
}

impl Block {
    /// The block a file name implies (see the module docs).
    pub fn from_name(name: &str) -> Block {
        let stem = stem(name);
        let tokens: Vec<&str> = stem.split('_').collect();
        let numeric = |t: &&str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if let [prefix, rest @ ..] = tokens.as_slice()
            && IP_PREFIXES.contains(prefix)
            && rest.first().is_some_and(numeric)
        {
            {
                let block: Vec<&str> = rest.iter().copied().skip_while(numeric).collect();
                let block = block.join("_");
                return match (*prefix, block.as_str()) {
                    ("gc", "toc") => Block::RlcToc,
                    ("sdma", "") => Block::Sdma,
                    ("smu", "") => Block::Smc,
                    ("vpe", "") => Block::Vpe,
                    ("vcn" | "isp" | "jpeg", "") => Block::Media,
                    (_, b) => Block::from_suffix(b),
                };
            }
        }
        if let ["umsch", "mm", ..] = tokens.as_slice() {
            return Block::Umsch;
        }
        match Block::from_codename(stem) {
            // `polaris10_ce_2.bin`: a second variant of the same block.
            Block::Unknown => stem
                .rsplit_once('_')
                .filter(|(_, n)| n.len() == 1 && n.bytes().all(|b| b.is_ascii_digit()))
                .map_or(Block::Unknown, |(base, _)| Block::from_codename(base)),
            b => b,
        }
    }

    fn from_codename(stem: &str) -> Block {
        SUFFIXES
            .iter()
            .find(|(suffix, _)| {
                stem.len() > suffix.len()
                    && stem.ends_with(suffix)
                    && stem.as_bytes().get(stem.len() - suffix.len() - 1) == Some(&b'_')
            })
            .map_or(Block::Unknown, |(_, b)| *b)
    }

    fn from_suffix(suffix: &str) -> Block {
        SUFFIXES
            .iter()
            .find(|(s, _)| *s == suffix)
            .map_or(Block::Unknown, |(_, b)| *b)
    }
}

/// One component of a file: a payload, a jump table, a PSP driver, a TA, a table.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AmdComponent {
    /// Name (`ucode`, `jump_table`, `SOS`, `KDB`, `ctl_ucode`, …).
    pub name: String,
    /// PSP/TA descriptor type, where the header has one.
    pub fw_type: Option<u32>,
    /// Version, where the header gives one per component.
    pub version: Option<u32>,
    /// An auxiliary variant (PSP v1.3 `*_aux`, PSP v2.1 descriptors from
    /// `psp_aux_fw_bin_index` on), loaded instead of the primary set on some parts.
    pub aux: bool,
    /// The bytes in the file.
    pub span: Span,
}

/// A checked amdgpu firmware file.
#[derive(Clone, Debug)]
pub struct AmdImage {
    /// The block its name implies.
    pub block: Block,
    /// The common header.
    pub header: CommonHeader,
    /// The header family read, e.g. `psp_v2_0`, `rlc_v2_3`, `common`.
    pub family: String,
    /// The payload (`ucode_array_offset_bytes`, `ucode_size_bytes`).
    pub payload: Span,
    /// Components in header order.
    pub components: Vec<AmdComponent>,
}

impl AmdImage {
    /// The primary PSP bootloader components (SOS files only; empty otherwise).
    pub fn psp_components(&self) -> Vec<(PspFwType, &AmdComponent)> {
        if self.block != Block::PspSos {
            return Vec::new();
        }
        self.components
            .iter()
            .filter(|c| !c.aux)
            .filter_map(|c| c.fw_type.map(|t| (PspFwType::from_u32(t), c)))
            .collect()
    }
}

/// Errors of the amdgpu header reader.
#[derive(Debug, thiserror::Error)]
pub enum AmdError {
    /// The file is shorter than the common header.
    #[error("file is {len} bytes, shorter than the 32-byte common_firmware_header")]
    TooShort {
        /// The file's length.
        len: u64,
    },
    /// A header field holds a value that cannot be right.
    #[error("{field} at offset {at:#x} is {value:#x}: {reason}")]
    Field {
        /// The field (`size_bytes`, `psp_fw_bin_count`, …).
        field: &'static str,
        /// Its file offset.
        at: u64,
        /// Its value.
        value: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// The version-specific header runs past the end of the file.
    #[error("a {family} header needs {need} bytes; the file has {len}")]
    Truncated {
        /// The header family.
        family: &'static str,
        /// Bytes needed.
        need: u64,
        /// The file's length.
        len: u64,
    },
    /// A component's range lies outside the file.
    #[error(
        "component {component}: {field} field at offset {at:#x} places {size:#x} bytes at {offset:#x}, past the end of the file ({len:#x})"
    )]
    Component {
        /// The component.
        component: String,
        /// `offset` or `size`: the field whose value takes the range out.
        field: &'static str,
        /// File offset of that field.
        at: u64,
        /// Start of the range (file offset).
        offset: u64,
        /// Size of the range.
        size: u64,
        /// The file's length.
        len: u64,
    },
    /// The header version is not one this reader knows for the block.
    #[error("header version {major}.{minor} (offset 0x8) is not a known {block:?} header")]
    UnsupportedVersion {
        /// The block.
        block: Block,
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// Reading failed.
    #[error("cannot read the header")]
    Read(#[from] SourceError),
}

impl AmdImage {
    /// Reads and checks a file called `name` (the name picks the block).
    ///
    /// # Errors
    /// [`AmdError`] naming the field and offset of the first range out of bounds, or the
    /// unsupported header version.
    pub fn parse<S: ReadAt + ?Sized>(src: &S, name: &str) -> Result<AmdImage, AmdError> {
        AmdImage::parse_block(src, Block::from_name(name))
    }

    /// Reads and checks a file known to be `block`.
    ///
    /// # Errors
    /// As [`AmdImage::parse`].
    pub fn parse_block<S: ReadAt + ?Sized>(src: &S, block: Block) -> Result<AmdImage, AmdError> {
        let header = common_header(src)?;
        let len = src.len();
        let payload = Span::checked(
            u64::from(header.ucode_array_offset_bytes),
            u64::from(header.ucode_size_bytes),
            len,
        )
        .ok_or(AmdError::Component {
            component: "ucode".into(),
            field: "ucode_array_offset_bytes",
            at: 0x18,
            offset: u64::from(header.ucode_array_offset_bytes),
            size: u64::from(header.ucode_size_bytes),
            len,
        })?;
        let (family, components) = layouts::read(src, block, &header, payload)?;
        Ok(AmdImage {
            block,
            header,
            family,
            payload,
            components,
        })
    }
}

/// Reads and checks the common header alone.
///
/// # Errors
/// [`AmdError::TooShort`], or [`AmdError::Field`] for `size_bytes` (must equal the file length,
/// as amdgpu requires) and `header_size_bytes`.
pub fn common_header<S: ReadAt + ?Sized>(src: &S) -> Result<CommonHeader, AmdError> {
    let len = src.len();
    let span = Span::checked(0, COMMON_HEADER_SIZE, len).ok_or(AmdError::TooShort { len })?;
    let bytes = src.read_span(span)?;
    let raw = RawCommonHeader::read_from_bytes(&bytes).map_err(|_| AmdError::TooShort { len })?;
    let h = CommonHeader {
        size_bytes: raw.size_bytes.get(),
        header_size_bytes: raw.header_size_bytes.get(),
        header_version_major: raw.header_version_major.get(),
        header_version_minor: raw.header_version_minor.get(),
        ip_version_major: raw.ip_version_major.get(),
        ip_version_minor: raw.ip_version_minor.get(),
        ucode_version: raw.ucode_version.get(),
        ucode_size_bytes: raw.ucode_size_bytes.get(),
        ucode_array_offset_bytes: raw.ucode_array_offset_bytes.get(),
        crc32: raw.crc32.get(),
    };
    if u64::from(h.size_bytes) != len {
        return Err(AmdError::Field {
            field: "size_bytes",
            at: 0,
            value: u64::from(h.size_bytes),
            reason: "does not equal the file's length",
        });
    }
    if u64::from(h.header_size_bytes) < COMMON_HEADER_SIZE || u64::from(h.header_size_bytes) > len {
        return Err(AmdError::Field {
            field: "header_size_bytes",
            at: 4,
            value: u64::from(h.header_size_bytes),
            reason: "is smaller than the common header or larger than the file",
        });
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;
    use crate::fixture;

    #[test]
    fn names_map_to_blocks() {
        let cases = [
            ("psp_13_0_0_sos.bin", Block::PspSos),
            ("psp_13_0_4_toc.bin", Block::PspToc),
            ("gc_12_0_0_toc.bin", Block::RlcToc),
            ("gc_11_0_0_mes_2.bin", Block::Mes),
            ("gc_12_0_0_uni_mes.bin", Block::Mes),
            ("gc_11_0_0_rlc_1.bin", Block::Rlc),
            ("gc_9_4_3_sjt_mec.bin", Block::Gfx),
            ("sdma_6_0_0.bin", Block::Sdma),
            ("smu_13_0_10.bin", Block::Smc),
            ("vcn_4_0_6_1.bin", Block::Media),
            ("dcn_3_5_dmcub.bin", Block::Dmcub),
            ("navi10_mec2.bin", Block::Gfx),
            ("navi14_mec2_wks.bin", Block::Gfx),
            ("polaris10_smc_sk.bin", Block::Smc),
            ("polaris10_mec2_2.bin", Block::Gfx),
            ("umsch_mm_4_0_0.bin", Block::Umsch),
            ("picasso_rlc_am4.bin", Block::Rlc),
            ("navi10_gpu_info.bin", Block::GpuInfo),
            ("green_sardine_ta.bin", Block::PspTa),
            ("vega10_acg_smc.bin", Block::Smc),
            ("hawaii_k_smc.bin", Block::Smc),
            ("fiji_uvd.bin", Block::Media),
            ("whatever.bin", Block::Unknown),
            ("amdgpu/navi10_sos.bin.zst", Block::PspSos),
        ];
        for (name, block) in cases {
            assert_eq!(Block::from_name(name), block, "{name}");
        }
    }

    #[test]
    fn size_bytes_must_equal_file_length() {
        let mut bytes = fixture::amd(1, 0, (11, 0), &[], &[0; 64]);
        bytes.push(0);
        assert!(matches!(
            common_header(&bytes[..]),
            Err(AmdError::Field {
                field: "size_bytes",
                at: 0,
                ..
            })
        ));
    }

    #[test]
    fn payload_past_end_names_the_array_offset() {
        let mut bytes = fixture::amd(1, 0, (11, 0), &[], &[0; 64]);
        bytes[20..24].copy_from_slice(&0x1000u32.to_le_bytes());
        assert!(matches!(
            AmdImage::parse(&bytes[..], "x_uvd.bin"),
            Err(AmdError::Component {
                field: "ucode_array_offset_bytes",
                at: 0x18,
                ..
            })
        ));
    }

    #[test]
    fn psp_v2_descriptors_become_components_relative_to_the_array() {
        let bytes = fixture::amd_psp_v2(&[(3, 0x40), (2, 0x80), (1, 0x100)]);
        let img = AmdImage::parse(&bytes[..], "psp_13_0_0_sos.bin").unwrap();
        assert_eq!(img.family, "psp_v2_0");
        let names: Vec<_> = img.components.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["KDB", "SYS_DRV", "SOS"]);
        assert_eq!(img.components[1].span.offset(), 0x100 + 0x40);
        assert_eq!(img.psp_components().len(), 3);
    }

    #[test]
    fn psp_v2_count_at_the_limit_is_refused_before_reading_descriptors() {
        let mut bytes = fixture::amd_psp_v2(&[(1, 0x10)]);
        bytes[32..36].copy_from_slice(&MAX_PSP_PACKAGING.to_le_bytes());
        assert!(matches!(
            AmdImage::parse(&bytes[..], "psp_13_0_0_sos.bin"),
            Err(AmdError::Field {
                field: "psp_fw_bin_count",
                at: 32,
                ..
            })
        ));
        // Below the limit, but more descriptors than the header region holds.
        bytes[32..36].copy_from_slice(&(MAX_PSP_PACKAGING - 1).to_le_bytes());
        assert!(matches!(
            AmdImage::parse(&bytes[..], "psp_13_0_0_sos.bin"),
            Err(AmdError::Field {
                field: "psp_fw_bin_count",
                at: 32,
                ..
            })
        ));
    }
}
