//! rigd.toml's text: parsing answers a config or a typed error with a position, never a
//! panic.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rigd::config::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::parse(text, Path::new("rigd.toml"));
    }
});
