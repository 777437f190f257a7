//! rig-firmware: reads GPU firmware files and lays them out for boot.
//!
//! Flow: a file under /lib/firmware → [`Firmware::open`] (the bytes: mapped, read by position,
//! or decompressed) → a format module turns bytes into a typed image ([`gsp`], [`tlv`],
//! [`falcon`], [`amd`]) → [`report`] for `rigctl firmware inspect`, [`plan`] for
//! `rigctl firmware plan`, [`stage`] for the boot layouts the daemon copies into DMA memory.
//!
//! Formats: NVIDIA GSP-RM ELF64 and FMC ELF32 (read by section, never laid out as a loadable
//! image), NVFW TLV, falcon HS and RISC-V ucode binaries; AMD `common_firmware_header` files
//! (PSP SOS v1.0–v2.1 with their descriptors, TA, TOC, ASD, gfx, RLC, SDMA, MES, IMU, SMC, MC,
//! DMCU/DMCUB, VPE, media).
//!
//! Invariants: the crate does no I/O outside `source`, owns no device memory and holds no
//! locks. It reads bytes and nothing else: `#![forbid(unsafe_code)]`, every offset checked
//! before use, every count bounded by the file's length before anything is allocated. A
//! malformed file gives a typed error naming the field and its file offset, never a panic.
//!
//! References: nova-core `firmware/` (GSP, booter, RISC-V, TLV), nouveau r535, amdgpu
//! `amdgpu_ucode.h`/`amdgpu_psp.c`, tinygrad `am`/`nv`. Not here: DMA memory (daemon `dma/`),
//! sysfs (the daemon's `pci/`, or `rigctl`).
#![forbid(unsafe_code)]

pub mod amd;
pub mod chip;
pub mod elf;
pub mod falcon;
pub mod fixture;
pub mod gsp;
pub mod plan;
pub mod report;
pub mod source;
pub mod stage;
pub mod tlv;

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use amd::{AmdError, AmdImage};
pub use chip::{ChipError, IpVersion, NvArch, NvChip, SignatureFamily, signature_family};
pub use elf::{ElfError, ElfIndex};
pub use falcon::{FalconError, FalconImage, FalconKind};
pub use gsp::{FmcImage, GspError, GspImage, GspSignature};
pub use plan::{Plan, PlanError, PlanItem, Target, plan};
pub use report::{CrcStatus, Part, Report, SignatureInfo};
pub use source::{Compression, ReadAt, Source, SourceError, Span};
pub use stage::{PspLayout, Radix3, Radix3Layout, StageError};
pub use tlv::{TlvError, TlvImage};

/// What a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// NVIDIA GSP-RM ELF64 image.
    NvidiaGspElf,
    /// NVIDIA FMC ELF32 image.
    NvidiaFmcElf,
    /// NVIDIA NVFW TLV container.
    NvidiaTlv,
    /// NVIDIA heavy-secured falcon ucode (booter).
    NvidiaFalconHs,
    /// NVIDIA RISC-V ucode (GSP bootloader).
    NvidiaRiscv,
    /// AMD amdgpu firmware with a `common_firmware_header`.
    Amd,
}

/// A parsed image, by format.
#[derive(Clone, Debug)]
pub enum Image {
    /// GSP-RM.
    Gsp(GspImage),
    /// FMC.
    Fmc(FmcImage),
    /// NVFW TLV.
    Tlv(TlvImage),
    /// Falcon HS or RISC-V ucode.
    Falcon(FalconImage),
    /// amdgpu.
    Amd(AmdImage),
}

impl Image {
    /// The image's format.
    pub fn format(&self) -> Format {
        match self {
            Image::Gsp(_) => Format::NvidiaGspElf,
            Image::Fmc(_) => Format::NvidiaFmcElf,
            Image::Tlv(_) => Format::NvidiaTlv,
            Image::Falcon(f) => match f.ucode {
                falcon::Ucode::Hs(_) => Format::NvidiaFalconHs,
                falcon::Ucode::Riscv(_) => Format::NvidiaRiscv,
            },
            Image::Amd(_) => Format::Amd,
        }
    }
}

