//! Both QMD versions against their headers: every value rig sets is read back from the
//! words at the header's positions, no two fields overlap, and the shared checks refuse
//! what no version can hold.

use super::*;

const VERSIONS: [QmdVersion; 2] = [QmdVersion::V04, QmdVersion::V05];

fn params() -> Params {
    Params {
        grid: [70_000, 3, 2],
        block: [128, 2, 1],
        registers: 40,
        barriers: 1,
        shared: 0x4100,
        carveout: [
            carveout_config(32),
            carveout_config(228),
            carveout_config(132),
        ],
        local_high: 0x2f0,
        program: GpuVa(0x7f12_3456_7880),
        banks: vec![
            ConstantBuffer {
                index: 0,
                addr: GpuVa(0x7f00_0000_0180),
                size: 0x1a0,
            },
            ConstantBuffer {
                index: 3,
                addr: GpuVa(0x1_0000_0040),
                size: 0x1_0000,
            },
        ],
        release: Some(Release {
            addr: GpuVa(0x12_3456_7808),
            payload: 0x1_0000_0002,
            kind: ReleaseKind::DoubleWord,
        }),
    }
}

/// Every field a version's table names, with the indices rig writes.
fn all(f: &Fields) -> Vec<MwField> {
    let mut v = vec![
        f.qmd_group_id,
        f.qmd_type,
        f.qmd_major_version,
        f.qmd_minor_version,
        f.api_visible_call_limit,
        f.sampler_index,
        f.cwd_membar_type,
        f.register_count,
        f.barrier_count,
        f.shared_memory_size.0,
    ];
    v.extend(f.invalidate);
    v.extend(f.grid);
    v.extend(f.block);
    v.extend(f.sm_config_shared_mem_size);
    v.extend(f.local_memory_size.0);
    v.extend(f.program_address.0);
    v.extend(f.release0_addr);
    v.extend(f.release0_payload);
    v.extend(f.dependent0);
    for i in 0..3 {
        v.extend([
            (f.release_enable)(i),
            (f.release_structure_size)(i),
            (f.release_membar_type)(i),
            (f.release_payload64b)(i),
        ]);
    }
    for i in 0..8 {
        v.extend([
            (f.constant_buffer_valid)(i),
            (f.constant_buffer_invalidate)(i),
            (f.constant_buffer_addr_shifted6[0])(i),
            (f.constant_buffer_addr_shifted6[1])(i),
            (f.constant_buffer_size_shifted4)(i),
        ]);
    }
    v
}

#[test]
fn every_field_lies_inside_the_qmd_and_none_overlaps_another() {
    for version in VERSIONS {
        let f = version.fields();
        let mut taken = vec![None; f.words * 32];
        for field in all(f) {
            assert!(
                field.hi < u32::try_from(f.words * 32).expect("small"),
                "{field:?}"
            );
            for bit in field.lo..=field.hi {
                let slot = &mut taken[bit as usize];
                assert!(slot.is_none(), "{version:?}: {field:?} overlaps {slot:?}");
                *slot = Some(field);
            }
        }
    }
}

