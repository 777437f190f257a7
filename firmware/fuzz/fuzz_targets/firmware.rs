//! Format detection and the full report over arbitrary bytes; the first byte picks the name.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rig_firmware::Firmware;

const NAMES: [&str; 6] = [
    "gsp-570.144.bin",
    "fmc-570.144.bin",
    "gsp.tlv",
    "booter_load-570.144.bin",
    "bootloader-570.144.bin",
    "psp_13_0_0_sos.bin",
];

fuzz_target!(|input: &[u8]| {
    let Some((pick, data)) = input.split_first() else {
        return;
    };
    let name = NAMES[usize::from(*pick) % NAMES.len()];
    if let Ok(fw) = Firmware::from_bytes(name, data.to_vec()) {
        let _ = fw.report();
    }
});
