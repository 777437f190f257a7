//! NVIDIA GSP-RM and FMC firmware: ELF files read by section name.
//!
//! Flow: [`ElfIndex`] → [`GspImage`] / [`FmcImage`] → `stage::radix3` (the image) and the boot
//! code (signatures). Nothing is laid out as a loadable image: `.fwimage` is the payload, and
//! it is copied once, into the buffer the GSP boots from. Read from the file itself:
//! gsp-570.144.bin is 63.5 MB of 14 sections, all at address 0, so laying it out by
//! program headers would make a 63 MB copy that no boot step reads (the format:
//! docs/firmware.md).
//!
//! GSP-RM (`gsp-<ver>.bin`, `gsp_<tu10x|ga10x>.bin`): ELF64, RISC-V, relocatable, every
//! `sh_addr` 0; `.fwimage` is the only `SHF_ALLOC` section; `.fwversion` (ASCII),
//! `.fwsignature_<family>` per signature family, `.fwlogging` where present.
//! FMC (`fmc-<ver>.bin`, Hopper/Blackwell): ELF32 with `image`, `hash`, `signature`,
//! `publickey`.
//!
//! References: nova-core `firmware/gsp.rs` (section names, chip → signature section),
//! open-gpu-kernel-modules `g_kernel_gsp_nvoc.h` (`.fwlogging`, `.fwsignature_cc_*`),
//! tinygrad `support/nv` (FMC sections). The chip table lives in `chip`.

use crate::elf::{ElfClass, ElfError, ElfIndex, Section};
use crate::source::{ReadAt, SourceError, Span};

/// `EM_RISCV`.
pub const EM_RISCV: u16 = 243;
/// `ET_REL`.
pub const ET_REL: u16 = 1;
/// Prefix of the signature sections.
pub const SIGNATURE_PREFIX: &str = ".fwsignature_";
/// Longest `.fwversion` accepted (the real ones are about 11 bytes).
const MAX_VERSION_LEN: u64 = 64;

/// One `.fwsignature_<family>` section.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GspSignature {
    /// The family suffix, e.g. `ga10x`, `cc_gh100`.
    pub family: String,
    /// The section's name.
    pub section: String,
    /// Its bytes in the file.
    pub span: Span,
}

/// An indexed GSP-RM image.
#[derive(Clone, Debug)]
pub struct GspImage {
    /// The ELF section index it was read from.
    pub index: ElfIndex,
    /// `.fwversion`, trimmed of trailing NULs and newlines.
    pub version: Option<String>,
    /// `.fwimage`: the payload the GSP boots.
    pub image: Span,
    /// Every `.fwsignature_*` section, in file order.
    pub signatures: Vec<GspSignature>,
    /// `.fwlogging`, where present.
    pub logging: Option<Span>,
}

/// An indexed FMC image (Hopper/Blackwell chain of trust).
#[derive(Clone, Debug)]
pub struct FmcImage {
    /// The ELF section index it was read from.
    pub index: ElfIndex,
    /// `image`.
    pub image: Span,
    /// `hash`.
    pub hash: Span,
    /// `signature`.
    pub signature: Span,
    /// `publickey`.
    pub public_key: Span,
}