/// Errors of opening and reading a firmware file.
#[derive(Debug, thiserror::Error)]
pub enum FirmwareError {
    /// The bytes could not be had.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// No known format starts like this.
    #[error("{path}: unrecognised format (first bytes {magic:02x?})")]
    Unrecognised {
        /// The file.
        path: PathBuf,
        /// Its first bytes.
        magic: Vec<u8>,
    },
    /// An ELF file that is not a valid GSP-RM image.
    #[error("{path} is not a valid GSP-RM image")]
    Gsp {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: GspError,
    },
    /// An ELF32 file that is not a valid FMC image.
    #[error("{path} is not a valid FMC image")]
    Fmc {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: GspError,
    },
    /// An invalid NVFW TLV container.
    #[error("{path} is not a valid NVFW TLV container")]
    Tlv {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: TlvError,
    },
    /// An invalid falcon/RISC-V binary.
    #[error("{path} is not a valid falcon/RISC-V ucode binary")]
    Falcon {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: FalconError,
    },
    /// An invalid amdgpu file.
    #[error("{path} is not a valid amdgpu firmware file")]
    Amd {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: AmdError,
    },
    /// An operation needs another format.
    #[error("{path} is {found:?}; this needs {expected}")]
    WrongFormat {
        /// The file.
        path: PathBuf,
        /// What it is.
        found: Format,
        /// What was needed.
        expected: &'static str,
    },
    /// A GSP-RM image has no signature for the chip.
    #[error("{path} has no .fwsignature_{family} section for {chip}")]
    NoSignature {
        /// The file.
        path: PathBuf,
        /// The chip.
        chip: NvChip,
        /// The family looked for.
        family: &'static str,
    },
    /// A boot layout could not be built.
    #[error("cannot stage {path}")]
    Stage {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: StageError,
    },
}

/// One firmware file: its bytes and what they mean.
#[derive(Debug)]
pub struct Firmware {
    path: PathBuf,
    source: Source,
    compression: Compression,
    file_size: u64,
    image: Image,
}

impl Firmware {
    /// Opens and parses `path`. Plain files are read in place (mapped when memmap2 can prove
    /// them immutable, otherwise by positional reads of just the headers); `.zst`/`.xz` files
    /// are decompressed into an owned buffer, since compressed bytes cannot be read in place.
    ///
    /// # Errors
    /// [`FirmwareError::Source`] when the file cannot be read, [`FirmwareError::Unrecognised`]
    /// for an unknown format, or the format's error naming field and offset.
    pub fn open(path: impl AsRef<Path>) -> Result<Firmware, FirmwareError> {
        let path = path.as_ref();
        let opened = Source::open(path)?;
        Firmware::from_source(path, opened.source, opened.compression, opened.file_size)
    }

