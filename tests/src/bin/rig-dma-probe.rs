//! rig-dma-probe: a DMA client in a process of its own, for tests that need one (kill
//! -9, writes seen across processes). Not an interface for people.
//!
//! `rig-dma-probe SOCKET DEVICE BYTES` opens a session, allocates BYTES (4 KiB
//! aligned), writes `probe` at its start and prints one line:
//! `ready session=N lease=L offset=O device=D|-`. Then it answers commands on stdin,
//! one line each: `read OFF LEN` (prints hex), `write OFF HEX` (prints `ok`),
//! `truncate` (ftruncate(0) on the lease's first block; prints `ok` or the errno),
//! `free` (frees the buffer and gives its lease back to rigd, which unmaps it from the
//! device; prints `ok`; `read`/`write` then answer `freed`), `quit`.

use std::{
    io::{self, BufRead, Write},
    process::ExitCode,
};

use rig_client::session::{Buffer, Session};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, socket, device, bytes] = args.as_slice() else {
        eprintln!("usage: rig-dma-probe SOCKET DEVICE BYTES");
        return ExitCode::from(2);
    };
    let Ok(bytes) = bytes.parse::<u64>() else {
        eprintln!("rig-dma-probe: BYTES is not a number");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rig-dma-probe: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(socket, device, bytes)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rig-dma-probe: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(socket: &str, device: &str, bytes: u64) -> Result<(), Box<dyn std::error::Error>> {
    let session = Session::open(socket, device).await?;
    let b = session.alloc(bytes, 4096).await?;
    b.write(0, b"probe")?;
    let (lease, offset) = b.lease();
    let device = b
        .device_address()
        .map_or_else(|| "-".to_owned(), |d| format!("{:#x}", d.get()));
    let mut buf = Some(b);
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "ready session={} lease={} offset={offset} device={device}",
        session.id(),
        lease.0
    )?;
    out.flush()?;
    for line in io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match (words.as_slice(), buf.as_ref()) {
            (["read" | "write", ..], None) => "freed".to_owned(),
            (["read", off, len], Some(b)) => read(b, off, len)?,
            (["write", off, hex], Some(b)) => {
                b.write(off.parse()?, &unhex(hex)?)?;
                "ok".to_owned()
            }
            (["free"], _) => {
                if let Some(b) = buf.take() {
                    session.free(b).await?;
                    // `free` keeps an emptied block for the fast path; give it back.
                    if session.lease_fds(lease)?.is_some() {
                        session.release(lease).await?;
                    }
                }
                "ok".to_owned()
            }
            (["truncate"], _) => {
                let fds = session.lease_fds(lease)?.ok_or("lease not held")?;
                let fd = fds.first().ok_or("no descriptor")?;
                match nix::unistd::ftruncate(fd, 0) {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => format!("{e:?}"),
                }
            }
            (["quit"], _) => break,
            _ => format!("unknown command: {line}"),
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

fn read(buf: &Buffer, off: &str, len: &str) -> Result<String, Box<dyn std::error::Error>> {
    let mut data = vec![0u8; len.parse()?];
    buf.read(off.parse()?, &mut data)?;
    Ok(data.iter().map(|b| format!("{b:02x}")).collect())
}

fn unhex(hex: &str) -> Result<Vec<u8>, std::num::ParseIntError> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("x"), 16))
        .collect()
}
