//! NVIDIA falcon and RISC-V ucode binaries: `booter_load`, `booter_unload` (heavy-secured
//! falcon ucode run on SEC2) and `bootloader` (the GSP's RISC-V bootloader), as shipped in
//! `nvidia/<chip>/gsp/`.
//!
//! Layout: a binary header (`nvfw_bin_hdr`: magic 0x10de, header and data offsets and sizes);
//! at `header_offset` either an HS header v2 (signatures, patch location, signature metadata,
//! load header with its apps) or an `RM_RISCV_UCODE_DESC`. Every offset is checked against the
//! file (HS fields are file offsets) or against the data payload (patch location, load header,
//! RISC-V descriptor fields), and errors name the field and where it is stored.
//!
//! Reference: nova-core `firmware.rs` (`BinHdr`), `firmware/booter.rs` (`HsHeaderV2`,
//! `HsLoadHeaderV2`, `HsSignatureParams`, signature selection), `firmware/riscv.rs`
//! (`RmRiscvUCodeDesc`).

use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, Immutable, KnownLayout, Unaligned};

use crate::source::{ReadAt, SourceError, Span};

/// `nvfw_bin_hdr.bin_magic`.
pub const BIN_MAGIC: u32 = 0x10de;

#[derive(FromBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawBinHdr {
    bin_magic: U32,
    bin_ver: U32,
    bin_size: U32,
    header_offset: U32,
    data_offset: U32,
    data_size: U32,
}

#[derive(FromBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawHsHeaderV2 {
    sig_prod_offset: U32,
    sig_prod_size: U32,
    patch_loc_offset: U32,
    patch_sig_offset: U32,
    meta_data_offset: U32,
    meta_data_size: U32,
    num_sig_offset: U32,
    header_offset: U32,
    header_size: U32,
}

#[derive(FromBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawHsLoadHeaderV2 {
    os_code_offset: U32,
    os_code_size: U32,
    os_data_offset: U32,
    os_data_size: U32,
    num_apps: U32,
}

#[derive(FromBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawApp {
    offset: U32,
    len: U32,
}

#[derive(FromBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawSigParams {
    fuse_ver: U32,
    engine_id_mask: U32,
    ucode_id: U32,
}

#[derive(FromBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Debug)]
#[repr(C)]
struct RawRiscvDesc {
    version: U32,
    bootloader_offset: U32,
    bootloader_size: U32,
    bootloader_param_offset: U32,
    bootloader_param_size: U32,
    riscv_elf_offset: U32,
    riscv_elf_size: U32,
    app_version: U32,
    manifest_offset: U32,
    manifest_size: U32,
    monitor_data_offset: U32,
    monitor_data_size: U32,
    monitor_code_offset: U32,
    monitor_code_size: U32,
}

/// The binary header's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BinHeader {
    /// `bin_ver`.
    pub version: u32,
    /// `bin_size` (informational; nova-core ignores it).
    pub bin_size: u32,
    /// `header_offset`.
    pub header_offset: u32,
    /// `data_offset`.
    pub data_offset: u32,
    /// `data_size`.
    pub data_size: u32,
}

/// Which header follows the binary header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FalconKind {
    /// An HS header v2 (`booter_load`, `booter_unload`).
    Hs,
    /// A RISC-V ucode descriptor (`bootloader`).
    Riscv,
    /// Unknown: try HS, then RISC-V.
    Auto,
}

impl FalconKind {
    /// The kind a file name implies (`booter_*` → HS, `bootloader*` → RISC-V).
    pub fn from_name(name: &str) -> FalconKind {
        if name.starts_with("booter") {
            FalconKind::Hs
        } else if name.starts_with("bootloader") || name.starts_with("gen_bootloader") {
            FalconKind::Riscv
        } else {
            FalconKind::Auto
        }
    }
}

