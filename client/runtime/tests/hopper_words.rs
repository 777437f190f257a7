//! Hopper's words, byte for byte: every QMD the runtime builds for the kernels of the
//! fixture cubins, and every pushbuffer and ring word the channels send, compared with
//! the words recorded before the hardware words moved into rig-nv
//! (tests/data/hopper-words.txt). A change of the words fails here; one meant on
//! purpose is recorded again with RIG_WORDS_RECORD=1 and reviewed in the diff.

use std::fmt::Write as _;

use rig_client::channel::ring;
use rig_model::addr::GpuVa;
use rig_nv::{class::clc8b5::HOPPER_DMA_COPY_A, method};
use rig_runtime::{
    ConstantBuffer, Launch, PcasAction, QmdVersion, Release, ReleaseKind, Shape, qmd,
};

const FIXTURES: &[(&str, &[u8])] = &[
    (
        "kernels.sm_90",
        include_bytes!("../../cubin/tests/data/kernels.sm_90.cubin"),
    ),
    (
        "kernels.sm_90.nvrtc",
        include_bytes!("../../cubin/tests/data/kernels.sm_90.nvrtc.cubin"),
    ),
    (
        "tinygrad.sm_90.nvrtc",
        include_bytes!("../../cubin/tests/data/tinygrad.sm_90.nvrtc.cubin"),
    ),
    (
        "triton_add.sm_90",
        include_bytes!("../../cubin/tests/data/triton_add.sm_90.cubin"),
    ),
];
const RECORDED: &str = include_str!("data/hopper-words.txt");
const BASE: u64 = 0x12_0000_0000;

fn line(out: &mut String, name: &str, words: &[u32]) {
    let hex: Vec<String> = words.iter().map(|w| format!("{w:08x}")).collect();
    let _ = writeln!(out, "{name}: {}", hex.join(" "));
}

fn qmds(out: &mut String) {
    for (fixture, bytes) in FIXTURES {
        let module = rig_cubin::Module::parse(bytes).expect("the fixture parses");
        let image = module
            .layout()
            .expect("lays out")
            .place(GpuVa(BASE))
            .expect("places");
        for kernel in module.kernels() {
            let block = match kernel.threads() {
                rig_cubin::Threads::Required(r) | rig_cubin::Threads::Max(r) => (r[0], r[1], r[2]),
                _ => (64, 1, 1),
            };
            let name = format!("{fixture} {}", kernel.name());
            let shape = match Shape::new(kernel, (3, 2, 1), block, 256) {
                Ok(s) => s,
                Err(e) => {
                    let _ = writeln!(out, "{name}: shape refused: {e}");
                    continue;
                }
            };
            let bank0 = u32::try_from(kernel.bank0_template().len())
                .expect("a bank 0 below 64 KiB")
                .max(16)
                .next_multiple_of(16);
            let mut banks = vec![ConstantBuffer {
                index: 0,
                addr: GpuVa(0x7f00_0000_0180),
                size: bank0,
            }];
            for b in image.banks() {
                banks.push(qmd::constant_buffer(*b).expect("bank"));
            }
            let program = image.entry(kernel).expect("an entry");
            for (kind, addr, payload) in [
                (None, 0, 0),
                (Some(ReleaseKind::Word), 0x7f00_0000_1004, 7),
                (
                    Some(ReleaseKind::DoubleWord),
                    0x7f00_0000_1008,
                    0x1_0000_0002,
                ),
                (Some(ReleaseKind::WithTimestamp), 0x7f00_0000_1010, 9),
            ] {
                let launch = Launch {
                    kernel,
                    shape: &shape,
                    program,
                    banks: &banks,
                    release: kind.map(|kind| Release {
                        addr: GpuVa(addr),
                        payload,
                        kind,
                    }),
                    local_capacity: 1 << 20,
                    co_resident: 0,
                };
                match qmd::build(QmdVersion::V04, &launch) {
                    Ok(mut q) => {
                        line(out, &format!("{name} qmd {kind:?}"), q.words());
                        q.set_bank_address(0, GpuVa(0x7f00_0000_2000))
                            .expect("bank");
                        q.set_release_payload(0x55).expect("payload");
                        line(out, &format!("{name} qmd {kind:?} patched"), q.words());
                        let word = q.release_payload_word().expect("V04 keeps it in one word");
                        let _ = writeln!(out, "{name} payload word {word}");
                    }
                    Err(e) => {
                        let _ = writeln!(out, "{name} qmd {kind:?}: refused: {e}");
                    }
                }
            }
        }
    }
}

