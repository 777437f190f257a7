//! rig-firmware benchmarks, side by side in one run (a bench binary: it prints medians and the
//! ratios the issue asks for, ready for docs/BENCHMARKS.md).
//!
//! (a) Index a GSP-RM image: open the file, read its ELF index, find `.fwimage` and one chip's
//!     signature. Three sizes (38 MB, 24 MB, 64 KiB) show the cost does not grow with the file.
//! (b) Stage `.fwimage`: `stage::radix3` (one copy into the staging buffer plus the page
//!     tables) against a plain `copy_from_slice` of the same bytes into another buffer of the
//!     same size; both destinations are touched before timing. Also the whole path from the
//!     file (`Firmware::stage_gsp`): by positional read straight into the buffer (what
//!     `Firmware::open` gives an ordinary file), and through a fresh memory map made per run,
//!     with and without MAP_POPULATE (what `Firmware::from_mmap` gives a caller that maps).
//!
//! Run: `RIG_FIRMWARE_ROOT=/var/cache/rig/firmware/lib/firmware taskset -c 1 \
//!       cargo bench -p rig-firmware --bench firmware`
//! Without RIG_FIRMWARE_ROOT it uses synthetic images of the same sizes.
#![expect(clippy::unwrap_used, clippy::cast_possible_truncation)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rig_firmware::stage::{self, Radix3Layout};
use rig_firmware::{Firmware, Image, NvChip, ReadAt};

/// Median, minimum and mean of `n` runs of `f` (after `warm` untimed runs).
fn measure(n: usize, warm: usize, mut f: impl FnMut()) -> (Duration, Duration, Duration) {
    for _ in 0..warm {
        f();
    }
    let mut t: Vec<Duration> = (0..n)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed()
        })
        .collect();
    t.sort();
    let mean = t.iter().sum::<Duration>() / n as u32;
    (t[n / 2], t[0], mean)
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn gbs(bytes: u64, d: Duration) -> String {
    format!("{:.2} GB/s", bytes as f64 / d.as_secs_f64() / 1e9)
}

/// The three GSP images: Debian's two and a small synthetic one (or three synthetic ones).
fn images(tmp: &Path) -> Vec<(String, PathBuf, NvChip)> {
    let small = tmp.join("gsp-small.bin");
    std::fs::write(
        &small,
        rig_firmware::fixture::gsp_elf(64 << 10, "bench", &["ga10x"]),
    )
    .unwrap();
    match std::env::var_os("RIG_FIRMWARE_ROOT") {
        Some(root) => {
            let root = PathBuf::from(root);
            vec![
                (
                    "gsp_ga10x.bin".into(),
                    root.join("nvidia/535.261.03/gsp_ga10x.bin"),
                    NvChip::GA102,
                ),
                (
                    "gsp_tu10x.bin".into(),
                    root.join("nvidia/535.261.03/gsp_tu10x.bin"),
                    NvChip::TU102,
                ),
                ("synthetic 64 KiB".into(), small, NvChip::GA102),
            ]
        }
        None => {
            eprintln!("RIG_FIRMWARE_ROOT unset: synthetic images stand in for Debian's");
            let big = tmp.join("gsp-big.bin");
            std::fs::write(
                &big,
                rig_firmware::fixture::gsp_elf(38_236_160, "bench", &["ga10x"]),
            )
            .unwrap();
            let mid = tmp.join("gsp-mid.bin");
            std::fs::write(
                &mid,
                rig_firmware::fixture::gsp_elf(23_860_048, "bench", &["tu10x"]),
            )
            .unwrap();
            vec![
                ("synthetic 38 MB".into(), big, NvChip::GA102),
                ("synthetic 24 MB".into(), mid, NvChip::TU102),
                ("synthetic 64 KiB".into(), small, NvChip::GA102),
            ]
        }
    }
}

