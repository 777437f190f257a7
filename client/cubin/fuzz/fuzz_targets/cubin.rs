//! A cubin's bytes, arbitrary: parsing gives an error or a module, never a panic; a
//! module lays out and places without a panic, and what it places stays inside the image.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rig_model::addr::GpuVa;
use rig_cubin::Module;

fuzz_target!(|data: &[u8]| {
    let Ok(module) = Module::parse(data) else {
        return;
    };
    for k in module.kernels() {
        let _ = (k.params(), k.shared().bytes(), k.stack().bytes(), k.threads());
        assert!(k.param_base() + k.param_bytes() <= k.bank0_template().len() as u32);
    }
    let Ok(layout) = module.layout() else {
        return;
    };
    for base in [0, layout.align(), 0x7f00_0000_0000, u64::MAX - layout.align() + 1] {
        let Ok(image) = layout.place(GpuVa(base)) else {
            continue;
        };
        let end = base + layout.size();
        assert!(image.bytes().len() as u64 <= layout.size());
        for k in module.kernels() {
            let entry = image.entry(k).expect("a kernel of the placed module").get();
            assert!(entry >= base && entry < end, "entry {entry:#x} outside the image");
        }
        for b in image.banks() {
            let addr = b.addr.get();
            assert!(addr >= base && addr + b.size <= end && addr % 256 == 0);
        }
    }
});
