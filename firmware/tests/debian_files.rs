//! Debian's firmware packages, held to the real thing: every NVIDIA GSP file parses, every
//! amdgpu `psp_*` file parses with its descriptors, every other amdgpu file is classified or
//! refused with a stated reason. Prints the counts.
//!
//! Needs `RIG_FIRMWARE_ROOT` (see `scripts/fetch-debian-firmware.sh`); skips without it,
//! fails without it when `CI` is set.
#![expect(clippy::unwrap_used, clippy::cast_possible_truncation)]

mod common;

use std::collections::BTreeMap;

use rig_firmware::amd::{Block, PspFwType};
use rig_firmware::falcon::Ucode;
use rig_firmware::stage::{self, Radix3Layout};
use rig_firmware::{Firmware, Format, Image, NvChip, ReadAt, Target};

#[test]
fn every_nvidia_gsp_file_parses() {
    let Some(root) = common::firmware_root("every_nvidia_gsp_file_parses") else {
        return;
    };
    let files = common::nvidia_files(&root);
    let mut by_format: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for path in &files {
        match Firmware::open(path) {
            Ok(fw) => {
                *by_format.entry(format!("{:?}", fw.format())).or_default() += 1;
                fw.report().unwrap();
            }
            Err(e) => failures.push(format!("{}: {}", path.display(), common::chain(&e))),
        }
    }
    common::say(format_args!(
        "nvidia: {} files under nvidia/*/gsp/ and nvidia/<version>/",
        files.len()
    ));
    for (format, n) in &by_format {
        common::say(format_args!("  parsed {n:4} {format}"));
    }
    common::say(format_args!("  failed {:4}", failures.len()));
    assert!(
        files.len() >= 60,
        "expected the Debian GSP files, found {}",
        files.len()
    );
    assert!(
        failures.is_empty(),
        "files that did not parse:\n{}",
        failures.join("\n")
    );
}

#[test]
fn driver_gsp_images_carry_the_expected_sections_and_signatures() {
    let Some(root) =
        common::firmware_root("driver_gsp_images_carry_the_expected_sections_and_signatures")
    else {
        return;
    };
    let ga10x = Firmware::open(root.join("nvidia/535.261.03/gsp_ga10x.bin")).unwrap();
    let Image::Gsp(g) = ga10x.image() else {
        panic!("not GSP-RM")
    };
    assert_eq!(g.version.as_deref(), Some("535.261.03"));
    let fams: Vec<&str> = g.signatures.iter().map(|s| s.family.as_str()).collect();
    assert_eq!(fams, ["cc_gh100", "gh100", "ad10x", "ga10x"]);
    for chip in [NvChip::GA102, NvChip::AD104, NvChip::GH100] {
        assert_eq!(
            ga10x.signature_for(chip).unwrap().span.size(),
            4096,
            "{chip}"
        );
    }
    let tu10x = Firmware::open(root.join("nvidia/535.261.03/gsp_tu10x.bin")).unwrap();
    for chip in [NvChip::TU102, NvChip::TU116, NvChip::GA100] {
        assert!(tu10x.signature_for(chip).is_some(), "{chip}");
    }
    assert_eq!(
        tu10x.signature_for(NvChip::GA100).unwrap().section,
        ".fwsignature_ga100"
    );
}

#[test]
fn booters_and_bootloaders_have_the_expected_headers() {
    let Some(root) = common::firmware_root("booters_and_bootloaders_have_the_expected_headers")
    else {
        return;
    };
    let load = Firmware::open(root.join("nvidia/ga102/gsp/booter_load-535.113.01.bin")).unwrap();
    let Image::Falcon(f) = load.image() else {
        panic!("not falcon")
    };
    let Ucode::Hs(hs) = &f.ucode else {
        panic!("not HS")
    };
    assert_eq!((hs.signature_count, hs.signature_size), (2, 384));
    let bl = Firmware::open(root.join("nvidia/ga102/gsp/bootloader-535.113.01.bin")).unwrap();
    assert_eq!(bl.format(), Format::NvidiaRiscv);
}

