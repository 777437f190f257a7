//! amdgpu header reader over arbitrary bytes; the first byte picks the block (by file name).
#![no_main]
use libfuzzer_sys::fuzz_target;
use rig_firmware::AmdImage;

const NAMES: [&str; 20] = [
    "psp_13_0_0_sos.bin",
    "psp_13_0_0_ta.bin",
    "psp_13_0_4_toc.bin",
    "navi10_asd.bin",
    "gc_12_0_0_toc.bin",
    "gc_11_0_0_pfp.bin",
    "gc_11_0_0_rlc.bin",
    "sdma_6_0_0.bin",
    "vpe_6_1_0.bin",
    "gc_11_0_0_mes_2.bin",
    "umsch_mm_4_0_0.bin",
    "gc_11_0_0_imu.bin",
    "smu_13_0_0.bin",
    "polaris10_mc.bin",
    "raven_dmcu.bin",
    "dcn_3_2_0_dmcub.bin",
    "navi10_gpu_info.bin",
    "vcn_4_0_0.bin",
    "navi10_sos.bin",
    "unknown.bin",
];

fuzz_target!(|input: &[u8]| {
    let Some((pick, data)) = input.split_first() else {
        return;
    };
    let name = NAMES[usize::from(*pick) % NAMES.len()];
    if let Ok(a) = AmdImage::parse(data, name) {
        assert!(a.payload.end() <= data.len() as u64);
        for c in &a.components {
            assert!(c.span.end() <= data.len() as u64);
        }
        let _ = rig_firmware::stage::psp_layout(&a, Some(13));
    }
});