    /// Parses bytes already in memory; `name` picks the AMD block and falcon kind.
    ///
    /// # Errors
    /// As [`Firmware::open`].
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>) -> Result<Firmware, FirmwareError> {
        let size = bytes.len() as u64;
        Firmware::from_source(
            &name.into(),
            Source::from_bytes(bytes),
            Compression::None,
            size,
        )
    }

    /// Parses a map the caller made (see [`Source::from_mmap`]).
    ///
    /// # Errors
    /// As [`Firmware::open`].
    pub fn from_mmap(
        name: impl Into<PathBuf>,
        map: memmap2::Mmap,
    ) -> Result<Firmware, FirmwareError> {
        let size = map.len() as u64;
        Firmware::from_source(
            &name.into(),
            Source::from_mmap(map),
            Compression::None,
            size,
        )
    }

    /// Parses a [`Source`].
    ///
    /// # Errors
    /// As [`Firmware::open`].
    pub fn from_source(
        path: &Path,
        source: Source,
        compression: Compression,
        file_size: u64,
    ) -> Result<Firmware, FirmwareError> {
        let image = parse_image(path, &source)?;
        Ok(Firmware {
            path: path.to_path_buf(),
            source,
            compression,
            file_size,
            image,
        })
    }

    /// The path (or name) it was opened as.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The parsed image.
    pub fn image(&self) -> &Image {
        &self.image
    }

    /// The bytes.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// How the file was stored.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Its size on disk.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// Its format.
    pub fn format(&self) -> Format {
        self.image.format()
    }

    /// The version the file states, if it states one.
    pub fn version(&self) -> Option<String> {
        match &self.image {
            Image::Gsp(g) => g.version.clone(),
            Image::Tlv(t) => Some(t.version.clone()),
            Image::Falcon(f) => match &f.ucode {
                falcon::Ucode::Riscv(r) if r.app_version != 0 => Some(r.app_version.to_string()),
                _ => None,
            },
            Image::Amd(a) => Some(format!("{:#010x}", a.header.ucode_version)),
            Image::Fmc(_) => None,
        }
    }

    /// The GSP-RM signature section `chip` takes, if this is a GSP-RM image that has it.
    pub fn signature_for(&self, chip: NvChip) -> Option<&GspSignature> {
        let Image::Gsp(g) = &self.image else {
            return None;
        };
        chip.signature_family()
            .suffixes()
            .iter()
            .find_map(|s| g.signature(s))
    }

    /// The bytes of `span`.
    ///
    /// # Errors
    /// [`FirmwareError::Source`].
    pub fn read(&self, span: Span) -> Result<Cow<'_, [u8]>, FirmwareError> {
        Ok(self.source.read_span(span)?)
    }

    /// SHA-256 of `span`.
    ///
    /// # Errors
    /// [`FirmwareError::Source`].
    pub fn sha256(&self, span: Span) -> Result<[u8; 32], FirmwareError> {
        let mut h = Sha256::new();
        self.source.for_each_chunk(span, &mut |c| h.update(c))?;
        Ok(h.finalize().into())
    }

    /// For amdgpu files: the stored `crc32` against a CRC-32 of the payload.
    ///
    /// # Errors
    /// [`FirmwareError::Source`].
    pub fn crc(&self) -> Result<Option<CrcStatus>, FirmwareError> {
        let Image::Amd(a) = &self.image else {
            return Ok(None);
        };
        let mut h = crc32fast::Hasher::new();
        self.source
            .for_each_chunk(a.payload, &mut |c| h.update(c))?;
        let computed = h.finalize();
        Ok(Some(CrcStatus {
            stored: a.header.crc32,
            computed,
            matches: computed == a.header.crc32,
        }))
    }

    /// Copies `.fwimage` once into `buf` and builds its radix3 table (see [`stage`]).
    ///
    /// # Errors
    /// [`FirmwareError::WrongFormat`] unless GSP-RM, [`FirmwareError::Stage`].
    pub fn stage_gsp(&self, buf: &mut [u8], pages: &[u64]) -> Result<Radix3, FirmwareError> {
        let Image::Gsp(g) = &self.image else {
            return Err(self.wrong("a GSP-RM image"));
        };
        stage::radix3_from(&self.source, g.image, buf, pages).map_err(|source| {
            FirmwareError::Stage {
                path: self.path.clone(),
                source,
            }
        })
    }

    /// The PSP bootloader staging layout of an SOS file (see [`stage::psp_layout`]).
    ///
    /// # Errors
    /// [`FirmwareError::WrongFormat`] unless an amdgpu SOS file, [`FirmwareError::Stage`].
    pub fn psp_layout(&self, mp0_major: Option<u16>) -> Result<PspLayout, FirmwareError> {
        let Image::Amd(a) = &self.image else {
            return Err(self.wrong("an amdgpu PSP SOS file"));
        };
        stage::psp_layout(a, mp0_major).map_err(|source| FirmwareError::Stage {
            path: self.path.clone(),
            source,
        })
    }

    /// The inspection report: format, version, parts with SHA-256, signatures, CRC.
    ///
    /// # Errors
    /// [`FirmwareError::Source`] when hashing reads fail.
    pub fn report(&self) -> Result<Report, FirmwareError> {
        report::build(self)
    }

    fn wrong(&self, expected: &'static str) -> FirmwareError {
        FirmwareError::WrongFormat {
            path: self.path.clone(),
            found: self.format(),
            expected,
        }
    }
}