#[test]
fn every_value_reads_back_from_the_headers_positions() {
    let p = params();
    for version in VERSIONS {
        let f = version.fields();
        let q = version.build(&p).expect("builds");
        let w = q.words();
        let get = |field: MwField| field.get(w).expect("inside");
        assert_eq!(w.len(), f.words);
        assert_eq!(version.size(), 384);
        assert_eq!(get(f.qmd_major_version), f.major);
        assert_eq!(get(f.qmd_group_id), 0x3f);
        assert_eq!(get(f.qmd_type), u64::from(f.qmd_type_grid_cta));
        for (field, v) in f.grid.iter().zip(p.grid) {
            assert_eq!(get(*field), u64::from(v));
        }
        for (field, v) in f.block.iter().zip(p.block) {
            assert_eq!(get(*field), u64::from(v));
        }
        assert_eq!(get(f.register_count), 40);
        let (shared, shift) = f.shared_memory_size;
        assert_eq!(get(shared) << shift, 0x4100);
        let ([_, high], shift) = f.local_memory_size;
        assert_eq!(get(high) << shift, 0x2f0);
        let ([lo, hi], shift) = f.program_address;
        assert_eq!((get(lo) | get(hi) << 32) << shift, 0x7f12_3456_7880);
        let [lower, upper] = f.constant_buffer_addr_shifted6;
        assert_eq!((get(lower(3)) | get(upper(3)) << 32) << 6, 0x1_0000_0040);
        assert_eq!(get((f.constant_buffer_size_shifted4)(3)) << 4, 0x1_0000);
        assert_eq!(get((f.constant_buffer_valid)(3)), 1);
        assert_eq!(get((f.constant_buffer_valid)(2)), 0);
        assert_eq!(get((f.release_payload64b)(0)), 1);
        let [plo, phi] = f.release0_payload;
        assert_eq!(get(plo) | get(phi) << 32, 0x1_0000_0002);
        if let Some(at) = q.release_payload_word() {
            assert_eq!(q.to_u64s()[at], 0x1_0000_0002);
        }
        let [alo, ahi] = f.release0_addr;
        assert_eq!(get(alo) | get(ahi) << 32, 0x12_3456_7808);
    }
}

#[test]
fn patching_moves_bank_0_and_the_payload_in_every_version() {
    for version in VERSIONS {
        let mut q = version.build(&params()).expect("builds");
        q.set_bank_address(0, GpuVa(0x7f00_0000_2000))
            .expect("aligned");
        q.set_release_payload(0x55).expect("fits");
        let again = version
            .build(&Params {
                banks: vec![
                    ConstantBuffer {
                        addr: GpuVa(0x7f00_0000_2000),
                        ..params().banks[0]
                    },
                    params().banks[1],
                ],
                release: params().release.map(|r| Release { payload: 0x55, ..r }),
                ..params()
            })
            .expect("builds");
        assert_eq!(q, again);
        q.set_bank_address(8, GpuVa(0x40))
            .expect_err("bank 8 does not exist");
        q.set_bank_address(1, GpuVa(0x20)).expect_err("misaligned");
    }
}

#[test]
fn a_dependent_qmd_is_chained_and_cleared_in_the_two_words_it_names() {
    for version in VERSIONS {
        let clean = version.build(&params()).expect("builds");
        let mut q = clean.clone();
        let words = q
            .set_dependent(Some(GpuVa(0x12_3456_7800)))
            .expect("aligned");
        let [enable, action, prefetch, pointer] = version.fields().dependent0;
        let w = q.words();
        assert_eq!(enable.get(w), Some(1));
        assert_eq!(
            action.get(w),
            Some(version.fields().dependent_action_schedule.into())
        );
        assert_eq!(prefetch.get(w), Some(1));
        assert_eq!(pointer.get(w), Some(0x1234_5678));
        // Only the two named 64-bit words changed.
        let (a, b) = (clean.to_u64s(), q.to_u64s());
        let changed: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
        assert_eq!(changed, words.to_vec(), "{version:?}");
        q.set_dependent(None).expect("clears");
        assert_eq!(q, clean);
        q.set_dependent(Some(GpuVa(0x1080)))
            .expect_err("not 256-byte aligned");
        q.set_dependent(Some(GpuVa(1 << 40)))
            .expect_err("past 2^40");
    }
}

