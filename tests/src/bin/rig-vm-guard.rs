//! rig-vm-guard: exits 0 only inside the disposable machine (`rig_tests::vm::guard`).
//!
//! The guest runner calls it before each take-over or reset scenario; any other exit
//! status refuses the scenario. `rig-vm-guard ROOT` checks under ROOT instead of `/`.

use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

use rig_tests::vm::guard;

fn main() -> ExitCode {
    let root = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("/"), PathBuf::from);
    match guard::check_inside_guest(&root) {
        Ok(proof) => {
            println!("inside the disposable machine (boot {})", proof.nonce());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("rig-vm-guard: refused:");
            let mut cause: Option<&dyn Error> = Some(&err);
            let mut n = 1;
            while let Some(e) = cause {
                eprintln!("  {n}: {e}");
                cause = e.source();
                n += 1;
            }
            ExitCode::FAILURE
        }
    }
}
