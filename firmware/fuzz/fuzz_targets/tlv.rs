//! NVFW TLV reader over arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rig_firmware::TlvImage;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = TlvImage::parse(data) {
        for b in &t.blocks {
            assert!(b.value.end() <= data.len() as u64);
        }
        if let Some(sig) = t.signature(None) {
            assert!(sig.end() <= data.len() as u64);
        }
    }
});
