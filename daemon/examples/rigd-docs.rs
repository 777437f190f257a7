//! Writes rigd's man page (rigd.8) into DIR/man from the clap definitions rigd parses
//! with. packaging/deb/build.sh runs it: `cargo run -p rigd --example rigd-docs -- DIR`.
//! rigctl's pages and completions come from client/examples/rigctl-docs.rs.

use std::{path::PathBuf, process::ExitCode};

use clap::CommandFactory;

// The CLI definitions themselves, compiled once more here; their run code is unused.
#[path = "../src/main.rs"]
#[allow(dead_code, reason = "only the clap definitions are used here")]
mod rigd_main;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: rigd-docs DIR");
        return ExitCode::from(2);
    };
    let man = dir.join("man");
    let page = clap_mangen::Man::new(rigd_main::Args::command().name("rigd")).section("8");
    match std::fs::create_dir_all(&man).and_then(|()| page.generate_to(&man)) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rigd-docs: {}: {e}", man.display());
            ExitCode::FAILURE
        }
    }
}
