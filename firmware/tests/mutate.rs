//! Mutation properties: real files (and the synthetic fixtures) truncated, with bytes flipped,
//! or with an offset field pushed past the end give an error, never a panic; whatever still
//! parses only names ranges inside the (mutated) file.
//!
//! Mutations are applied through an overlay [`ReadAt`], so the 24-38 MB GSP-RM images are not
//! copied per case. Real files need `RIG_FIRMWARE_ROOT`; without it only the fixtures run
//! (and CI fails, as in the other real-file tests).
#![expect(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proptest::prelude::*;
use rig_firmware::falcon::Ucode;
use rig_firmware::source::SourceError;
use rig_firmware::{Image, ReadAt, Span, fixture, parse_image};

/// A file and the fields whose values are offsets or sizes: (file offset, width in bytes).
struct Sample {
    name: PathBuf,
    bytes: Vec<u8>,
    fields: Vec<(u64, u8)>,
}

/// The base bytes seen through a truncation and a set of byte patches.
struct Mutated<'a> {
    base: &'a [u8],
    len: u64,
    patches: BTreeMap<u64, u8>,
}

impl ReadAt for Mutated<'_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_span(&self, span: Span) -> Result<Cow<'_, [u8]>, SourceError> {
        let checked =
            Span::checked(span.offset(), span.size(), self.len).ok_or(SourceError::OutOfRange {
                offset: span.offset(),
                len: span.size(),
                data_len: self.len,
            })?;
        let bytes = self.base.read_span(checked)?;
        let patches: Vec<_> = self
            .patches
            .range(checked.offset()..checked.end())
            .collect();
        if patches.is_empty() {
            return Ok(bytes);
        }
        let mut owned = bytes.into_owned();
        for (at, v) in patches {
            owned[(at - checked.offset()) as usize] = *v;
        }
        Ok(Cow::Owned(owned))
    }
}

fn u32_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()))
}

/// The offset and size fields of a file, found from its unmutated parse.
fn fields_of(name: &Path, bytes: &[u8]) -> Vec<(u64, u8)> {
    let image = parse_image(name, bytes).unwrap_or_else(|e| panic!("{}: {e}", name.display()));
    match image {
        Image::Gsp(g) => elf_fields(&g.index, 64),
        Image::Fmc(f) => elf_fields(&f.index, 40),
        Image::Tlv(t) => t.blocks.iter().map(|b| (b.header_offset + 4, 4)).collect(),
        Image::Falcon(f) => {
            let mut v = vec![(0x0c, 4), (0x10, 4), (0x14, 4)];
            let at = u64::from(f.header.header_offset);
            match f.ucode {
                Ucode::Hs(_) => v.extend([0, 8, 12, 16, 24, 28].map(|i| (at + i, 4))),
                Ucode::Riscv(rv) => {
                    // Only the parts with a size are checked (size-0 parts are absent).
                    let fields = [
                        (1, "bootloader"),
                        (3, "bootloader_param"),
                        (8, "manifest"),
                        (10, "monitor_data"),
                        (12, "monitor_code"),
                    ];
                    for (i, part) in fields {
                        if rv.parts.iter().any(|(n, _)| n == part) {
                            v.push((at + 4 * i, 4));
                        }
                    }
                }
            }
            v
        }
        Image::Amd(a) => {
            let mut v = vec![(0x00, 4), (0x14, 4), (0x18, 4)];
            if a.family == "psp_v2_0" || a.family == "psp_v2_1" || a.family == "ta_v2_0" {
                let desc_at = if a.family == "psp_v2_1" { 40 } else { 36 };
                for i in 0..u32_at(bytes, 32) {
                    v.extend([(desc_at + 16 * i + 8, 4), (desc_at + 16 * i + 12, 4)]);
                }
            }
            v
        }
    }
}

fn elf_fields(index: &rig_firmware::ElfIndex, entsize: u64) -> Vec<(u64, u8)> {
    let (shoff_at, width, off, size) = if entsize == 64 {
        (0x28, 8, 24, 32)
    } else {
        (0x20, 4, 16, 20)
    };
    let mut v = vec![(shoff_at, width)];
    for s in index.sections.iter().filter(|s| s.index != 0) {
        let base = index.shoff + entsize * s.index as u64;
        v.extend([(base + off, width), (base + size, width)]);
    }
    v
}

fn sample(name: &str, bytes: Vec<u8>) -> Sample {
    let name = PathBuf::from(name);
    let fields = fields_of(&name, &bytes);
    Sample {
        name,
        bytes,
        fields,
    }
}