/// A heavy-secured falcon ucode.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HsUcode {
    /// All production signatures, back to back (empty when unsigned).
    pub signatures: Span,
    /// Number of signatures (0: unsigned).
    pub signature_count: u32,
    /// Bytes per signature.
    pub signature_size: u64,
    /// Offset in the data payload where the chosen signature is patched.
    pub patch_location: u32,
    /// Fuse version the signatures were made for (signature metadata).
    pub fuse_version: u32,
    /// Engines the ucode may run on.
    pub engine_id_mask: u32,
    /// Ucode id (selects the fuse register).
    pub ucode_id: u32,
    /// OS code segment (file span).
    pub code: Span,
    /// OS data segment (file span).
    pub data: Span,
    /// Each app's code (file spans).
    pub apps: Vec<Span>,
}

impl HsUcode {
    /// The signature for fuse version `fuse` read from the GPU: 0 selects the last one,
    /// otherwise index `fuse_version - fuse` (nova-core `booter.rs`).
    pub fn signature_for_fuse(&self, fuse: u32) -> Option<Span> {
        let last = self.signature_count.checked_sub(1)?;
        let idx = if fuse == 0 {
            last
        } else {
            self.fuse_version.checked_sub(fuse)?
        };
        if idx > last {
            return None;
        }
        self.signatures.sub(
            u64::from(idx).checked_mul(self.signature_size)?,
            self.signature_size,
        )
    }
}

/// A RISC-V ucode (the GSP bootloader).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RiscvUcode {
    /// Descriptor version.
    pub version: u32,
    /// Application version.
    pub app_version: u32,
    /// Named parts (file spans): bootloader, bootloader_param, riscv_elf, manifest,
    /// monitor_data, monitor_code; empty parts are left out.
    pub parts: Vec<(String, Span)>,
}

/// What follows the binary header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ucode {
    /// Heavy-secured falcon ucode.
    Hs(HsUcode),
    /// RISC-V ucode.
    Riscv(RiscvUcode),
}

/// A checked falcon/RISC-V binary.
#[derive(Clone, Debug)]
pub struct FalconImage {
    /// The binary header.
    pub header: BinHeader,
    /// The data payload (the ucode image), as a file span.
    pub payload: Span,
    /// The ucode header.
    pub ucode: Ucode,
}

/// Errors of the falcon/RISC-V reader.
#[derive(Debug, thiserror::Error)]
pub enum FalconError {
    /// The magic is not 0x10de.
    #[error("bin_magic at offset 0x0 is {found:#x}, expected 0x10de")]
    Magic {
        /// The value found.
        found: u32,
    },
    /// A structure named by a field does not fit in the file.
    #[error(
        "{field} at offset {at:#x} places {size:#x} bytes at {offset:#x}, outside the {within} ({len:#x} bytes)"
    )]
    OutOfBounds {
        /// The field.
        field: &'static str,
        /// File offset of the field.
        at: u64,
        /// Start of the range.
        offset: u64,
        /// Size of the range.
        size: u64,
        /// `file` or `data payload`.
        within: &'static str,
        /// Length of what it must fit in.
        len: u64,
    },
    /// A field holds a value the format does not allow.
    #[error("{field} at offset {at:#x} is {value:#x}: {reason}")]
    Field {
        /// The field.
        field: &'static str,
        /// File offset of the field.
        at: u64,
        /// Its value.
        value: u64,
        /// What is wrong.
        reason: &'static str,
    },
    /// Neither an HS header nor a RISC-V descriptor fits (kind unknown).
    #[error(
        "the header at offset {at:#x} is neither an HS header ({hs}) nor a RISC-V descriptor ({riscv})"
    )]
    Unrecognised {
        /// File offset of the header.
        at: u64,
        /// Why the HS reading failed.
        hs: Box<FalconError>,
        /// Why the RISC-V reading failed.
        riscv: Box<FalconError>,
    },
    /// Reading failed.
    #[error("cannot read the ucode headers")]
    Read(#[from] SourceError),
}