/// Errors of the GSP-RM and FMC readers.
#[derive(Debug, thiserror::Error)]
pub enum GspError {
    /// The ELF structures are malformed.
    #[error("ELF structures are malformed")]
    Elf(#[from] ElfError),
    /// The ELF class is not the format's.
    #[error("e_ident[EI_CLASS] at offset 0x4 is {found:?}; {format} files are {expected:?}")]
    Class {
        /// Format name.
        format: &'static str,
        /// Expected class.
        expected: ElfClass,
        /// Found class.
        found: ElfClass,
    },
    /// A header field has the wrong value.
    #[error("ELF header field {field} at offset {at:#x} is {value:#x}, expected {expected:#x}")]
    Header {
        /// The field.
        field: &'static str,
        /// Its file offset.
        at: u64,
        /// Its value.
        value: u64,
        /// The value the format has.
        expected: u64,
    },
    /// A required section is missing.
    #[error("no section {name}")]
    Missing {
        /// The section's name.
        name: &'static str,
    },
    /// A section has a non-zero address (every GSP-RM and FMC section is at 0).
    #[error("section {index} ({name}): sh_addr at offset {at:#x} is {value:#x}, expected 0")]
    Address {
        /// Section index.
        index: usize,
        /// Section name.
        name: String,
        /// File offset of `sh_addr`.
        at: u64,
        /// Its value.
        value: u64,
    },
    /// A section other than `.fwimage` is allocated, or `.fwimage` is not.
    #[error("section {index} ({name}): sh_flags at offset {at:#x} is {value:#x}: {reason}")]
    Flags {
        /// Section index.
        index: usize,
        /// Section name.
        name: String,
        /// File offset of `sh_flags`.
        at: u64,
        /// Its value.
        value: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// A section that must hold data is empty or of the wrong type.
    #[error("section {index} ({name}) at offset {at:#x}: {reason}")]
    Section {
        /// Section index.
        index: usize,
        /// Section name.
        name: String,
        /// File offset of its data.
        at: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// Reading section data failed.
    #[error("cannot read section data")]
    Read(#[from] SourceError),
}

/// File offset of a field of section header `s`.
fn shdr_field(index: &ElfIndex, s: &Section, field64: u64, field32: u64) -> u64 {
    let (entsize, field) = match index.class {
        ElfClass::Elf64 => (64u64, field64),
        ElfClass::Elf32 => (40u64, field32),
    };
    index
        .shoff
        .saturating_add((s.index as u64).saturating_mul(entsize))
        .saturating_add(field)
}

fn check_addresses_zero(index: &ElfIndex) -> Result<(), GspError> {
    match index.sections.iter().find(|s| s.addr != 0) {
        Some(s) => Err(GspError::Address {
            index: s.index,
            name: s.name.clone(),
            at: shdr_field(index, s, 16, 12),
            value: s.addr,
        }),
        None => Ok(()),
    }
}

fn required<'a>(index: &'a ElfIndex, name: &'static str) -> Result<&'a Section, GspError> {
    let s = index.section(name).ok_or(GspError::Missing { name })?;
    if s.sh_type != goblin::elf::section_header::SHT_PROGBITS {
        return Err(GspError::Section {
            index: s.index,
            name: s.name.clone(),
            at: s.offset,
            reason: "is not PROGBITS",
        });
    }
    Ok(s)
}

impl GspImage {
    /// Indexes a GSP-RM image: header, sections, `.fwversion`. Reads a few hundred bytes
    /// whatever the file's size.
    ///
    /// # Errors
    /// [`GspError`] naming the field and file offset of the first violation of the format
    /// (see the module docs).
    pub fn parse<S: ReadAt + ?Sized>(src: &S) -> Result<GspImage, GspError> {
        let index = crate::elf::parse(src)?;
        GspImage::from_index(src, index)
    }

    /// Checks an already-built index against the GSP-RM format and reads `.fwversion`.
    ///
    /// # Errors
    /// As [`GspImage::parse`].
    pub fn from_index<S: ReadAt + ?Sized>(src: &S, index: ElfIndex) -> Result<GspImage, GspError> {
        if index.class != ElfClass::Elf64 {
            return Err(GspError::Class {
                format: "GSP-RM",
                expected: ElfClass::Elf64,
                found: index.class,
            });
        }
        if index.machine != EM_RISCV {
            return Err(GspError::Header {
                field: "e_machine",
                at: 0x12,
                value: u64::from(index.machine),
                expected: u64::from(EM_RISCV),
            });
        }
        if index.e_type != ET_REL {
            return Err(GspError::Header {
                field: "e_type",
                at: 0x10,
                value: u64::from(index.e_type),
                expected: u64::from(ET_REL),
            });
        }
        check_addresses_zero(&index)?;
        let image = required(&index, ".fwimage")?;
        if !image.is_alloc() || image.span.is_empty() {
            return Err(GspError::Flags {
                index: image.index,
                name: image.name.clone(),
                at: shdr_field(&index, image, 8, 8),
                value: image.flags,
                reason: "the payload must be an allocated, non-empty section",
            });
        }
        if let Some(other) = index
            .sections
            .iter()
            .find(|s| s.is_alloc() && s.index != image.index)
        {
            return Err(GspError::Flags {
                index: other.index,
                name: other.name.clone(),
                at: shdr_field(&index, other, 8, 8),
                value: other.flags,
                reason: ".fwimage must be the only allocated section",
            });
        }
        let version = match index.section(".fwversion") {
            Some(s) => Some(read_version(src, s)?),
            None => None,
        };
        let signatures = index
            .sections
            .iter()
            .filter_map(|s| {
                s.name
                    .strip_prefix(SIGNATURE_PREFIX)
                    .map(|family| GspSignature {
                        family: family.to_owned(),
                        section: s.name.clone(),
                        span: s.span,
                    })
            })
            .collect();
        let logging = index.section(".fwlogging").map(|s| s.span);
        let image = image.span;
        Ok(GspImage {
            index,
            version,
            image,
            signatures,
            logging,
        })
    }

    /// The signature section of `family` (e.g. `ga10x`), if the image carries one.
    pub fn signature(&self, family: &str) -> Option<&GspSignature> {
        self.signatures.iter().find(|s| s.family == family)
    }
}

fn read_version<S: ReadAt + ?Sized>(src: &S, s: &Section) -> Result<String, GspError> {
    let bad = |reason| GspError::Section {
        index: s.index,
        name: s.name.clone(),
        at: s.offset,
        reason,
    };
    if s.span.size() > MAX_VERSION_LEN {
        return Err(bad("version string is longer than 64 bytes"));
    }
    let bytes = src.read_span(s.span)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("version is not UTF-8"))?;
    let text = text.trim_end_matches(['\0', '\n']);
    if text.is_empty() || !text.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(bad("version is not printable ASCII"));
    }
    Ok(text.to_owned())
}

impl FmcImage {
    /// Indexes an FMC image.
    ///
    /// # Errors
    /// [`GspError`] naming the missing section or the offending field.
    pub fn parse<S: ReadAt + ?Sized>(src: &S) -> Result<FmcImage, GspError> {
        let index = crate::elf::parse(src)?;
        FmcImage::from_index(index)
    }

    /// Checks an already-built index against the FMC format.
    ///
    /// # Errors
    /// As [`FmcImage::parse`].
    pub fn from_index(index: ElfIndex) -> Result<FmcImage, GspError> {
        if index.class != ElfClass::Elf32 {
            return Err(GspError::Class {
                format: "FMC",
                expected: ElfClass::Elf32,
                found: index.class,
            });
        }
        check_addresses_zero(&index)?;
        let image = required(&index, "image")?.span;
        let hash = required(&index, "hash")?.span;
        let signature = required(&index, "signature")?.span;
        let public_key = required(&index, "publickey")?.span;
        Ok(FmcImage {
            index,
            image,
            hash,
            signature,
            public_key,
        })
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;
    use crate::fixture::{self, Class, ElfBuilder};

    #[test]
    fn gsp_fixture_indexes_image_version_and_signatures() {
        let bytes = fixture::gsp_elf(10_000, "535.261.03", &["ga10x", "cc_gh100"]);
        let gsp = GspImage::parse(&bytes[..]).unwrap();
        assert_eq!(gsp.version.as_deref(), Some("535.261.03"));
        assert_eq!(gsp.image.size(), 10_000);
        assert_eq!(gsp.signature("ga10x").map(|s| s.span.size()), Some(16));
        assert!(gsp.signature("cc_gh100").is_some());
        assert!(gsp.signature("tu10x").is_none());
    }

    #[test]
    fn gsp_with_nonzero_address_names_sh_addr() {
        let bytes = ElfBuilder::new(Class::Elf64, EM_RISCV)
            .section(".fwimage", 1, 0x3, b"abcd")
            .section_at(".fwversion", 1, 0, 0x1000, b"1\0")
            .build();
        match GspImage::parse(&bytes[..]) {
            Err(GspError::Address { name, value, .. }) => {
                assert_eq!(name, ".fwversion");
                assert_eq!(value, 0x1000);
            }
            other => panic!("expected Address, got {other:?}"),
        }
    }

    #[test]
    fn gsp_with_second_allocated_section_is_refused() {
        let bytes = ElfBuilder::new(Class::Elf64, EM_RISCV)
            .section(".fwimage", 1, 0x3, b"abcd")
            .section(".data", 1, 0x2, b"x")
            .build();
        assert!(matches!(
            GspImage::parse(&bytes[..]),
            Err(GspError::Flags { .. })
        ));
    }

    #[test]
    fn gsp_of_wrong_machine_names_e_machine() {
        let bytes = ElfBuilder::new(Class::Elf64, 62)
            .section(".fwimage", 1, 0x3, b"abcd")
            .build();
        assert!(matches!(
            GspImage::parse(&bytes[..]),
            Err(GspError::Header {
                field: "e_machine",
                at: 0x12,
                ..
            })
        ));
    }

    #[test]
    fn fmc_fixture_has_four_sections() {
        let bytes = fixture::fmc_elf();
        let fmc = FmcImage::parse(&bytes[..]).unwrap();
        assert_eq!(fmc.image.size(), 256);
        assert_eq!(fmc.hash.size(), 48);
        assert_eq!(fmc.signature.size(), 384);
        assert_eq!(fmc.public_key.size(), 384);
    }

    #[test]
    fn fmc_without_publickey_names_it() {
        let bytes = ElfBuilder::new(Class::Elf32, EM_RISCV)
            .section("image", 1, 0, b"a")
            .section("hash", 1, 0, b"b")
            .section("signature", 1, 0, b"c")
            .build();
        assert!(matches!(
            FmcImage::parse(&bytes[..]),
            Err(GspError::Missing { name: "publickey" })
        ));
    }
}
