//! Falcon HS / RISC-V ucode reader over arbitrary bytes; the first byte picks the header kind.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rig_firmware::falcon::Ucode;
use rig_firmware::{FalconImage, FalconKind};

fuzz_target!(|input: &[u8]| {
    let Some((pick, data)) = input.split_first() else {
        return;
    };
    let kind = match pick % 3 {
        0 => FalconKind::Hs,
        1 => FalconKind::Riscv,
        _ => FalconKind::Auto,
    };
    if let Ok(f) = FalconImage::parse(data, kind) {
        assert!(f.payload.end() <= data.len() as u64);
        if let Ucode::Hs(hs) = &f.ucode {
            for fuse in 0..4 {
                if let Some(s) = hs.signature_for_fuse(fuse) {
                    assert!(s.end() <= data.len() as u64);
                }
            }
        }
    }
});
