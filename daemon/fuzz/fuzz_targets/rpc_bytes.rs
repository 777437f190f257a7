//! Any bytes as any RPC's request, to rigd's whole service over the fake kernel: the
//! first byte picks the method (common::METHODS), the rest is the protobuf body rigd
//! decodes. Holds: no panic, no call past the limit, the connection kept, and rigd
//! still answers a new client after every input.
#![no_main]
use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&m, body)) = data.split_first() else {
        return;
    };
    let h = common::harness();
    let _ = h.call(usize::from(m), body.to_vec());
    h.still_serves();
});