/// Reads a zerocopy struct at `offset`, naming `field` (stored at `at`) if it does not fit.
fn read_struct<T, S>(src: &S, offset: u64, field: &'static str, at: u64) -> Result<T, FalconError>
where
    T: FromBytes + KnownLayout + Immutable + Copy,
    S: ReadAt + ?Sized,
{
    let size = std::mem::size_of::<T>() as u64;
    let span = Span::checked(offset, size, src.len()).ok_or(FalconError::OutOfBounds {
        field,
        at,
        offset,
        size,
        within: "file",
        len: src.len(),
    })?;
    let bytes = src.read_span(span)?;
    T::read_from_bytes(&bytes).map_err(|_| FalconError::OutOfBounds {
        field,
        at,
        offset,
        size,
        within: "file",
        len: src.len(),
    })
}

fn read_u32<S: ReadAt + ?Sized>(
    src: &S,
    offset: u64,
    field: &'static str,
    at: u64,
) -> Result<u32, FalconError> {
    read_struct::<U32, S>(src, offset, field, at).map(|v| v.get())
}

/// A sub-span of the data payload, naming `field` (stored at `at`) if it does not fit.
fn in_payload(
    payload: Span,
    offset: u32,
    size: u64,
    field: &'static str,
    at: u64,
) -> Result<Span, FalconError> {
    payload
        .sub(u64::from(offset), size)
        .ok_or(FalconError::OutOfBounds {
            field,
            at,
            offset: u64::from(offset),
            size,
            within: "data payload",
            len: payload.size(),
        })
}

impl FalconImage {
    /// Reads the binary header and the ucode header of kind `kind`.
    ///
    /// # Errors
    /// [`FalconError`] naming the field and file offset of the first range out of bounds.
    pub fn parse<S: ReadAt + ?Sized>(
        src: &S,
        kind: FalconKind,
    ) -> Result<FalconImage, FalconError> {
        let raw: RawBinHdr = read_struct(src, 0, "nvfw_bin_hdr", 0)?;
        if raw.bin_magic.get() != BIN_MAGIC {
            return Err(FalconError::Magic {
                found: raw.bin_magic.get(),
            });
        }
        let header = BinHeader {
            version: raw.bin_ver.get(),
            bin_size: raw.bin_size.get(),
            header_offset: raw.header_offset.get(),
            data_offset: raw.data_offset.get(),
            data_size: raw.data_size.get(),
        };
        let payload = Span::checked(
            u64::from(header.data_offset),
            u64::from(header.data_size),
            src.len(),
        )
        .ok_or(FalconError::OutOfBounds {
            field: "data_offset",
            at: 0x10,
            offset: u64::from(header.data_offset),
            size: u64::from(header.data_size),
            within: "file",
            len: src.len(),
        })?;
        let at = u64::from(header.header_offset);
        let ucode = match kind {
            FalconKind::Hs => Ucode::Hs(parse_hs(src, at, payload)?),
            FalconKind::Riscv => Ucode::Riscv(parse_riscv(src, at, payload)?),
            FalconKind::Auto => match parse_hs(src, at, payload) {
                Ok(hs) => Ucode::Hs(hs),
                Err(hs) => match parse_riscv(src, at, payload) {
                    Ok(rv) => Ucode::Riscv(rv),
                    Err(riscv) => {
                        return Err(FalconError::Unrecognised {
                            at,
                            hs: Box::new(hs),
                            riscv: Box::new(riscv),
                        });
                    }
                },
            },
        };
        Ok(FalconImage {
            header,
            payload,
            ucode,
        })
    }
}

fn parse_hs<S: ReadAt + ?Sized>(src: &S, at: u64, payload: Span) -> Result<HsUcode, FalconError> {
    let hs: RawHsHeaderV2 = read_struct(src, at, "header_offset", 0x0c)?;
    let field_at = |i: u64| at.saturating_add(4 * i);
    let num_sig = read_u32(
        src,
        u64::from(hs.num_sig_offset.get()),
        "num_sig_offset",
        field_at(6),
    )?;
    let patch_loc = read_u32(
        src,
        u64::from(hs.patch_loc_offset.get()),
        "patch_loc_offset",
        field_at(2),
    )?;
    let patch_sig = read_u32(
        src,
        u64::from(hs.patch_sig_offset.get()),
        "patch_sig_offset",
        field_at(3),
    )?;
    if hs.meta_data_size.get() as usize != std::mem::size_of::<RawSigParams>() {
        return Err(FalconError::Field {
            field: "meta_data_size",
            at: field_at(5),
            value: u64::from(hs.meta_data_size.get()),
            reason: "signature metadata is 12 bytes (fuse version, engine mask, ucode id)",
        });
    }
    let meta: RawSigParams = read_struct(
        src,
        u64::from(hs.meta_data_offset.get()),
        "meta_data_offset",
        field_at(4),
    )?;
    let sig_total = u64::from(hs.sig_prod_size.get());
    let (signature_size, signatures) = if num_sig == 0 {
        (0, Span::default())
    } else {
        if sig_total == 0 || sig_total % u64::from(num_sig) != 0 {
            return Err(FalconError::Field {
                field: "sig_prod_size",
                at: field_at(1),
                value: sig_total,
                reason: "is not a whole number of signatures",
            });
        }
        let start = u64::from(hs.sig_prod_offset.get()).saturating_add(u64::from(patch_sig));
        let span = Span::checked(start, sig_total, src.len()).ok_or(FalconError::OutOfBounds {
            field: "sig_prod_offset",
            at: field_at(0),
            offset: start,
            size: sig_total,
            within: "file",
            len: src.len(),
        })?;
        let size = sig_total / u64::from(num_sig);
        in_payload(payload, patch_loc, size, "patch_loc_offset", field_at(2))?;
        (size, span)
    };
    let load_at = u64::from(hs.header_offset.get());
    let load: RawHsLoadHeaderV2 = read_struct(src, load_at, "header_offset", field_at(7))?;
    if patch_loc.checked_sub(load.os_data_offset.get()).is_none() && num_sig != 0 {
        return Err(FalconError::Field {
            field: "patch_loc",
            at: u64::from(hs.patch_loc_offset.get()),
            value: u64::from(patch_loc),
            reason: "lies before the OS data segment (os_data_offset)",
        });
    }
    let code = in_payload(
        payload,
        load.os_code_offset.get(),
        u64::from(load.os_code_size.get()),
        "os_code_offset",
        load_at,
    )?;
    let data = in_payload(
        payload,
        load.os_data_offset.get(),
        u64::from(load.os_data_size.get()),
        "os_data_offset",
        load_at.saturating_add(8),
    )?;
    let num_apps = u64::from(load.num_apps.get());
    let apps_at = load_at.saturating_add(std::mem::size_of::<RawHsLoadHeaderV2>() as u64);
    let apps_span = num_apps
        .checked_mul(std::mem::size_of::<RawApp>() as u64)
        .and_then(|size| Span::checked(apps_at, size, src.len()))
        .ok_or(FalconError::OutOfBounds {
            field: "num_apps",
            at: load_at.saturating_add(16),
            offset: apps_at,
            size: num_apps.saturating_mul(8),
            within: "file",
            len: src.len(),
        })?;
    // The count is bounded by the file's length (checked just above).
    let raw_apps = src.read_span(apps_span)?;
    let apps = raw_apps
        .chunks_exact(std::mem::size_of::<RawApp>())
        .enumerate()
        .map(|(i, chunk)| {
            let app = RawApp::read_from_bytes(chunk).map_err(|_| FalconError::Field {
                field: "num_apps",
                at: load_at.saturating_add(16),
                value: num_apps,
                reason: "app table is cut short",
            })?;
            in_payload(
                payload,
                app.offset.get(),
                u64::from(app.len.get()),
                "app offset",
                apps_at.saturating_add(8 * i as u64),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(HsUcode {
        signatures,
        signature_count: num_sig,
        signature_size,
        patch_location: patch_loc,
        fuse_version: meta.fuse_ver.get(),
        engine_id_mask: meta.engine_id_mask.get(),
        ucode_id: meta.ucode_id.get(),
        code,
        data,
        apps,
    })
}

fn parse_riscv<S: ReadAt + ?Sized>(
    src: &S,
    at: u64,
    payload: Span,
) -> Result<RiscvUcode, FalconError> {
    let d: RawRiscvDesc = read_struct(src, at, "header_offset", 0x0c)?;
    let version = d.version.get();
    if !(1..=16).contains(&version) {
        return Err(FalconError::Field {
            field: "RM_RISCV_UCODE_DESC.version",
            at,
            value: u64::from(version),
            reason: "is not a known descriptor version",
        });
    }
    let field_at = |i: u64| at.saturating_add(4 * i);
    let parts = [
        ("bootloader", d.bootloader_offset, d.bootloader_size, 1),
        (
            "bootloader_param",
            d.bootloader_param_offset,
            d.bootloader_param_size,
            3,
        ),
        ("riscv_elf", d.riscv_elf_offset, d.riscv_elf_size, 5),
        ("manifest", d.manifest_offset, d.manifest_size, 8),
        (
            "monitor_data",
            d.monitor_data_offset,
            d.monitor_data_size,
            10,
        ),
        (
            "monitor_code",
            d.monitor_code_offset,
            d.monitor_code_size,
            12,
        ),
    ];
    let parts = parts
        .into_iter()
        .filter(|(_, _, size, _)| size.get() != 0)
        .map(|(name, off, size, i)| {
            in_payload(payload, off.get(), u64::from(size.get()), name, field_at(i))
                .map(|span| (name.to_owned(), span))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RiscvUcode {
        version,
        app_version: d.app_version.get(),
        parts,
    })
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;
    use crate::fixture;

    #[test]
    fn hs_fixture_lists_signatures_and_apps() {
        let bytes = fixture::falcon_hs(2, 384);
        let img = FalconImage::parse(&bytes[..], FalconKind::Hs).unwrap();
        let Ucode::Hs(hs) = img.ucode else {
            panic!("not HS")
        };
        assert_eq!((hs.signature_count, hs.signature_size), (2, 384));
        assert_eq!(hs.apps.len(), 1);
        // fuse 0 selects the last signature; fuse_version 1 - fuse 1 selects the first.
        assert_eq!(hs.signature_for_fuse(0), hs.signatures.sub(384, 384));
        assert_eq!(hs.signature_for_fuse(1), hs.signatures.sub(0, 384));
        assert_eq!(hs.signature_for_fuse(2), None);
    }

    #[test]
    fn riscv_fixture_lists_parts() {
        let bytes = fixture::falcon_riscv();
        let img = FalconImage::parse(&bytes[..], FalconKind::Auto).unwrap();
        let Ucode::Riscv(rv) = img.ucode else {
            panic!("not RISC-V")
        };
        assert_eq!(rv.version, 5);
        let names: Vec<_> = rv.parts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "bootloader",
                "bootloader_param",
                "manifest",
                "monitor_data",
                "monitor_code"
            ]
        );
    }

    #[test]
    fn data_past_end_names_data_offset() {
        let mut bytes = fixture::falcon_riscv();
        bytes[0x14..0x18].copy_from_slice(&0x10_0000u32.to_le_bytes());
        assert!(matches!(
            FalconImage::parse(&bytes[..], FalconKind::Riscv),
            Err(FalconError::OutOfBounds {
                field: "data_offset",
                at: 0x10,
                ..
            })
        ));
    }

    #[test]
    fn huge_app_count_is_refused_before_allocating() {
        let mut bytes = fixture::falcon_hs(1, 16);
        let load_at = 0x18 + 36;
        bytes[load_at + 16..load_at + 20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            FalconImage::parse(&bytes[..], FalconKind::Hs),
            Err(FalconError::OutOfBounds {
                field: "num_apps",
                ..
            })
        ));
    }

    #[test]
    fn wrong_magic_is_refused() {
        let mut bytes = fixture::falcon_riscv();
        bytes[0] = 0;
        assert!(matches!(
            FalconImage::parse(&bytes[..], FalconKind::Auto),
            Err(FalconError::Magic { .. })
        ));
    }
}
