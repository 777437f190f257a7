//! A record whose checksum holds but whose fields may be anything (a saved config too
//! short, bad hex, a BDF that does not parse): wrapped in a valid slot, it decodes to
//! a record whose saved config is whole, or to a typed error.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rigd::take::journal::{self, CONFIG_HEADER_LEN};

fuzz_target!(|data: &[u8]| {
    let file = journal::encode(data);
    if let Ok(Some(r)) = journal::decode(Path::new("fuzz.journal"), &file) {
        // What the reset path restores from: a record is refused rather than short.
        assert!(r.saved_config.as_bytes().len() >= CONFIG_HEADER_LEN);
        let _ = r.bdf.to_string();
    }
});