/// Fixtures, plus Debian's files when RIG_FIRMWARE_ROOT is set.
fn samples() -> &'static [Sample] {
    static SAMPLES: OnceLock<Vec<Sample>> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let mut v = vec![
            sample(
                "gsp-1.bin",
                fixture::gsp_elf(9000, "1.0", &["ga10x", "ad10x"]),
            ),
            sample("fmc-1.bin", fixture::fmc_elf()),
            sample("gsp.tlv", fixture::tlv_signed()),
            sample("booter_load-1.bin", fixture::falcon_hs(2, 384)),
            sample("bootloader-1.bin", fixture::falcon_riscv()),
            sample(
                "psp_13_0_0_sos.bin",
                fixture::amd_psp_v2(&[(3, 0x40), (2, 0x80), (1, 0x100)]),
            ),
        ];
        if let Some(root) = common::firmware_root("mutate") {
            for rel in [
                "nvidia/535.261.03/gsp_ga10x.bin",
                "nvidia/535.261.03/gsp_tu10x.bin",
                "nvidia/ga102/gsp/booter_load-535.113.01.bin",
                "nvidia/tu102/gsp/booter_unload-535.113.01.bin",
                "nvidia/ga102/gsp/bootloader-535.113.01.bin",
                "amdgpu/psp_13_0_0_sos.bin",
                "amdgpu/psp_13_0_6_sos.bin",
                "amdgpu/navi10_sos.bin",
                "amdgpu/psp_13_0_0_ta.bin",
                "amdgpu/navi10_ta.bin",
                "amdgpu/gc_11_0_0_rlc.bin",
                "amdgpu/gc_11_0_0_pfp.bin",
                "amdgpu/sdma_6_0_0.bin",
                "amdgpu/smu_13_0_0.bin",
                "amdgpu/dcn_3_2_0_dmcub.bin",
            ] {
                let path = root.join(rel);
                let bytes = std::fs::read(&path).unwrap();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                v.push(sample(&name, bytes));
            }
        }
        v
    })
}

/// Parses through the overlay; whatever parses must only name ranges inside it.
fn parse_checked(s: &Sample, m: &Mutated<'_>) -> Result<(), String> {
    let image = match parse_image(&s.name, m) {
        Ok(image) => image,
        Err(e) => return Err(common::chain(&e)),
    };
    let len = m.len;
    let mut spans: Vec<Span> = Vec::new();
    match &image {
        Image::Gsp(g) => {
            spans.push(g.image);
            spans.extend(g.signatures.iter().map(|s| s.span));
            spans.extend(g.index.sections.iter().map(|s| s.span));
        }
        Image::Fmc(f) => spans.extend([f.image, f.hash, f.signature, f.public_key]),
        Image::Tlv(t) => spans.extend(t.blocks.iter().map(|b| b.value)),
        Image::Falcon(f) => {
            spans.push(f.payload);
            match &f.ucode {
                Ucode::Hs(hs) => {
                    spans.extend([hs.signatures, hs.code, hs.data]);
                    spans.extend(hs.apps.iter().copied());
                }
                Ucode::Riscv(rv) => spans.extend(rv.parts.iter().map(|(_, s)| *s)),
            }
        }
        Image::Amd(a) => {
            spans.push(a.payload);
            spans.extend(a.components.iter().map(|c| c.span));
        }
    }
    for s in spans {
        assert!(
            s.end() <= len && s.offset() <= s.end(),
            "{}: span {s:?} outside {len}",
            m.len
        );
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn truncated_files_are_refused(pick in any::<prop::sample::Index>(), cut in any::<prop::sample::Index>()) {
        let s = pick.get(samples());
        let len = cut.index(s.bytes.len()) as u64;
        let m = Mutated { base: &s.bytes, len, patches: BTreeMap::new() };
        let result = parse_checked(s, &m);
        // A TLV container cut at a block boundary is a shorter valid container; every other
        // format ends with something the headers account for (ELF: the section table; amdgpu:
        // size_bytes; falcon: the data payload).
        if !s.name.to_string_lossy().ends_with(".tlv") {
            prop_assert!(result.is_err(), "{} cut to {len} still parses", s.name.display());
        }
    }

    #[test]
    fn flipped_bytes_never_panic(
        pick in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255, any::<bool>()), 1..8),
    ) {
        let s = pick.get(samples());
        let len = s.bytes.len();
        // Half the flips land in the structures (first 4 KiB, or around a field), half anywhere.
        let mut patches = BTreeMap::new();
        for (at, xor, near_field) in flips {
            let pos = if near_field && !s.fields.is_empty() {
                let (field, _) = s.fields[at.index(s.fields.len())];
                (field as usize + at.index(8)).min(len - 1)
            } else if at.index(2) == 0 {
                at.index(len.min(4096))
            } else {
                at.index(len)
            };
            patches.insert(pos as u64, s.bytes[pos] ^ xor);
        }
        let m = Mutated { base: &s.bytes, len: len as u64, patches };
        let _ = parse_checked(s, &m);
    }

    #[test]
    fn offsets_pushed_past_the_end_are_refused(
        pick in any::<prop::sample::Index>(),
        field in any::<prop::sample::Index>(),
        beyond in prop_oneof![0u64..4096, Just(u64::from(u32::MAX)), Just(u64::MAX / 2)],
    ) {
        let s = pick.get(samples());
        prop_assume!(!s.fields.is_empty());
        let (at, width) = s.fields[field.index(s.fields.len())];
        let len = s.bytes.len() as u64;
        let value = len.saturating_add(1).saturating_add(beyond);
        let value = if width == 4 { value.min(u64::from(u32::MAX)) } else { value };
        let mut patches = BTreeMap::new();
        for (i, b) in value.to_le_bytes().iter().take(usize::from(width)).enumerate() {
            patches.insert(at + i as u64, *b);
        }
        let m = Mutated { base: &s.bytes, len, patches };
        let result = parse_checked(s, &m);
        prop_assert!(result.is_err(), "{}: field at {at:#x} = {value:#x} still parses", s.name.display());
    }
}

#[test]
fn every_sample_parses_unmutated() {
    for s in samples() {
        let m = Mutated {
            base: &s.bytes,
            len: s.bytes.len() as u64,
            patches: BTreeMap::new(),
        };
        parse_checked(s, &m).unwrap_or_else(|e| panic!("{}: {e}", s.name.display()));
    }
    common::say(format_args!("{} samples", samples().len()));
}
