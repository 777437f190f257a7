//! FMC image reader over arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rig_firmware::FmcImage;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = FmcImage::parse(data) {
        for s in [f.image, f.hash, f.signature, f.public_key] {
            assert!(s.end() <= data.len() as u64);
        }
    }
});