#[test]
fn staging_the_real_fwimage_maps_every_page() {
    let Some(root) = common::firmware_root("staging_the_real_fwimage_maps_every_page") else {
        return;
    };
    let fw = Firmware::open(root.join("nvidia/535.261.03/gsp_ga10x.bin")).unwrap();
    let Image::Gsp(g) = fw.image() else {
        panic!("not GSP-RM")
    };
    let layout = Radix3Layout::new(g.image.size()).unwrap();
    let pages: Vec<u64> = (0..layout.total_pages())
        .map(|i| 0x4000_0000 + i * 0x2000)
        .collect();
    let mut buf = vec![0u8; layout.buffer_len() as usize];
    let r = fw.stage_gsp(&mut buf, &pages).unwrap();
    assert_eq!(r.level0, pages[0]);
    let entry = |page: u64, i: u64| {
        let at = (page * 4096 + i * 8) as usize;
        u64::from_le_bytes(buf[at..at + 8].try_into().unwrap())
    };
    for i in 0..layout.image_pages {
        assert_eq!(
            entry(layout.level2_first() + i / 512, i % 512),
            pages[(layout.image_first() + i) as usize]
        );
    }
    let at = layout.image_offset() as usize;
    let image = fw.read(g.image).unwrap();
    assert!(buf[at..at + image.len()] == image[..]);
    common::say(format_args!(
        "staged .fwimage: {} bytes, {} image pages, {} level-2 pages, {} level-1 page(s)",
        layout.image_len, layout.image_pages, layout.level2_pages, layout.level1_pages
    ));
}

#[test]
fn every_amdgpu_psp_file_parses_with_its_descriptors() {
    let Some(root) = common::firmware_root("every_amdgpu_psp_file_parses_with_its_descriptors")
    else {
        return;
    };
    let files: Vec<_> = common::files_in(&root.join("amdgpu"))
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("psp_"))
        .collect();
    let mut by_family: BTreeMap<String, usize> = BTreeMap::new();
    for path in &files {
        let fw = Firmware::open(path)
            .unwrap_or_else(|e| panic!("{}: {}", path.display(), common::chain(&e)));
        let Image::Amd(a) = fw.image() else {
            panic!("{}: not amdgpu", path.display())
        };
        assert!(
            !a.components.is_empty(),
            "{}: no components",
            path.display()
        );
        *by_family
            .entry(format!(
                "{} {}",
                serde_json::to_string(&a.block).unwrap(),
                a.family
            ))
            .or_default() += 1;
        if a.block == Block::PspSos {
            let types: Vec<PspFwType> = a.psp_components().iter().map(|(t, _)| *t).collect();
            assert!(
                types.contains(&PspFwType::Sos) && types.contains(&PspFwType::SysDrv),
                "{}: {types:?}",
                path.display()
            );
            let major = a.header.ip_version_major;
            let layout = fw.psp_layout(Some(major)).unwrap();
            assert!(
                layout
                    .steps
                    .iter()
                    .all(|s| s.offset % stage::PSP_ALIGN == 0)
            );
            assert_eq!(layout.steps.last().unwrap().component, "SOS");
        }
    }
    common::say(format_args!(
        "amdgpu psp_*: {} files, all parsed with descriptors",
        files.len()
    ));
    for (family, n) in &by_family {
        common::say(format_args!("  {n:3} {family}"));
    }
    assert!(
        files.len() >= 25,
        "expected Debian's psp_* files, found {}",
        files.len()
    );
}

