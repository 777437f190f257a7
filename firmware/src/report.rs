//! The inspection report `rigctl firmware inspect` prints, as a table or as JSON.
//!
//! Flow: [`Firmware`] → [`build`] → [`Report`] (serde). Field names are snake_case and stable;
//! the schema is documented in docs/firmware.md. Every part carries the SHA-256 of its bytes,
//! so building a report reads the whole file once (the index alone does not).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::falcon::Ucode;
use crate::source::{Compression, Span};
use crate::{Firmware, FirmwareError, Format, Image};

/// A stored CRC against the computed one (amdgpu files).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CrcStatus {
    /// The header's `crc32` field.
    pub stored: u32,
    /// CRC-32 (IEEE) of the payload.
    pub computed: u32,
    /// Whether they are equal (amdgpu never checks; most of Debian's files do not match).
    pub matches: bool,
}

/// One section, block or component of a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Part {
    /// Its name (`.fwimage`, `SOS`, `ucode`, `VERS`, …).
    pub name: String,
    /// `section`, `component`, `aux_component` (PSP auxiliary set), `block`, `payload`,
    /// `segment`, `signatures`.
    pub kind: &'static str,
    /// File offset (of the decompressed data for `.zst`/`.xz`).
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of its bytes, lower-case hex.
    pub sha256: String,
    /// A version, where the format gives one per part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A signature set found in a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SignatureInfo {
    /// The family (`ga10x`, `cc_gh100`) or the kind (`hs`, `tlv`, `fmc`).
    pub family: String,
    /// Where it is (section or block name).
    pub location: String,
    /// File offset.
    pub offset: u64,
    /// Total size.
    pub size: u64,
    /// Number of signatures.
    pub count: u32,
    /// Size of each.
    pub signature_size: u64,
}

/// What `rigctl firmware inspect` reports about one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The path as given.
    pub path: String,
    /// The format.
    pub format: Format,
    /// A one-line description (`GSP-RM ELF64, RISC-V`, `amdgpu psp_v2_0 (psp_sos)`).
    pub description: String,
    /// Size on disk.
    pub file_size: u64,
    /// How it was stored.
    pub compression: Compression,
    /// Size of the (decompressed) data.
    pub data_size: u64,
    /// The version the file states.
    pub version: Option<String>,
    /// Sections, blocks or components, in file/header order.
    pub parts: Vec<Part>,
    /// Signature sets.
    pub signatures: Vec<SignatureInfo>,
    /// amdgpu only: stored against computed CRC-32 of the payload.
    pub crc: Option<CrcStatus>,
    /// Format-specific facts (header fields), as strings.
    pub details: BTreeMap<String, String>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Builder<'a> {
    fw: &'a Firmware,
    parts: Vec<Part>,
}

impl Builder<'_> {
    fn part(
        &mut self,
        name: &str,
        kind: &'static str,
        span: Span,
        version: Option<String>,
    ) -> Result<(), FirmwareError> {
        let sha256 = hex(&self.fw.sha256(span)?);
        self.parts.push(Part {
            name: name.to_owned(),
            kind,
            offset: span.offset(),
            size: span.size(),
            sha256,
            version,
        });
        Ok(())
    }
}