fn index(path: &Path, chip: NvChip) -> u64 {
    let fw = Firmware::open(path).unwrap();
    let Image::Gsp(g) = fw.image() else {
        panic!("not GSP-RM")
    };
    let sig = fw.signature_for(chip).unwrap();
    g.image.size() ^ sig.span.offset()
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let imgs = images(tmp.path());

    println!("### (a) Index a GSP-RM image: open + ELF index + .fwimage + one signature");
    println!();
    println!("| file | size | backing | median | min | mean |");
    println!("|---|---|---|---|---|---|");
    for (name, path, chip) in &imgs {
        let size = std::fs::metadata(path).unwrap().len();
        let backing = Firmware::open(path).unwrap().source().kind();
        let (med, min, mean) = measure(2000, 200, || {
            black_box(index(black_box(path), *chip));
        });
        println!(
            "| {name} | {size} | {backing} | {} | {} | {} |",
            us(med),
            us(min),
            us(mean)
        );
    }
    println!();

    let (name, path, _) = &imgs[0];
    let fw = Firmware::open(path).unwrap();
    let Image::Gsp(g) = fw.image() else {
        panic!("not GSP-RM")
    };
    let image = fw.read(g.image).unwrap().into_owned();
    let layout = Radix3Layout::new(image.len() as u64).unwrap();
    let pages: Vec<u64> = (0..layout.total_pages())
        .map(|i| 0x1_0000_0000 + i * 4096)
        .collect();
    let mut staging = vec![1u8; layout.buffer_len() as usize];
    let mut plain = vec![1u8; image.len()];
    let n = 40;
    let mut t_copy = Vec::new();
    let mut t_stage = Vec::new();
    let mut t_file = Vec::new();
    let mut t_map = Vec::new();
    let mut t_map_pop = Vec::new();
    // Interleaved, so drift on a shared machine hits all three alike.
    for _ in 0..n + 5 {
        let s = Instant::now();
        plain.copy_from_slice(black_box(&image));
        black_box(&plain);
        t_copy.push(s.elapsed());
        let s = Instant::now();
        black_box(stage::radix3(black_box(&image), &mut staging, &pages).unwrap());
        t_stage.push(s.elapsed());
        let s = Instant::now();
        black_box(fw.stage_gsp(&mut staging, &pages).unwrap());
        t_file.push(s.elapsed());
        for (populate, times) in [(false, &mut t_map), (true, &mut t_map_pop)] {
            let s = Instant::now();
            let mapped = Firmware::from_mmap(path, map(path, populate)).unwrap();
            black_box(mapped.stage_gsp(&mut staging, &pages).unwrap());
            times.push(s.elapsed());
        }
    }
    let med = |v: &mut Vec<Duration>| {
        v.drain(..5);
        v.sort();
        v[v.len() / 2]
    };
    let (copy, stage_mem, stage_file) = (med(&mut t_copy), med(&mut t_stage), med(&mut t_file));
    let (stage_map, stage_map_pop) = (med(&mut t_map), med(&mut t_map_pop));
    let bytes = image.len() as u64;
    println!(
        "### (b) Stage .fwimage of {name} ({bytes} bytes, {} pages incl. tables)",
        layout.total_pages()
    );
    println!();
    println!("| operation | median | throughput | vs memcpy |");
    println!("|---|---|---|---|");
    println!(
        "| plain memcpy (copy_from_slice) | {} | {} | 100% |",
        ms(copy),
        gbs(bytes, copy)
    );
    println!(
        "| stage::radix3 (copy + tables) | {} | {} | {:.0}% |",
        ms(stage_mem),
        gbs(bytes, stage_mem),
        100.0 * copy.as_secs_f64() / stage_mem.as_secs_f64()
    );
    println!(
        "| Firmware::stage_gsp from the file ({}) | {} | {} | {:.0}% |",
        fw.source().kind(),
        ms(stage_file),
        gbs(bytes, stage_file),
        100.0 * copy.as_secs_f64() / stage_file.as_secs_f64()
    );
    for (what, d) in [
        ("map + index + stage_gsp (page faults)", stage_map),
        ("map(MAP_POPULATE) + index + stage_gsp", stage_map_pop),
    ] {
        println!(
            "| {what} | {} | {} | {:.0}% |",
            ms(d),
            gbs(bytes, d),
            100.0 * copy.as_secs_f64() / d.as_secs_f64()
        );
    }
    println!();
    black_box(fw.source().len());
}

/// A read-only map of `path`, made afresh.
#[expect(
    unsafe_code,
    reason = "memmap2 maps are unsafe: the bench alone reads the file while mapped"
)]
fn map(path: &Path, populate: bool) -> memmap2::Mmap {
    let file = std::fs::File::open(path).unwrap();
    let mut opts = memmap2::MmapOptions::new();
    if populate {
        opts.populate();
    }
    // SAFETY: the file lies in the benchmark's firmware cache (or its own temp dir), which
    // nothing writes while the benchmark runs; the map is dropped before the next run.
    // JUSTIFICATION: the bench measures the mapped path that `Firmware::from_mmap` offers
    // the daemon, whose sys layer owns the same unsafe call.
    unsafe { opts.map(&file) }.unwrap()
}