/// Recognises the format of `src` (by magic, then by name for amdgpu) and parses it.
///
/// # Errors
/// As [`Firmware::open`].
pub fn parse_image<S: ReadAt + ?Sized>(path: &Path, src: &S) -> Result<Image, FirmwareError> {
    let len = src.len();
    let head = src.read_span(Span::checked(0, len.min(8), len).unwrap_or_default())?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let p = || path.to_path_buf();
    if head.starts_with(b"\x7fELF") {
        let index = elf::parse(src).map_err(|e| FirmwareError::Gsp {
            path: p(),
            source: GspError::Elf(e),
        })?;
        return match index.class {
            elf::ElfClass::Elf64 => GspImage::from_index(src, index)
                .map(Image::Gsp)
                .map_err(|source| FirmwareError::Gsp { path: p(), source }),
            elf::ElfClass::Elf32 => FmcImage::from_index(index)
                .map(Image::Fmc)
                .map_err(|source| FirmwareError::Fmc { path: p(), source }),
        };
    }
    if head.starts_with(tlv::MAGIC) {
        return TlvImage::parse(src)
            .map(Image::Tlv)
            .map_err(|source| FirmwareError::Tlv { path: p(), source });
    }
    let block = amd::Block::from_name(&name);
    let first = head
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    // A 0x10de-byte amdgpu file would start with 0x10de too: a known amdgpu name decides.
    if first == Some(falcon::BIN_MAGIC)
        && (block == amd::Block::Unknown || len != u64::from(falcon::BIN_MAGIC))
    {
        return FalconImage::parse(src, FalconKind::from_name(&name))
            .map(Image::Falcon)
            .map_err(|source| FirmwareError::Falcon { path: p(), source });
    }
    match AmdImage::parse_block(src, block) {
        Ok(img) => Ok(Image::Amd(img)),
        Err(_) if block == amd::Block::Unknown && amd::common_header(src).is_err() => {
            Err(FirmwareError::Unrecognised {
                path: p(),
                magic: head.to_vec(),
            })
        }
        Err(source) => Err(FirmwareError::Amd { path: p(), source }),
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn formats_are_recognised_by_magic_and_name() {
        let cases: Vec<(&str, Vec<u8>, Format)> = vec![
            (
                "gsp-1.bin",
                fixture::gsp_elf(100, "1", &["ga10x"]),
                Format::NvidiaGspElf,
            ),
            ("fmc-1.bin", fixture::fmc_elf(), Format::NvidiaFmcElf),
            ("gsp.tlv", fixture::tlv_signed(), Format::NvidiaTlv),
            (
                "booter_load-1.bin",
                fixture::falcon_hs(1, 16),
                Format::NvidiaFalconHs,
            ),
            (
                "bootloader-1.bin",
                fixture::falcon_riscv(),
                Format::NvidiaRiscv,
            ),
            (
                "psp_13_0_0_sos.bin",
                fixture::amd_psp_v2(&[(1, 16)]),
                Format::Amd,
            ),
        ];
        for (name, bytes, format) in cases {
            let fw = Firmware::from_bytes(name, bytes).unwrap();
            assert_eq!(fw.format(), format, "{name}");
        }
    }

    #[test]
    fn garbage_is_unrecognised_not_a_panic() {
        let err = Firmware::from_bytes("x.bin", b"hello world, not firmware".to_vec()).unwrap_err();
        assert!(matches!(err, FirmwareError::Unrecognised { .. }));
        let err = Firmware::from_bytes("x.bin", Vec::new()).unwrap_err();
        assert!(matches!(err, FirmwareError::Unrecognised { .. }));
    }

    #[test]
    fn signature_for_tries_the_gh10x_alias() {
        let fw = Firmware::from_bytes("g.bin", fixture::gsp_elf(100, "1", &["gh10x"])).unwrap();
        assert_eq!(
            fw.signature_for(NvChip::GH100).map(|s| s.family.as_str()),
            Some("gh10x")
        );
        assert!(fw.signature_for(NvChip::GA102).is_none());
    }

    #[test]
    fn zst_and_xz_files_are_read_transparently() {
        let raw = fixture::gsp_elf(5000, "9.9", &["ad10x"]);
        let dir = tempfile::tempdir().unwrap();
        let zst = dir.path().join("gsp.bin.zst");
        std::fs::write(
            &zst,
            ruzstd::encoding::compress_to_vec(
                &raw[..],
                ruzstd::encoding::CompressionLevel::Fastest,
            ),
        )
        .unwrap();
        let mut xz_bytes = Vec::new();
        lzma_rs::xz_compress(&mut &raw[..], &mut xz_bytes).unwrap();
        let xz = dir.path().join("gsp.bin.xz");
        std::fs::write(&xz, xz_bytes).unwrap();
        for (path, c) in [(zst, Compression::Zstd), (xz, Compression::Xz)] {
            let fw = Firmware::open(&path).unwrap();
            assert_eq!(fw.compression(), c);
            assert_eq!(fw.version().as_deref(), Some("9.9"));
            assert_eq!(fw.source().kind(), "owned");
        }
    }

    #[test]
    fn amd_crc_status_is_reported_not_enforced() {
        let mut bytes = fixture::amd(1, 0, (7, 0), &[], &[1, 2, 3, 4]);
        let fw = Firmware::from_bytes("x_uvd.bin", bytes.clone()).unwrap();
        assert!(fw.crc().unwrap().unwrap().matches);
        bytes[28] ^= 1;
        let fw = Firmware::from_bytes("x_uvd.bin", bytes).unwrap();
        let crc = fw.crc().unwrap().unwrap();
        assert!(!crc.matches);
        assert_eq!(crc.stored ^ 1, crc.computed);
    }
}