/// Builds the report of `fw`, hashing every part.
///
/// # Errors
/// [`FirmwareError::Source`] when a read fails.
pub fn build(fw: &Firmware) -> Result<Report, FirmwareError> {
    let mut b = Builder {
        fw,
        parts: Vec::new(),
    };
    let mut signatures = Vec::new();
    let mut details = BTreeMap::new();
    let description = match fw.image() {
        Image::Gsp(g) => {
            for s in g.index.sections.iter().filter(|s| s.index != 0) {
                b.part(&s.name, "section", s.span, None)?;
            }
            signatures.extend(g.signatures.iter().map(|s| SignatureInfo {
                family: s.family.clone(),
                location: s.section.clone(),
                offset: s.span.offset(),
                size: s.span.size(),
                count: 1,
                signature_size: s.span.size(),
            }));
            details.insert("image_size".into(), g.image.size().to_string());
            "NVIDIA GSP-RM ELF64, RISC-V, relocatable".to_owned()
        }
        Image::Fmc(f) => {
            for s in f.index.sections.iter().filter(|s| s.index != 0) {
                b.part(&s.name, "section", s.span, None)?;
            }
            signatures.push(SignatureInfo {
                family: "fmc".into(),
                location: "signature".into(),
                offset: f.signature.offset(),
                size: f.signature.size(),
                count: 1,
                signature_size: f.signature.size(),
            });
            details.insert("e_machine".into(), f.index.machine.to_string());
            "NVIDIA FMC ELF32".to_owned()
        }
        Image::Tlv(t) => {
            for blk in &t.blocks {
                b.part(&blk.tag, "block", blk.value, None)?;
            }
            if let Some(s) = t.signatures {
                signatures.push(SignatureInfo {
                    family: "tlv".into(),
                    location: "SIGN".into(),
                    offset: s.span.offset(),
                    size: s.span.size(),
                    count: s.count,
                    signature_size: s.size,
                });
            }
            "NVIDIA NVFW TLV container".to_owned()
        }
        Image::Falcon(f) => {
            details.insert("bin_ver".into(), f.header.version.to_string());
            details.insert(
                "header_offset".into(),
                format!("{:#x}", f.header.header_offset),
            );
            b.part("payload", "payload", f.payload, None)?;
            match &f.ucode {
                Ucode::Hs(hs) => {
                    b.part("os_code", "segment", hs.code, None)?;
                    b.part("os_data", "segment", hs.data, None)?;
                    for (i, app) in hs.apps.iter().enumerate() {
                        b.part(&format!("app{i}"), "segment", *app, None)?;
                    }
                    if hs.signature_count > 0 {
                        b.part("signatures", "signatures", hs.signatures, None)?;
                    }
                    signatures.push(SignatureInfo {
                        family: "hs".into(),
                        location: "sig_prod".into(),
                        offset: hs.signatures.offset(),
                        size: hs.signatures.size(),
                        count: hs.signature_count,
                        signature_size: hs.signature_size,
                    });
                    details.insert("patch_location".into(), format!("{:#x}", hs.patch_location));
                    details.insert("fuse_version".into(), hs.fuse_version.to_string());
                    details.insert("engine_id_mask".into(), format!("{:#x}", hs.engine_id_mask));
                    details.insert("ucode_id".into(), hs.ucode_id.to_string());
                    "NVIDIA falcon heavy-secured ucode (HS header v2)".to_owned()
                }
                Ucode::Riscv(rv) => {
                    for (name, span) in &rv.parts {
                        b.part(name, "segment", *span, None)?;
                    }
                    details.insert("descriptor_version".into(), rv.version.to_string());
                    details.insert("app_version".into(), rv.app_version.to_string());
                    "NVIDIA RISC-V ucode (RM_RISCV_UCODE_DESC)".to_owned()
                }
            }
        }
        Image::Amd(a) => {
            b.part("payload", "payload", a.payload, None)?;
            for c in &a.components {
                b.part(
                    &c.name,
                    "component",
                    c.span,
                    c.version.map(|v| format!("{v:#010x}")),
                )?;
            }
            let h = &a.header;
            details.insert(
                "header_version".into(),
                format!("{}.{}", h.header_version_major, h.header_version_minor),
            );
            details.insert(
                "ip_version".into(),
                format!("{}.{}", h.ip_version_major, h.ip_version_minor),
            );
            details.insert("header_size_bytes".into(), h.header_size_bytes.to_string());
            details.insert(
                "ucode_array_offset_bytes".into(),
                format!("{:#x}", h.ucode_array_offset_bytes),
            );
            details.insert(
                "ucode_size_bytes".into(),
                format!("{:#x}", h.ucode_size_bytes),
            );
            let block = serde_plain_name(a.block);
            details.insert("block".into(), block.clone());
            format!("amdgpu {} ({block})", a.family)
        }
    };
    Ok(Report {
        path: fw.path().display().to_string(),
        format: fw.format(),
        description,
        file_size: fw.file_size(),
        compression: fw.compression(),
        data_size: crate::source::ReadAt::len(fw.source()),
        version: fw.version(),
        parts: b.parts,
        signatures,
        crc: fw.crc()?,
        details,
    })
}

/// The snake_case name serde gives a [`crate::amd::Block`].
fn serde_plain_name(block: crate::amd::Block) -> String {
    let debug = format!("{block:?}");
    let mut out = String::new();
    for (i, ch) in debug.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i != 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;
    use crate::fixture;

    #[test]
    fn gsp_report_hashes_every_section_and_lists_signatures() {
        let fw = Firmware::from_bytes(
            "gsp.bin",
            fixture::gsp_elf(3000, "535.1", &["ga10x", "ad10x"]),
        )
        .unwrap();
        let r = fw.report().unwrap();
        assert_eq!(r.version.as_deref(), Some("535.1"));
        let names: Vec<_> = r.parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                ".fwimage",
                ".fwversion",
                ".fwsignature_ga10x",
                ".fwsignature_ad10x",
                ".shstrtab"
            ]
        );
        assert!(r.parts.iter().all(|p| p.sha256.len() == 64));
        let fams: Vec<_> = r.signatures.iter().map(|s| s.family.as_str()).collect();
        assert_eq!(fams, ["ga10x", "ad10x"]);
        assert_eq!(r.crc, None);
    }

    #[test]
    fn sha256_of_empty_part_is_the_empty_digest() {
        let fw = Firmware::from_bytes("x_uvd.bin", fixture::amd(1, 0, (7, 0), &[], &[])).unwrap();
        let r = fw.report().unwrap();
        assert_eq!(
            r.parts[0].sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn block_names_are_snake_case() {
        assert_eq!(serde_plain_name(crate::amd::Block::PspSos), "psp_sos");
        assert_eq!(serde_plain_name(crate::amd::Block::Gfx), "gfx");
    }
}
