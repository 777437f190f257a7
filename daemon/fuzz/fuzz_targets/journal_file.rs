//! A journal file's bytes, truncated, bit-flipped or anything else: decoding answers a
//! record or a typed error, never a panic.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rigd::take::journal;

fuzz_target!(|data: &[u8]| {
    let _ = journal::decode(Path::new("fuzz.journal"), data);
});
