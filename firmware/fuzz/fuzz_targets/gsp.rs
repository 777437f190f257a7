//! GSP-RM image reader over arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rig_firmware::GspImage;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = GspImage::parse(data) {
        assert!(g.image.end() <= data.len() as u64);
        for s in &g.signatures {
            assert!(s.span.end() <= data.len() as u64);
        }
    }
});
