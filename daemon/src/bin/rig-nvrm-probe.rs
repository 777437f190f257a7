//! Read-only probe of the NVIDIA RM path on a GPU host: allocates one root client,
//! asks the RM for its release and the layouts that release selects, lists the GPUs
//! the kernel driver holds, frees the client and exits 0. It allocates nothing else
//! and writes nothing to any GPU. Any failure is one line naming the step, exit 1.
//!
//! Usage: `rig-nvrm-probe [DEV_DIR]` (default `/dev`).

use std::{path::PathBuf, process::ExitCode};

use rigd::{
    nvrm::{NvrmError, Root},
    service::status::error_line,
};

fn main() -> ExitCode {
    let dev = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("/dev"), PathBuf::from);
    match run(&dev) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rig-nvrm-probe: {}", error_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(dev: &std::path::Path) -> Result<(), NvrmError> {
    let root = Root::open(dev)?;
    println!("root client: {:#x} (NV01_ROOT_NON_PRIV)", root.handle());
    // The client is freed by `free` below or, on an early return, by its drop.
    let version = root.build_version()?;
    println!(
        "driver: {} (branch {}, changelist {})",
        version.driver, version.branch, version.changelist
    );
    println!(
        "layouts: release {} ({})",
        version.release,
        version.release.sizes()
    );
    let cards = root.cards()?;
    println!("gpus: {}", cards.len());
    for c in &cards {
        println!(
            "gpu: {} {:04x}:{:04x} gpu_id {:#x} /dev/nvidia{} fb {} MiB",
            c.bdf,
            c.vendor_id,
            c.device_id,
            c.gpu_id,
            c.minor,
            c.fb_size >> 20
        );
    }
    root.free()?;
    println!("root client freed");
    Ok(())
}