fn channel_words(out: &mut String) {
    use method::compute::{self as k, Invalidate, LocalMemory};
    use method::copy::{self as c, Semaphore};
    let va = GpuVa(0x12_3456_7810);
    line(
        out,
        "set_object copy",
        &method::set_object(method::SUBCH_COPY, HOPPER_DMA_COPY_A),
    );
    line(out, "set_object compute", &k::set_object());
    line(out, "wfi", &method::wfi());
    line(
        out,
        "release",
        &method::release(va, 0x1_0000_0003).expect("words"),
    );
    for (wait_idle, timestamp) in [(false, false), (false, true), (true, false), (true, true)] {
        let how = method::Release {
            wait_idle,
            timestamp,
        };
        let w = method::release_with(va, 5, how).expect("words");
        line(out, &format!("release_with {wait_idle} {timestamp}"), &w);
    }
    line(
        out,
        "acquire",
        &method::acquire(
            GpuVa(0x12_3456_7818),
            0x2_0000_0001,
            method::Waiting::SwitchGroup,
        )
        .expect("words"),
    );
    line(
        out,
        "copy",
        &c::copy(GpuVa(0x1_0000_0001), va, 12345).expect("words"),
    );
    line(
        out,
        "copy_flushed",
        &c::copy_flushed(GpuVa(0x1_0000_0001), va, 1 << 30).expect("words"),
    );
    for timestamp in [false, true] {
        let s = Semaphore {
            addr: va,
            payload: 77,
            timestamp,
        };
        line(
            out,
            &format!("copy_released {timestamp}"),
            &c::copy_released(GpuVa(0x40), va, 64, s).expect("words"),
        );
        line(
            out,
            &format!("copy release {timestamp}"),
            &c::release(s).expect("words"),
        );
        line(
            out,
            &format!("memset {timestamp}"),
            &c::memset(va, 0xdead_beef, 4096, Some(s)).expect("words"),
        );
    }
    line(
        out,
        "memset bare",
        &c::memset(va, 0x5a5a_5a5a, 1 << 30, None).expect("words"),
    );
    line(
        out,
        "shared window",
        &k::set_shared_memory_window(GpuVa(0x7f0e_0000_0000)).expect("words"),
    );
    line(
        out,
        "local window",
        &k::set_local_memory_window(GpuVa(0x7f0d_d100_0000)).expect("words"),
    );
    let m = LocalMemory {
        addr: GpuVa(0x12_3456_0000),
        per_tpc: 0x1_2345_8000,
        non_throttled_c: k::NON_THROTTLED_C_DEFAULT,
    };
    line(out, "local memory", &k::set_local_memory(m).expect("words"));
    line(out, "invalidate sked", &k::invalidate_sked_caches());
    line(out, "invalidate sampler", &k::invalidate_sampler_cache());
    line(
        out,
        "invalidate texture header",
        &k::invalidate_texture_header_cache(),
    );
    for (i, g, c) in [
        (true, true, true),
        (true, false, false),
        (false, true, false),
        (false, false, true),
    ] {
        let what = Invalidate {
            instruction: i,
            global_data: g,
            constant: c,
        };
        line(
            out,
            &format!("invalidate shader {i} {g} {c}"),
            &k::invalidate_shader_caches(what),
        );
    }
    for action in [
        PcasAction::InvalidateCopySchedule,
        PcasAction::InvalidatePrefetchCopySchedule,
    ] {
        line(
            out,
            &format!("send_pcas {action:?}"),
            &k::send_pcas(GpuVa(0xff_ffff_ff00), action).expect("words"),
        );
    }
    for timestamp in [false, true] {
        line(
            out,
            &format!("report {timestamp}"),
            &k::report_semaphore(va, 3, timestamp).expect("words"),
        );
    }
    let e = ring::entry(GpuVa(0xab_cdef_0124), 0x1f_ffff).expect("entry");
    line(
        out,
        "ring entry",
        &[(e & 0xffff_ffff) as u32, (e >> 32) as u32],
    );
}

#[test]
fn hopper_words_are_the_recorded_ones() {
    let mut out = String::new();
    qmds(&mut out);
    channel_words(&mut out);
    if std::env::var_os("RIG_WORDS_RECORD").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hopper-words.txt");
        std::fs::write(path, &out).expect("records");
        return;
    }
    for (n, (got, want)) in out.lines().zip(RECORDED.lines()).enumerate() {
        assert_eq!(got, want, "line {}", n + 1);
    }
    assert_eq!(out.lines().count(), RECORDED.lines().count());
}