#[test]
fn every_other_amdgpu_file_is_classified_or_refused_with_a_reason() {
    let Some(root) =
        common::firmware_root("every_other_amdgpu_file_is_classified_or_refused_with_a_reason")
    else {
        return;
    };
    let files: Vec<_> = common::files_in(&root.join("amdgpu"))
        .into_iter()
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with("psp_"))
        .collect();
    let mut classified: BTreeMap<String, usize> = BTreeMap::new();
    let mut unknown_block = Vec::new();
    let mut refused = Vec::new();
    let (mut crc_match, mut crc_total) = (0, 0);
    let mut crc_by_block: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for path in &files {
        match Firmware::open(path) {
            Ok(fw) => {
                let Image::Amd(a) = fw.image() else {
                    panic!("{}: not amdgpu but {:?}", path.display(), fw.format())
                };
                if a.block == Block::Unknown {
                    unknown_block.push(path.file_name().unwrap().to_string_lossy().into_owned());
                }
                *classified.entry(a.family.clone()).or_default() += 1;
                let crc = fw.crc().unwrap().unwrap();
                crc_total += 1;
                crc_match += usize::from(crc.matches);
                let key = match a.block {
                    Block::Media => {
                        rig_firmware::amd::stem(&path.file_name().unwrap().to_string_lossy())
                            .rsplit('_')
                            .find(|t| !t.bytes().all(|b| b.is_ascii_digit()))
                            .unwrap_or("media")
                            .to_owned()
                    }
                    b => serde_json::to_string(&b)
                        .unwrap()
                        .trim_matches('"')
                        .to_owned(),
                };
                let e = crc_by_block.entry(key).or_default();
                e.0 += usize::from(crc.matches);
                e.1 += 1;
                // The payload and every component were checked to lie in the file.
                let len = fw.source().len();
                assert!(a.components.iter().all(|c| c.span.end() <= len));
            }
            Err(e) => {
                let reason = common::chain(&e);
                assert!(!reason.is_empty());
                refused.push(format!("{}: {reason}", path.display()));
            }
        }
    }
    let n: usize = classified.values().sum();
    common::say(format_args!(
        "amdgpu (not psp_*): {} files: {n} classified, {} refused with a reason",
        files.len(),
        refused.len()
    ));
    for (family, k) in &classified {
        common::say(format_args!("  classified {k:4} {family}"));
    }
    common::say(format_args!(
        "  of which {} by common header only (unknown name): {unknown_block:?}",
        unknown_block.len()
    ));
    for r in &refused {
        common::say(format_args!("  refused: {r}"));
    }
    common::say(format_args!(
        "  crc32 field equals CRC-32 of the payload: {crc_match} of {crc_total}"
    ));
    for (block, (m, t)) in &crc_by_block {
        common::say(format_args!("    {block:10} {m:3} of {t:3} match"));
    }
    assert_eq!(n + refused.len(), files.len());
    assert!(
        files.len() >= 500,
        "expected Debian's amdgpu files, found {}",
        files.len()
    );
}

#[test]
fn plans_for_real_chips_find_their_files() {
    let Some(root) = common::firmware_root("plans_for_real_chips_find_their_files") else {
        return;
    };
    for chip in [
        NvChip::TU102,
        NvChip::TU117,
        NvChip::GA100,
        NvChip::GA107,
        NvChip::AD106,
    ] {
        let p = rig_firmware::plan(&Target::Nvidia(chip), &root).unwrap();
        assert!(p.complete, "{chip}: {:#?}", p.items);
    }
    let ips = [
        "mp0=13.0.10",
        "gc=11.0.3",
        "sdma=6.0.3",
        "mp1=13.0.10",
        "vcn=4.0.0",
        "dcn=3.2.0",
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    let p = rig_firmware::plan(&Target::Amd(ips), &root).unwrap();
    assert!(p.complete, "{:#?}", p.items);
}

/// Compresses `src` with `tool args…` into `dst`; false when the tool is not installed.
fn compress(tool: &str, args: &[&str], src: &std::path::Path, dst: &std::path::Path) -> bool {
    let out = std::fs::File::create(dst).unwrap();
    match std::process::Command::new(tool)
        .args(args)
        .arg(src)
        .stdout(out)
        .status()
    {
        Ok(status) => {
            assert!(status.success(), "{tool} failed");
            true
        }
        Err(_) => {
            common::say(format_args!(
                "{tool} not installed: its compressed copy is not checked"
            ));
            false
        }
    }
}

#[test]
fn files_compressed_by_the_distributions_tools_read_the_same() {
    let Some(root) =
        common::firmware_root("files_compressed_by_the_distributions_tools_read_the_same")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for rel in [
        "amdgpu/psp_13_0_6_sos.bin",
        "nvidia/ga102/gsp/bootloader-535.113.01.bin",
    ] {
        let src = root.join(rel);
        let plain = Firmware::open(&src).unwrap().report().unwrap();
        let name = src.file_name().unwrap().to_string_lossy().into_owned();
        // The kernel's own firmware loader takes xz with CRC32 checks and zstd.
        for (tool, args, ext) in [
            ("xz", &["-c", "--check=crc32"][..], "xz"),
            ("zstd", &["-c", "-q", "-19"][..], "zst"),
        ] {
            let dst = dir.path().join(format!("{name}.{ext}"));
            if !compress(tool, args, &src, &dst) {
                continue;
            }
            let packed = Firmware::open(&dst).unwrap().report().unwrap();
            assert_ne!(packed.compression, rig_firmware::Compression::None);
            assert_eq!(packed.parts, plain.parts, "{}", dst.display());
            assert_eq!(packed.version, plain.version);
        }
    }
}
