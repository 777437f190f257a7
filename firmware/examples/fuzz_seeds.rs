//! Writes seed inputs for the cargo-fuzz targets: the synthetic fixtures, and small real files
//! from a firmware root when one is given.
//!
//! Usage: `cargo run -p rig-firmware --example fuzz_seeds -- CORPUS_DIR [FIRMWARE_ROOT]`
//! writes CORPUS_DIR/<target>/<seed>. Targets that take a selector byte first (falcon, amd,
//! firmware) get it prepended.

use std::error::Error;
use std::path::Path;

use rig_firmware::fixture;

fn write(dir: &Path, target: &str, name: &str, bytes: &[u8]) -> Result<(), Box<dyn Error>> {
    let d = dir.join(target);
    std::fs::create_dir_all(&d)?;
    std::fs::write(d.join(name), bytes)?;
    Ok(())
}

fn with_selector(selector: u8, bytes: &[u8]) -> Vec<u8> {
    let mut v = vec![selector];
    v.extend_from_slice(bytes);
    v
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args_os().skip(1);
    let Some(dir) = args.next() else {
        return Err("usage: fuzz_seeds CORPUS_DIR [FIRMWARE_ROOT]".into());
    };
    let dir = Path::new(&dir);
    let gsp = fixture::gsp_elf(512, "570.144", &["ga10x", "gb20x"]);
    let fmc = fixture::fmc_elf();
    write(dir, "elf", "gsp", &gsp)?;
    write(dir, "elf", "fmc", &fmc)?;
    write(dir, "gsp", "gsp", &gsp)?;
    write(dir, "fmc", "fmc", &fmc)?;
    write(dir, "tlv", "signed", &fixture::tlv_signed())?;
    write(
        dir,
        "falcon",
        "hs",
        &with_selector(0, &fixture::falcon_hs(2, 64)),
    )?;
    write(
        dir,
        "falcon",
        "riscv",
        &with_selector(1, &fixture::falcon_riscv()),
    )?;
    write(
        dir,
        "amd",
        "psp_v2",
        &with_selector(0, &fixture::amd_psp_v2(&[(3, 64), (2, 64), (1, 64)])),
    )?;
    write(dir, "firmware", "gsp", &with_selector(0, &gsp))?;
    write(
        dir,
        "firmware",
        "tlv",
        &with_selector(2, &fixture::tlv_signed()),
    )?;
    if let Some(root) = args.next() {
        let root = Path::new(&root);
        // Small real files only: libFuzzer's inputs stay small, and these hold every header.
        let real: [(&str, &str, Option<u8>); 6] = [
            (
                "falcon",
                "nvidia/ga102/gsp/booter_load-535.113.01.bin",
                Some(0),
            ),
            (
                "falcon",
                "nvidia/ga102/gsp/bootloader-535.113.01.bin",
                Some(1),
            ),
            ("amd", "amdgpu/psp_13_0_6_sos.bin", Some(0)),
            ("amd", "amdgpu/gc_11_0_0_rlc.bin", Some(6)),
            ("amd", "amdgpu/smu_13_0_0.bin", Some(12)),
            ("amd", "amdgpu/sdma_6_0_0.bin", Some(7)),
        ];
        for (target, rel, selector) in real {
            if let Ok(bytes) = std::fs::read(root.join(rel)) {
                let name = rel.rsplit('/').next().unwrap_or(rel);
                let bytes = match selector {
                    Some(s) => with_selector(s, &bytes),
                    None => bytes,
                };
                write(dir, target, name, &bytes)?;
            }
        }
    }
    Ok(())
}
