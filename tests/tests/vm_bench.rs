//! The take-over benchmark (docs/BENCHMARKS.md, "Take-over"): rig, driverctl and
//! dpdk-devbind.py each detach bochs-display to vfio-pci and give it back, alternating in
//! one loop in one full-flavour boot (scenario `bench-rebind`). The guest writes every
//! cycle's times to `cycles.tsv`; this test prints their medians, p90 and rig's ratios,
//! and asserts only that every tool produced its samples: a benchmark, not a timed test.
//!
//! It takes minutes of TCG, so the tier skips it:
//! `RIG_VM=1 cargo test -p rig-tests --test vm_bench -- --ignored --nocapture`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rig_tests::vm::{Flavour, Profile, SharedBoot};

static BENCH: SharedBoot = SharedBoot::new(Flavour::Full, Profile::Translated, &["bench-rebind"]);

/// The tools, in the loop's order; rig's ratios are taken to the other two.
const TOOLS: [&str; 3] = ["rig", "driverctl", "devbind"];
/// The scenario's N.
const SAMPLES: usize = 40;

/// One timed cycle: the two halves, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cycle {
    detach_us: u64,
    attach_us: u64,
}

/// `cycles.tsv`: a header, then `cycle tool detach_us attach_us` lines.
fn parse_cycles(text: &str) -> Result<BTreeMap<String, Vec<Cycle>>, String> {
    let mut by_tool: BTreeMap<String, Vec<Cycle>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let [_, tool, detach, attach] = f.as_slice() else {
            return Err(format!("bad line {line:?}"));
        };
        let us = |s: &str| s.parse::<u64>().map_err(|e| format!("{line:?}: {e}"));
        by_tool.entry((*tool).to_owned()).or_default().push(Cycle {
            detach_us: us(detach)?,
            attach_us: us(attach)?,
        });
    }
    Ok(by_tool)
}

/// Median of a non-empty sample (the mean of the middle two for an even count).
fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        f64::midpoint(sorted[n / 2 - 1], sorted[n / 2])
    }
}

/// 90th percentile of a non-empty sample, nearest rank: the ⌈0.9·n⌉-th smallest.
fn p90(sorted: &[f64]) -> f64 {
    let rank = (sorted.len() * 9).div_ceil(10);
    sorted[rank.max(1) - 1]
}

/// Milliseconds, sorted.
fn sorted_ms(cycles: &[Cycle], part: fn(&Cycle) -> u64) -> Vec<f64> {
    // CAST: microsecond counts of one cycle are far below 2^52, exact in an f64.
    let mut v: Vec<f64> = cycles.iter().map(|c| part(c) as f64 / 1000.0).collect();
    v.sort_by(f64::total_cmp);
    v
}

fn report(by_tool: &BTreeMap<String, Vec<Cycle>>) -> String {
    let mut s =
        String::from("tool        n   detach med/p90 ms   attach med/p90 ms   cycle med/p90 ms\n");
    let mut cycle = BTreeMap::new();
    for tool in TOOLS {
        let c = &by_tool[tool];
        let d = sorted_ms(c, |c| c.detach_us);
        let a = sorted_ms(c, |c| c.attach_us);
        let t = sorted_ms(c, |c| c.detach_us + c.attach_us);
        let _ = writeln!(
            s,
            "{tool:<10} {:>3}   {:>7.1} / {:>7.1}   {:>7.1} / {:>7.1}   {:>7.1} / {:>7.1}",
            c.len(),
            median(&d),
            p90(&d),
            median(&a),
            p90(&a),
            median(&t),
            p90(&t)
        );
        cycle.insert(tool, (median(&t), p90(&t)));
    }
    for other in &TOOLS[1..] {
        let _ = writeln!(
            s,
            "rig/{other}: {:.2} (medians), {:.2} (p90); goal ≤ 0.50",
            cycle["rig"].0 / cycle[other].0,
            cycle["rig"].1 / cycle[other].1
        );
    }
    s
}

#[test]
#[ignore = "a benchmark: minutes of TCG; run it with --ignored (docs/BENCHMARKS.md)"]
fn rig_driverctl_and_devbind_each_rebind_bochs_display_n_times() {
    let Some(out) = BENCH.outcome() else { return };

    let s = out.assert_passed("bench-rebind");
    let path = s.files.join("cycles.tsv");
    let text = std::fs::read_to_string(&path).expect("cycles.tsv");
    let by_tool = parse_cycles(&text).expect("cycles.tsv parses");

    for tool in TOOLS {
        let n = by_tool.get(tool).map_or(0, Vec::len);
        assert_eq!(n, SAMPLES, "{tool}: {n} samples in {}", path.display());
    }
    println!("{}", report(&by_tool));
    println!(
        "raw cycles and the guest's summary.txt: {}",
        s.files.display()
    );
}

#[test]
fn median_of_odd_and_even_counts() {
    assert_eq!(median(&[5.0]), 5.0);
    assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
    assert_eq!(median(&[1.0, 2.0, 4.0, 9.0]), 3.0);
}

#[test]
fn p90_is_the_nearest_rank() {
    assert_eq!(p90(&[7.0]), 7.0);
    let ten: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(p90(&ten), 9.0);
    let eleven: Vec<f64> = (1..=11).map(f64::from).collect();
    assert_eq!(p90(&eleven), 10.0);
    let thirty: Vec<f64> = (1..=30).map(f64::from).collect();
    assert_eq!(p90(&thirty), 27.0);
}

#[test]
fn cycles_tsv_groups_samples_by_tool_and_rejects_bad_lines() {
    let text = "cycle tool detach_us attach_us\n1 rig 100 200\n1 driverctl 300 400\n2 rig 5 6\n";

    let by_tool = parse_cycles(text).expect("parses");

    assert_eq!(by_tool["rig"].len(), 2);
    assert_eq!(
        by_tool["driverctl"][0],
        Cycle {
            detach_us: 300,
            attach_us: 400
        }
    );
    let short = parse_cycles("h\n1 rig 100\n").expect_err("three fields");
    let not_a_number = parse_cycles("h\n1 rig x 1\n").expect_err("x is no time");
    assert!(short.contains("1 rig 100"), "{short}");
    assert!(not_a_number.contains("1 rig x 1"), "{not_a_number}");
}
