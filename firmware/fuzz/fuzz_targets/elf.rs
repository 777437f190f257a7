//! ELF section index over arbitrary bytes: an error or an index whose ranges lie in the data.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rig_firmware::ElfIndex;

fuzz_target!(|data: &[u8]| {
    if let Ok(idx) = ElfIndex::parse(data) {
        for s in &idx.sections {
            assert!(s.span.end() <= data.len() as u64);
        }
    }
});
