//! rigd's log when its output is a file, not a terminal: plain text, no escape
//! sequence (colour codes made a log file and the journal unreadable). The rigd
//! binary over this machine's sysfs (read only, as tests/watchdog.rs), stdout and
//! stderr to one file; `-v` so that it writes more than a line or two (the SIGTERM
//! that ends it may come before its handler is in place, so no last line is awaited).
//! Once as a
//! plain process, once with a `JOURNAL_STREAM` naming another file (a service whose
//! stderr was redirected since systemd set it): both must write text to the file.

use std::{
    fs::File,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use nix::{sys::signal, unistd::Pid};

/// Runs rigd until it logs that it serves, stops it, and returns what it wrote.
fn log_of(dir: &Path, journal_stream: Option<&str>) -> String {
    let config = dir.join("rigd.toml");
    std::fs::write(
        &config,
        format!(
            "[paths]\nstate_dir = \"{}\"\npci_ids = \"{}\"\n",
            dir.join("state").display(),
            dir.join("pci.ids").display()
        ),
    )
    .expect("config");
    let log = dir.join("rigd.log");
    let out = File::create(&log).expect("log file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rigd"));
    cmd.arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(dir.join("rigd.sock"))
        .arg("-v")
        .env_remove("RUST_LOG")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("JOURNAL_STREAM")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup"))
        .stderr(out);
    if let Some(v) = journal_stream {
        cmd.env("JOURNAL_STREAM", v);
    }
    let mut child = cmd.spawn().expect("start rigd");
    // TIMEOUT: rigd reads this machine's sysfs before it serves; a debug build on a
    // loaded 2-core machine takes a few seconds.
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("serving") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    signal::kill(pid, signal::Signal::SIGTERM).expect("SIGTERM");
    child.wait().expect("rigd exits");
    std::fs::read_to_string(&log).expect("log")
}

fn assert_plain(text: &str) {
    assert!(
        text.contains("serving"),
        "rigd did not log that it serves:\n{text}"
    );
    assert!(
        !text.contains('\u{1b}'),
        "an escape sequence in rigd's log file:\n{text:?}"
    );
}

#[test]
fn rigd_writing_to_a_file_writes_no_escape_sequence() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_plain(&log_of(dir.path(), None));
}

#[test]
fn a_journal_stream_that_is_not_stderr_leaves_the_log_plain_text_in_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_plain(&log_of(dir.path(), Some("1:1")));
}
