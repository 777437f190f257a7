//! The ELF section index equals `readelf -S -W` (GNU binutils) for the same files: every
//! GSP-RM image Debian ships, and the hand-made ELF32/ELF64 fixtures.
#![expect(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use rig_firmware::elf::Section;
use rig_firmware::source::Source;

/// One row of `readelf -S -W`.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    index: usize,
    name: String,
    kind: String,
    addr: u64,
    offset: u64,
    size: u64,
    entsize: u64,
    flags: String,
    link: u32,
    info: u32,
    align: u64,
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn readelf_rows(path: &Path) -> Option<Vec<Row>> {
    let out = match Command::new("readelf")
        .arg("-S")
        .arg("-W")
        .arg(path)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "readelf (binutils) is needed in CI: {e}"
            );
            common::say(format_args!("skipped: readelf not found ({e})"));
            return None;
        }
    };
    assert!(out.status.success(), "readelf failed on {}", path.display());
    let text = String::from_utf8(out.stdout).unwrap();
    let rows = text
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix('[')?;
            let (nr, rest) = rest.split_once(']')?;
            let index: usize = nr.trim().parse().ok()?;
            let mut t: Vec<&str> = rest.split_whitespace().collect();
            let name = if index == 0 {
                String::new()
            } else {
                t.remove(0).to_owned()
            };
            // type addr off size es [flags] lk inf al
            let flags = if t.len() == 9 {
                t.remove(5).to_owned()
            } else {
                String::new()
            };
            assert_eq!(t.len(), 8, "unexpected readelf row: {l}");
            Some(Row {
                index,
                name,
                kind: t[0].to_owned(),
                addr: hex(t[1]),
                offset: hex(t[2]),
                size: hex(t[3]),
                entsize: hex(t[4]),
                flags,
                link: t[5].parse().unwrap(),
                info: t[6].parse().unwrap(),
                align: t[7].parse().unwrap(),
            })
        })
        .collect();
    Some(rows)
}

fn our_rows(sections: &[Section]) -> Vec<Row> {
    sections
        .iter()
        .map(|s| Row {
            index: s.index,
            name: s.name.clone(),
            kind: s.type_name(),
            addr: s.addr,
            offset: s.offset,
            size: s.size,
            entsize: s.entsize,
            flags: s.flags_string(),
            link: s.link,
            info: s.info,
            align: s.align,
        })
        .collect()
}

/// Compares one file; returns false when readelf is unavailable.
fn compare(path: &Path) -> bool {
    let Some(theirs) = readelf_rows(path) else {
        return false;
    };
    let src = Source::open(path).unwrap().source;
    let idx = rig_firmware::elf::parse(&src).unwrap();
    let ours = our_rows(&idx.sections);
    assert_eq!(ours, theirs, "{}", path.display());
    true
}

#[test]
fn fixtures_match_readelf() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        (
            "gsp.bin",
            rig_firmware::fixture::gsp_elf(12_345, "535.261.03", &["ga10x", "cc_gh100", "gb20x"]),
        ),
        ("fmc.bin", rig_firmware::fixture::fmc_elf()),
    ];
    for (name, bytes) in files {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        if !compare(&path) {
            return;
        }
    }
}

#[test]
fn debian_gsp_images_match_readelf() {
    let Some(root) = common::firmware_root("debian_gsp_images_match_readelf") else {
        return;
    };
    let mut n = 0;
    for path in common::nvidia_files(&root) {
        let mut magic = [0u8; 4];
        let is_elf = std::fs::File::open(&path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
            .is_ok()
            && &magic == b"\x7fELF";
        if is_elf {
            if !compare(&path) {
                return;
            }
            n += 1;
        }
    }
    common::say(format_args!("readelf -S -W agrees on {n} ELF files"));
    assert!(n >= 18, "expected Debian's GSP-RM images, compared {n}");
}
