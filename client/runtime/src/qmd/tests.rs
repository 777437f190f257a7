//! A launch's QMD against the header that defines it, parsed here on its own (not
//! through rig-nv's generated fields): the encoded words read back at the header's
//! positions, and the checks that need the kernel.

use std::collections::BTreeMap;

use rig_nv::MwField as Field;

use super::*;
use crate::launch::Shape;
use crate::testing::kernels;

const HEADER: &str = include_str!("../../../../common/nv/headers/clcbc0qmd.h");
const PREFIX: &str = "NVCBC0_QMDV04_00_";

/// The V04_00 `#define`s of the header: name (without the prefix) → its text.
fn header() -> BTreeMap<String, String> {
    HEADER
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#define "))
        .filter_map(|l| l.strip_prefix(PREFIX))
        .filter_map(|l| {
            let (name, value) = l.split_once(char::is_whitespace)?;
            let name = name.strip_suffix("(i)").unwrap_or(name);
            Some((name.to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// Evaluates `320+(i)*16`-style expressions of the header.
fn eval(expr: &str, i: u32) -> u32 {
    expr.replace(['(', ')'], "")
        .split('+')
        .map(|term| {
            term.split('*')
                .map(|f| {
                    if f == "i" {
                        i
                    } else {
                        f.parse().unwrap_or_else(|e| panic!("{expr}: {e}"))
                    }
                })
                .product::<u32>()
        })
        .sum()
}

/// The header's (hi, lo) of field `name` at index `i`.
fn position(h: &BTreeMap<String, String>, name: &str, i: u32) -> (u32, u32) {
    let mw = h
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not in the header"));
    let inner = mw
        .strip_prefix("MW(")
        .and_then(|m| m.strip_suffix(')'))
        .expect("MW(..)");
    // Split at the ':' outside parentheses.
    let mut depth = 0;
    let colon = inner
        .char_indices()
        .find(|&(_, c)| {
            depth += i32::from(c == '(') - i32::from(c == ')');
            c == ':' && depth == 0
        })
        .map(|(at, _)| at)
        .expect("hi:lo");
    (eval(&inner[..colon], i), eval(&inner[colon + 1..], i))
}

fn enumerant(h: &BTreeMap<String, String>, name: &str) -> u64 {
    let v = h
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not in the header"));
    u64::from_str_radix(v.trim_start_matches("0x"), 16).expect("hex")
}

/// The header's field `name` (at index `i`), as a [`Field`].
fn at(h: &BTreeMap<String, String>, name: &'static str, i: u32) -> Field {
    let (hi, lo) = position(h, name, i);
    Field::indexed(name, i, hi, lo)
}

struct Fixture {
    module: rig_cubin::Module,
}

impl Fixture {
    fn new() -> Self {
        Self { module: kernels() }
    }
}

const PROGRAM: u64 = 0x7f00_0000_1000;
const BANK0: u64 = 0x7f01_0000_0040;
const BANK3: u64 = 0x7f00_0002_0100;
const RELEASE: u64 = 0x7f02_0000_0010;

fn banks(bank0: u32) -> [ConstantBuffer; 2] {
    [
        ConstantBuffer {
            index: 0,
            addr: GpuVa(BANK0),
            size: bank0,
        },
        ConstantBuffer {
            index: 3,
            addr: GpuVa(BANK3),
            size: 64,
        },
    ]
}

#[test]
fn a_launch_reads_back_at_the_headers_positions() {
    let fx = Fixture::new();
    let k = fx.module.kernel("reduce_sum").expect("reduce_sum");
    let shape = Shape::new(k, (4096, 3, 2), (256, 1, 1), 1024).expect("fits");
    let b = banks(0x230);
    let launch = Launch {
        kernel: k,
        shape: &shape,
        program: GpuVa(PROGRAM),
        banks: &b,
        release: Some(Release {
            addr: GpuVa(RELEASE),
            payload: 0x1_2345_6789,
            kind: ReleaseKind::DoubleWord,
        }),
        local_capacity: 0,
        co_resident: 0,
    };
    let hopper = rig_nv::generation::HOPPER.compute;
    let qmd = build(for_class(hopper).expect("Hopper"), &launch).expect("valid");
    assert_eq!(qmd.words().len() * 4, QmdVersion::V04.size());
    assert_eq!(qmd.to_bytes().len(), 384);
    let h = header();
    let w = qmd.words();
    let mut expected: Vec<(&'static str, u32, u64)> = vec![
        ("QMD_GROUP_ID", 0, 0x3f),
        ("QMD_TYPE", 0, enumerant(&h, "QMD_TYPE_GRID_CTA")),
        ("INVALIDATE_TEXTURE_HEADER_CACHE", 0, 1),
        ("INVALIDATE_TEXTURE_SAMPLER_CACHE", 0, 1),
        ("INVALIDATE_TEXTURE_DATA_CACHE", 0, 1),
        ("INVALIDATE_SHADER_DATA_CACHE", 0, 1),
        ("QMD_MAJOR_VERSION", 0, 4),
        ("QMD_MINOR_VERSION", 0, 0),
        ("API_VISIBLE_CALL_LIMIT", 0, 1),
        ("SAMPLER_INDEX", 0, 0),
        (
            "CWD_MEMBAR_TYPE",
            0,
            enumerant(&h, "CWD_MEMBAR_TYPE_L1_SYSMEMBAR"),
        ),
        ("GRID_WIDTH", 0, 4096),
        ("GRID_HEIGHT", 0, 3),
        ("GRID_DEPTH", 0, 2),
        ("CTA_THREAD_DIMENSION0", 0, 256),
        ("CTA_THREAD_DIMENSION1", 0, 1),
        ("CTA_THREAD_DIMENSION2", 0, 1),
        ("REGISTER_COUNT", 0, 13),
        ("BARRIER_COUNT", 0, 1),
        // 0x410 static + 1 KiB dynamic = 0x810, rounded to 256: 0x900.
        ("SHARED_MEMORY_SIZE", 0, 0x900),
        // One CTA fits 8 KiB (config 3); 8 CTAs of 256 threads need 18 KiB: 32 KiB (9).
        ("MIN_SM_CONFIG_SHARED_MEM_SIZE", 0, 3),
        ("MAX_SM_CONFIG_SHARED_MEM_SIZE", 0, 58),
        ("TARGET_SM_CONFIG_SHARED_MEM_SIZE", 0, 9),
        ("SHADER_LOCAL_MEMORY_LOW_SIZE", 0, 0),
        ("SHADER_LOCAL_MEMORY_HIGH_SIZE", 0, 0),
        ("PROGRAM_ADDRESS_LOWER", 0, PROGRAM & 0xffff_ffff),
        ("PROGRAM_ADDRESS_UPPER", 0, PROGRAM >> 32),
        ("RELEASE_ENABLE", 0, 1),
        (
            "RELEASE_STRUCTURE_SIZE",
            0,
            enumerant(&h, "RELEASE_STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS"),
        ),
        (
            "RELEASE_MEMBAR_TYPE",
            0,
            enumerant(&h, "RELEASE_MEMBAR_TYPE_FE_NONE"),
        ),
        ("RELEASE_PAYLOAD64B", 0, 1),
        ("RELEASE_SEMAPHORE0_ADDR_LOWER", 0, RELEASE & 0xffff_ffff),
        ("RELEASE_SEMAPHORE0_ADDR_UPPER", 0, RELEASE >> 32),
        ("RELEASE_SEMAPHORE0_PAYLOAD_LOWER", 0, 0x2345_6789),
        ("RELEASE_SEMAPHORE0_PAYLOAD_UPPER", 0, 1),
        ("CONSTANT_BUFFER_VALID", 0, 1),
        ("CONSTANT_BUFFER_INVALIDATE", 0, 1),
        (
            "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6",
            0,
            (BANK0 >> 6) & 0xffff_ffff,
        ),
        ("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", 0, BANK0 >> 38),
        ("CONSTANT_BUFFER_SIZE_SHIFTED4", 0, 0x23),
        ("CONSTANT_BUFFER_VALID", 3, 1),
        ("CONSTANT_BUFFER_INVALIDATE", 3, 1),
        (
            "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6",
            3,
            (BANK3 >> 6) & 0xffff_ffff,
        ),
        ("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", 3, BANK3 >> 38),
        ("CONSTANT_BUFFER_SIZE_SHIFTED4", 3, 4),
    ];
    for i in [1, 2, 4, 5, 6, 7] {
        expected.push(("CONSTANT_BUFFER_VALID", i, 0));
    }
    // Every bit outside the fields written above is 0.
    let mut rest = w.to_vec();
    for (name, i, value) in expected {
        let f = at(&h, name, i);
        assert_eq!(f.get(w), Some(value), "{name}({i})");
        for bit in f.lo..=f.hi {
            rest[(bit / 32) as usize] &= !(1 << (bit % 32));
        }
    }
    assert!(rest.iter().all(|&x| x == 0), "stray bits: {rest:08x?}");
}

#[test]
fn each_release_kind_sets_its_structure_size_and_payload64b_only_with_two_words() {
    let fx = Fixture::new();
    let k = fx.module.kernel("empty").expect("empty");
    let shape = Shape::new(k, 1, 1, 0).expect("fits");
    let b = banks(0x210);
    let h = header();
    for (kind, size, payload64, addr) in [
        (
            ReleaseKind::Word,
            "RELEASE_STRUCTURE_SIZE_SEMAPHORE_ONE_WORD",
            0,
            0x1004,
        ),
        (
            ReleaseKind::DoubleWord,
            "RELEASE_STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS",
            1,
            0x1008,
        ),
        (
            ReleaseKind::WithTimestamp,
            "RELEASE_STRUCTURE_SIZE_SEMAPHORE_FOUR_WORDS",
            0,
            0x1010,
        ),
    ] {
        let launch = Launch {
            kernel: k,
            shape: &shape,
            program: GpuVa(PROGRAM),
            banks: &b,
            release: Some(Release {
                addr: GpuVa(addr),
                payload: 7,
                kind,
            }),
            local_capacity: 0,
            co_resident: 0,
        };
        let qmd = build(QmdVersion::V04, &launch).expect("valid");
        assert_eq!(
            at(&h, "RELEASE_STRUCTURE_SIZE", 0).get(qmd.words()),
            Some(enumerant(&h, size))
        );
        assert_eq!(
            at(&h, "RELEASE_PAYLOAD64B", 0).get(qmd.words()),
            Some(payload64)
        );
    }
}

fn launch_err(f: impl FnOnce(&mut Launch<'_>)) -> Result<Qmd, QmdError> {
    let m = kernels();
    let k = m.kernel("local_array").expect("local_array");
    let shape = Shape::new(k, 1, 32, 0).expect("fits");
    let b = banks(0x230);
    let mut launch = Launch {
        kernel: k,
        shape: &shape,
        program: GpuVa(PROGRAM),
        banks: &b,
        release: None,
        local_capacity: 0x640,
        co_resident: 0,
    };
    f(&mut launch);
    build(QmdVersion::V04, &launch)
}

#[test]
fn the_reference_launch_is_valid() {
    let qmd = launch_err(|_| {}).expect("valid");
    let h = header();
    assert_eq!(
        at(&h, "SHADER_LOCAL_MEMORY_HIGH_SIZE", 0).get(qmd.words()),
        Some(0x640)
    );
    assert_eq!(at(&h, "RELEASE_ENABLE", 0).get(qmd.words()), Some(0));
}

#[test]
fn addresses_need_their_alignment_and_must_lie_below_2_57() {
    for program in [PROGRAM + 64, ADDRESS_LIMIT, !127u64] {
        assert_eq!(
            launch_err(|l| l.program = GpuVa(program)),
            Err(QmdError::Program { addr: program })
        );
    }
    launch_err(|l| l.program = GpuVa(ADDRESS_LIMIT - 128)).expect("within the limits");
    let release = |addr, kind| {
        Some(Release {
            addr: GpuVa(addr),
            payload: 1,
            kind,
        })
    };
    for (addr, kind, align) in [
        (0x1002, ReleaseKind::Word, 4),
        (0x1004, ReleaseKind::DoubleWord, 8),
        (0x1008, ReleaseKind::WithTimestamp, 16),
        (ADDRESS_LIMIT, ReleaseKind::Word, 4),
    ] {
        assert_eq!(
            launch_err(|l| l.release = release(addr, kind)),
            Err(QmdError::Release { addr, kind, align })
        );
    }
    for kind in [ReleaseKind::Word, ReleaseKind::WithTimestamp] {
        assert_eq!(
            launch_err(|l| l.release = Some(Release {
                addr: GpuVa(0x1000),
                payload: 1 << 32,
                kind
            })),
            Err(QmdError::Payload { payload: 1 << 32 })
        );
    }
    launch_err(|l| {
        l.release = Some(Release {
            addr: GpuVa(0x1000),
            payload: u64::MAX,
            kind: ReleaseKind::DoubleWord,
        })
    })
    .expect("64 bits with two words");
    launch_err(|l| {
        l.release = Some(Release {
            addr: GpuVa(0x1000),
            payload: u32::MAX.into(),
            kind: ReleaseKind::Word,
        })
    })
    .expect("within the limits");
}

#[test]
fn constant_buffers_are_checked_one_by_one() {
    let bad = |b: ConstantBuffer| {
        let all = [
            ConstantBuffer {
                index: 0,
                addr: GpuVa(BANK0),
                size: 0x230,
            },
            b,
        ];
        let m = kernels();
        let k = m.kernel("local_array").expect("local_array");
        let shape = Shape::new(k, 1, 32, 0).expect("fits");
        let launch = Launch {
            kernel: k,
            shape: &shape,
            program: GpuVa(PROGRAM),
            banks: &all,
            release: None,
            local_capacity: 0x640,
            co_resident: 0,
        };
        match build(QmdVersion::V04, &launch) {
            Err(QmdError::Bank { .. }) => true,
            other => panic!("{b:?}: {other:?}"),
        }
    };
    assert!(bad(ConstantBuffer {
        index: 8,
        addr: GpuVa(BANK3),
        size: 64
    }));
    assert!(bad(ConstantBuffer {
        index: 0,
        addr: GpuVa(BANK3),
        size: 64
    }));
    assert!(bad(ConstantBuffer {
        index: 3,
        addr: GpuVa(BANK3 + 32),
        size: 64
    }));
    assert!(bad(ConstantBuffer {
        index: 3,
        addr: GpuVa(ADDRESS_LIMIT),
        size: 64
    }));
    assert!(bad(ConstantBuffer {
        index: 3,
        addr: GpuVa(BANK3),
        size: 0
    }));
    assert!(bad(ConstantBuffer {
        index: 3,
        addr: GpuVa(BANK3),
        size: 72
    }));
    assert!(bad(ConstantBuffer {
        index: 3,
        addr: GpuVa(BANK3),
        size: MAX_BANK + 16
    }));
    launch_err(|l| {
        l.banks = &[ConstantBuffer {
            index: 0,
            addr: GpuVa(BANK0),
            size: MAX_BANK,
        }];
    })
    .expect("a 64 KiB bank 0");
    assert_eq!(
        launch_err(|l| l.banks = &[ConstantBuffer {
            index: 0,
            addr: GpuVa(BANK0),
            size: 0x220
        }]),
        Err(QmdError::Bank0 {
            size: 0x220,
            needed: 0x224
        })
    );
    assert_eq!(
        launch_err(|l| l.banks = &[ConstantBuffer {
            index: 3,
            addr: GpuVa(BANK3),
            size: 64
        }]),
        Err(QmdError::Bank0 {
            size: 0,
            needed: 0x224
        })
    );
}

#[test]
fn local_memory_must_fit_the_channels_slm() {
    launch_err(|l| l.local_capacity = 0x640).expect("within the limits");
    assert_eq!(
        launch_err(|l| l.local_capacity = 0x63f),
        Err(QmdError::LocalMemory {
            needed: 0x640,
            capacity: 0x63f
        })
    );
    assert_eq!(
        launch_err(|l| l.local_capacity = 0),
        Err(QmdError::LocalMemory {
            needed: 0x640,
            capacity: 0
        })
    );
}

#[test]
fn carveouts_are_the_smallest_that_fit() {
    assert_eq!(carveout_config(228), 58);
    assert_eq!(carveout_config(8), 3);
    assert_eq!(carveout_for(0), 8);
    assert_eq!(carveout_for(8 * 1024), 8);
    assert_eq!(carveout_for(8 * 1024 + 1), 16);
    assert_eq!(carveout_for(100 * 1024 + 1), 132);
    assert_eq!(carveout_for(228 * 1024), 228);
    assert_eq!(carveout_for(u64::MAX), 228);
}

#[test]
fn a_value_wider_than_its_field_is_an_error_not_a_truncation() {
    let mut w = [0u32; 96];
    let f = at(&header(), "REGISTER_COUNT", 0);
    let e = f.set(&mut w, 512).expect_err("512 needs 10 bits");
    assert_eq!((e.name, e.value), ("REGISTER_COUNT", 512));
    assert_eq!(w, [0; 96]);
    f.set(&mut w, 511).expect("fits");
    assert_eq!(f.get(&w), Some(511));
}

#[test]
fn a_placed_modules_banks_bind_as_they_are() {
    let m = kernels();
    let image = m
        .layout()
        .expect("lays out")
        .place(GpuVa(0x7f00_0000_0000))
        .expect("places");
    let banks: Vec<ConstantBuffer> = image
        .banks()
        .iter()
        .map(|&b| constant_buffer(b))
        .collect::<Result<_, _>>()
        .expect("banks of at most 64 KiB");
    assert_eq!(
        banks.iter().map(|b| (b.index, b.size)).collect::<Vec<_>>(),
        [(3, 64), (4, 16)]
    );
    let too_big = rig_cubin::Bank {
        index: 3,
        addr: GpuVa(0x1000),
        size: 1 << 32,
    };
    assert!(matches!(
        constant_buffer(too_big),
        Err(QmdError::Bank { index: 3, .. })
    ));
    // And a whole launch of the module's const_global kernel binds banks 0, 3 and 4.
    let k = m.kernel("const_global").expect("const_global");
    let shape = Shape::new(k, 4, 256, 0).expect("fits");
    let mut all = vec![ConstantBuffer {
        index: 0,
        addr: GpuVa(BANK0),
        size: 0x220,
    }];
    all.extend(banks);
    let launch = Launch {
        kernel: k,
        shape: &shape,
        program: image.entry(k).expect("placed"),
        banks: &all,
        release: None,
        local_capacity: 0,
        co_resident: 0,
    };
    let qmd = build(QmdVersion::V04, &launch).expect("valid");
    let h = header();
    for (i, valid) in [(0, 1), (1, 0), (2, 0), (3, 1), (4, 1), (5, 0)] {
        assert_eq!(
            at(&h, "CONSTANT_BUFFER_VALID", i).get(qmd.words()),
            Some(valid),
            "{i}"
        );
    }
}

#[test]
fn a_template_moves_its_bank_and_release_payload_in_place() {
    let fx = Fixture::new();
    let k = fx.module.kernel("empty").expect("empty");
    let shape = Shape::new(k, 1, 1, 0).expect("fits");
    let b = banks(0x210);
    let release = Some(Release {
        addr: GpuVa(RELEASE),
        payload: 0,
        kind: ReleaseKind::DoubleWord,
    });
    let build = |bank0: u64, payload: u64| {
        let mut all = b;
        all[0].addr = GpuVa(bank0);
        let launch = Launch {
            kernel: k,
            shape: &shape,
            program: GpuVa(PROGRAM),
            banks: &all,
            release: release.map(|r| Release { payload, ..r }),
            local_capacity: 0,
            co_resident: 0,
        };
        build(QmdVersion::V04, &launch).expect("valid")
    };
    let mut q = build(BANK0, 0);
    q.set_bank_address(0, GpuVa(0x12_3456_7840))
        .expect("aligned");
    q.set_release_payload(0x1_0000_0007).expect("fits");
    assert_eq!(q, build(0x12_3456_7840, 0x1_0000_0007));
    // The payload's 64-bit word, as a store patches it.
    let h = header();
    let lower = position(&h, "RELEASE_SEMAPHORE0_PAYLOAD_LOWER", 0);
    let upper = position(&h, "RELEASE_SEMAPHORE0_PAYLOAD_UPPER", 0);
    assert_eq!((lower.1, upper.0), (64 * 11, 64 * 11 + 63));
    let at = q.release_payload_word().expect("V04 holds it in one word");
    assert_eq!(q.to_u64s()[at], 0x1_0000_0007);
    assert_eq!(q.to_u64s().len() * 8, QmdVersion::V04.size());
    assert!(matches!(
        q.set_bank_address(0, GpuVa(0x1020)),
        Err(QmdError::Bank { .. })
    ));
    assert!(matches!(
        q.set_bank_address(8, GpuVa(0x1040)),
        Err(QmdError::Bank { .. })
    ));
}