#[test]
fn dependent_words_hold_their_fields_whole_and_nothing_a_launch_patches() {
    for version in VERSIONS {
        let f = version.fields();
        let clean = version.build(&params()).expect("builds");
        let d = clean.dependent();
        let [first, second] = d.at();
        assert!(first <= second, "{version:?}");
        let [enable, action, prefetch, pointer] = f.dependent0;
        for (field, at) in [
            (enable, first),
            (action, first),
            (prefetch, first),
            (pointer, second),
        ] {
            assert_eq!(
                ((field.lo / 64) as usize, (field.hi / 64) as usize),
                (at, at),
                "{version:?} {}",
                field.name
            );
        }
        // A launch rewrites release slot 0's payload and moves bank 0 with its slot,
        // in a QMD already in memory: the two words must hold neither.
        let mut patched: Vec<MwField> = f.release0_payload.to_vec();
        patched.extend(f.constant_buffer_addr_shifted6.map(|a| a(0)));
        for p in patched {
            for at in d.at() {
                let (lo, hi) = (64 * at, 64 * at + 63);
                assert!(
                    (p.hi as usize) < lo || (p.lo as usize) > hi,
                    "{version:?}: {} shares word {at}",
                    p.name
                );
            }
        }
        // The words with no chain are the clean QMD's, whether taken from it or from a
        // chained one; with a chain, they are what set_dependent writes.
        let mut chained = clean.clone();
        let next = GpuVa(0x12_3456_7800);
        chained.set_dependent(Some(next)).expect("aligned");
        assert_eq!(chained.dependent(), d);
        let (all_clean, all_chained) = (clean.to_u64s(), chained.to_u64s());
        assert_eq!(
            d.words(None).expect("clears"),
            [all_clean[first], all_clean[second]]
        );
        assert_eq!(
            d.words(Some(next)).expect("aligned"),
            [all_chained[first], all_chained[second]]
        );
    }
}

#[test]
fn only_v04_keeps_the_release_payload_in_one_64_bit_word() {
    let at = |v: QmdVersion| v.build(&params()).expect("builds").release_payload_word();
    assert_eq!(at(QmdVersion::V04), Some(11));
    assert_eq!(at(QmdVersion::V05), None);
}

#[test]
fn each_compute_class_reads_its_version() {
    assert_eq!(for_class(0xcbc0), Ok(QmdVersion::V04));
    assert_eq!(for_class(0xcdc0), Ok(QmdVersion::V05));
    assert_eq!(for_class(0xc7c0), Err(QmdError::Class { class: 0xc7c0 }));
}

#[test]
fn addresses_no_version_holds_are_refused() {
    let refused = |p: Params| {
        for version in VERSIONS {
            version.build(&p).expect_err("refused");
        }
    };
    refused(Params {
        program: GpuVa(0x7f12_3456_7840),
        ..params()
    });
    refused(Params {
        program: GpuVa(1 << 57),
        ..params()
    });
    refused(Params {
        release: Some(Release {
            addr: GpuVa(0x1004),
            payload: 1,
            kind: ReleaseKind::DoubleWord,
        }),
        ..params()
    });
    refused(Params {
        release: Some(Release {
            addr: GpuVa(0x1004),
            payload: 1 << 32,
            kind: ReleaseKind::Word,
        }),
        ..params()
    });
    let bank = |index, addr, size| Params {
        banks: vec![ConstantBuffer {
            index,
            addr: GpuVa(addr),
            size,
        }],
        ..params()
    };
    refused(bank(8, 0x40, 16));
    refused(bank(1, 0x20, 16));
    refused(bank(1, 0x40, 8));
    refused(bank(1, 0x40, 0x1_0010));
    refused(Params {
        banks: vec![params().banks[0], params().banks[0]],
        ..params()
    });
}

#[test]
fn a_value_wider_than_a_version_s_field_is_a_field_error() {
    // V05_00's CTA_THREAD_DIMENSION2 is 8 bits, V04_00's 16.
    let deep = Params {
        block: [1, 1, 256],
        ..params()
    };
    QmdVersion::V04.build(&deep).expect("V04 holds 256");
    assert!(matches!(
        QmdVersion::V05.build(&deep),
        Err(QmdError::Field(FieldError {
            name: "CTA_THREAD_DIMENSION2",
            ..
        }))
    ));
}
