//! rig-lease-client SOCKET DEVICE COMMAND: an unprivileged client that leases a held
//! edu (QEMU hw/misc/edu.c) whole and drives its DMA engine itself, through the BAR
//! and config region of the VFIO device fd rigd lent it, for the disposable machine's
//! scenarios.
//! - `dma`: leases the device, turns bus mastering on through the fd, writes a
//!   pattern into a buffer of its session, has edu copy it in (RAM → edu) and back out
//!   4 KiB further on (edu → RAM), compares, enables MSI on an eventfd of its own
//!   (VFIO_DEVICE_SET_IRQS on the lent fd) and waits for edu's completion interrupt,
//!   gives the device back;
//! - `hang`: leases, enables MSI, then keeps edu's DMA engine busy writing into its
//!   buffer, one transfer after another, and prints `dma running pid N` during the
//!   second: waits to be killed with a transfer in flight;
//! - `keep`: leases, keeps a copy of the device fd, and gives the device back: prints
//!   rigd's refusal (the copy keeps the device), then exits;
//! - `keep-map`: leases, hands the lent fd to a child process (this binary again, as
//!   its stdin) that maps BAR0 from it and then closes it: the child keeps a mapping
//!   and no descriptor. Gives the device back (rigd's holder scan sees the holder's
//!   descriptors and mappings and every process's descriptors, so it finds nothing),
//!   prints `kept by pid N` and exits; the child stays until killed, and while it
//!   lives vfio-pci's remove waits for the device file its mapping holds. rigd's
//!   holder scan finds such a child by its mapping and refuses the give-back (printed);
//! - `keep-map-beside OTHER`: as `keep-map`, but it also leases OTHER (a second
//!   session) and the child keeps OTHER's device fd (as its stderr): a process with a
//!   VFIO descriptor of another device is taken to map that one, so rigd's scan
//!   misses it (the documented gap, take::holders) and the give-back is accepted;
//!   OTHER's lease ends when this process exits, and the child keeps that one too;
//! - `try`: asks for the lease and prints the refusal (or `leased`), then exits.
//!
//! Prints `ok WHAT`, `FAIL WHAT: why` and `refused KIND: message` lines; exits 0 when
//! nothing failed. SOCKET or DEVICE `-` takes `RIG_SOCKET` / `RIG_DEVICE` from the
//! environment, as a rig CDI spec sets them in a container (docs/k8s.md; scenario
//! podman-cdi).

use std::{
    fs::File,
    io::{BufRead, BufReader},
    num::NonZeroUsize,
    os::fd::AsFd,
    process::{Command, ExitCode, Stdio},
    time::Instant,
};

use rig_client::{
    lease::{Bar, DeviceLease, LeaseError, LeaseMode},
    session::Session,
};
use rigd::vfio::EventFd;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// edu's registers (QEMU docs/specs/edu.rst): identification, DMA source,
/// destination, count, command; its internal buffer's device address.
const EDU_ID: usize = 0x00;
const EDU_DMA_SRC: usize = 0x80;
const EDU_DMA_DST: usize = 0x88;
const EDU_DMA_COUNT: usize = 0x90;
const EDU_DMA_CMD: usize = 0x98;
const EDU_BUFFER: u64 = 0x40000;
/// Command bits: start (clears when done), direction edu → RAM.
const EDU_DMA_RUN: u64 = 1;
const EDU_DMA_TO_RAM: u64 = 2;
/// Command bit: raise edu's interrupt (0x100) when done; status 0x24, acknowledge 0x64.
const EDU_DMA_IRQ: u64 = 4;
const EDU_IRQ_STATUS: usize = 0x24;
const EDU_IRQ_ACK: usize = 0x64;
/// VFIO_PCI_MSI_IRQ_INDEX (include/uapi/linux/vfio.h).
const VFIO_PCI_MSI_IRQ_INDEX: u32 = 1;
/// EFD_NONBLOCK (include/uapi/linux/eventfd.h: O_NONBLOCK on x86_64).
const EFD_NONBLOCK: i32 = 0o4000;
/// QEMU 7.2's edu aborts on a full 4096-byte transfer (docs/hardware/qemu-tier.md,
/// "edu").
const LEN: usize = 2048;

fn start(bar: &Bar<'_>, src: u64, dst: u64, to_ram: bool) -> Res<()> {
    start_with(bar, src, dst, if to_ram { EDU_DMA_TO_RAM } else { 0 })
}

fn start_with(bar: &Bar<'_>, src: u64, dst: u64, flags: u64) -> Res<()> {
    bar.write_u64(EDU_DMA_SRC, src)?;
    bar.write_u64(EDU_DMA_DST, dst)?;
    bar.write_u64(EDU_DMA_COUNT, LEN as u64)?;
    bar.write_u64(EDU_DMA_CMD, EDU_DMA_RUN | flags)?;
    Ok(())
}

/// Enables edu's MSI on an eventfd of this process, through a copy of the lent fd
/// (dropped before any give-back: a copy kept would keep the device).
fn enable_msi(lease: &DeviceLease) -> Res<EventFd> {
    let r = lease.region(0).ok_or("no BAR0 region")?;
    let fd = lease.fd(r).ok_or("no descriptor")?.try_clone_to_owned()?;
    let efd = EventFd::new(EFD_NONBLOCK)?;
    rigd::sys::vfio::set_irq_eventfds(&File::from(fd), VFIO_PCI_MSI_IRQ_INDEX, 0, &[&efd])?;
    Ok(efd)
}

/// Waits up to 5 s for `efd` to be signalled.
fn wait_irq(efd: &EventFd) -> Res<u64> {
    let t = Instant::now();
    loop {
        match efd.read() {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if t.elapsed().as_secs() >= 5 {
                    return Err("no interrupt within 5 s".into());
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits up to 5 s for the transfer to end (edu runs it off a 100 ms timer).
fn finish(bar: &Bar<'_>) -> Res<()> {
    let t = Instant::now();
    while bar.read_u64(EDU_DMA_CMD)? & EDU_DMA_RUN != 0 {
        if t.elapsed().as_secs() >= 5 {
            return Err("edu's DMA did not finish within 5 s".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
}

async fn dma(s: &Session, device: &str, seed: u8) -> Res<()> {
    let lease = DeviceLease::open(s, device).await?;
    println!(
        "ok leased {device} whole ({:?} mode, {} regions)",
        lease.mode(),
        lease.regions().len()
    );
    let vfio = lease.mode() == LeaseMode::Vfio;
    let bar = lease.map_bar(0)?;
    let id = bar.read_u32(EDU_ID)?;
    if id & 0xff != 0xed {
        return Err(format!("BAR0 identification {id:#x} is not edu's").into());
    }
    println!("ok edu answers through the lent BAR0 map ({id:#x})");
    if vfio {
        lease.set_bus_master(true)?;
        println!("ok bus mastering on through the lent config region");
    } else {
        println!("ok bus mastering on: rigd turns it on for a sysfs-mode lease");
    }
    let buf = s.alloc(2 << 20, 4096).await?;
    let addr = buf.device_address().ok_or("no device address")?.get();
    let pattern: Vec<u8> = (0..LEN)
        .map(|i| (i.to_le_bytes()[0]).wrapping_mul(7).wrapping_add(seed))
        .collect();
    buf.write(0, &pattern)?;
    start(&bar, addr, EDU_BUFFER, false)?;
    finish(&bar)?;
    start(&bar, EDU_BUFFER, addr + 0x1000, true)?;
    finish(&bar)?;
    let mut back = vec![0u8; LEN];
    buf.read(0x1000, &mut back)?;
    if back != pattern {
        return Err("the bytes edu copied back differ".into());
    }
    println!(
        "ok edu copied {LEN} bytes RAM -> edu -> RAM by device address {addr:#x}, driven by this client"
    );
    if vfio {
        let efd = enable_msi(&lease)?;
        start_with(&bar, addr, EDU_BUFFER, EDU_DMA_IRQ)?;
        let n = wait_irq(&efd)?;
        finish(&bar)?;
        bar.write_u32(EDU_IRQ_ACK, bar.read_u32(EDU_IRQ_STATUS)?)?;
        println!(
            "ok edu's completion MSI reached this client's eventfd ({n}), set up through the lent fd"
        );
    }
    drop(bar);
    let back = lease.give_back(s).await?;
    println!(
        "ok gave {device} back (reset: {})",
        back.reset.as_deref().unwrap_or("none")
    );
    drop(buf);
    Ok(())
}

async fn hang(s: &Session, device: &str) -> Res<()> {
    let lease = DeviceLease::open(s, device).await?;
    let bar = lease.map_bar(0)?;
    let _irq = if lease.mode() == LeaseMode::Vfio {
        lease.set_bus_master(true)?;
        Some(enable_msi(&lease)?)
    } else {
        None
    };
    let buf = s.alloc(2 << 20, 4096).await?;
    let addr = buf.device_address().ok_or("no device address")?.get();
    for n in 0u64.. {
        start(&bar, EDU_BUFFER, addr + 0x1000 * (n % 16), true)?;
        if n == 1 {
            // Printed with the second transfer in flight (edu takes 100 ms each).
            println!(
                "dma running pid {}: edu writes into {addr:#x} until this process dies",
                std::process::id()
            );
        }
        finish(&bar)?;
    }
    Ok(())
}

async fn keep(s: &Session, device: &str) -> Res<()> {
    let lease = DeviceLease::open(s, device).await?;
    let r = lease.region(0).ok_or("no BAR0 region")?;
    let copy = lease.fd(r).ok_or("no descriptor")?.try_clone_to_owned()?;
    println!("ok kept a copy of the lent fd, pid {}", std::process::id());
    match lease.give_back(s).await {
        Ok(_) => println!("given back"),
        Err(LeaseError::Refused { kind, message }) => println!("refused {kind:?}: {message}"),
        Err(e) => return Err(e.into()),
    }
    drop(copy);
    Ok(())
}

async fn keep_map(s: &Session, socket: &str, device: &str, beside: Option<&str>) -> Res<()> {
    let lease = DeviceLease::open(s, device).await?;
    let r = lease.region(0).ok_or("no BAR0 region")?;
    let copy = lease.fd(r).ok_or("no descriptor")?.try_clone_to_owned()?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args([
        "-",
        device,
        "map-held",
        &r.offset.to_string(),
        &r.size.to_string(),
    ])
    .stdin(Stdio::from(copy))
    .stdout(Stdio::piped());
    // Kept until this process exits: the other lease ends with its session.
    let mut _other = None;
    if let Some(o) = beside {
        let s2 = Session::open(socket, o).await?;
        let l2 = DeviceLease::open(&s2, o).await?;
        let r2 = l2.region(0).ok_or("no BAR0 region of the other device")?;
        let fd2 = l2.fd(r2).ok_or("no descriptor")?.try_clone_to_owned()?;
        println!("ok leased {o} beside it; the child keeps its device fd");
        cmd.arg("keep-stderr").stderr(Stdio::from(fd2));
        _other = Some((s2, l2));
    }
    let mut child = cmd.spawn()?;
    // The Command keeps what it was given for stdin (the lent fd's copy) until it
    // drops: this process must hold none of it when it gives the device back.
    drop(cmd);
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("no pipe")?).read_line(&mut line)?;
    print!("{line}");
    if !line.starts_with("ok ") {
        return Err("the child did not map BAR0".into());
    }
    match lease.give_back(s).await {
        Ok(_) => println!("ok gave {device} back"),
        Err(LeaseError::Refused { kind, message }) => println!("refused {kind:?}: {message}"),
        Err(e) => return Err(e.into()),
    }
    println!("kept by pid {}", child.id());
    Ok(())
}

/// The child of `keep-map`: maps `len` bytes at `offset` of the device file on its
/// stdin, puts /dev/null in place of stdin, stdout and stderr (so it holds no
/// descriptor of the device, and no pipe of its parent's), and waits to be killed.
/// With `keep_stderr`, stderr (another device's fd) is kept.
fn map_held(offset: &str, len: &str, keep_stderr: bool) -> Res<()> {
    let len = NonZeroUsize::new(len.parse()?).ok_or("empty BAR")?;
    let map = rig_sys::mman::DeviceMapping::map_at(std::io::stdin().as_fd(), offset.parse()?, len)?;
    let id = map.read_u32(EDU_ID)?;
    let null = File::options().read(true).write(true).open("/dev/null")?;
    nix::unistd::dup2_stdin(&null)?;
    println!(
        "ok child pid {} maps BAR0 (edu id {id:#x}) and has closed the device fd",
        std::process::id()
    );
    nix::unistd::dup2_stdout(&null)?;
    if !keep_stderr {
        nix::unistd::dup2_stderr(&null)?;
    }
    drop(null);
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        // Touch the mapping now and then: it is what keeps the device file.
        let _ = map.read_u32(EDU_ID);
    }
}

async fn attempt(s: &Session, device: &str) -> Res<()> {
    match DeviceLease::open(s, device).await {
        Ok(_) => println!("leased"),
        Err(LeaseError::Refused { kind, message }) => println!("refused {kind:?}: {message}"),
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, socket, device, command, rest @ ..] = args.as_slice() else {
        eprintln!(
            "usage: rig-lease-client SOCKET DEVICE dma [SEED] | hang | keep | keep-map | keep-map-beside OTHER | try"
        );
        return ExitCode::from(2);
    };
    if let ("map-held", [offset, len, keep @ ..]) = (command.as_str(), rest) {
        return match map_held(
            offset,
            len,
            keep.first().is_some_and(|k| k == "keep-stderr"),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                println!("FAIL map-held: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let from_env = |arg: &String, var: &str| {
        if arg == "-" {
            std::env::var(var).ok()
        } else {
            Some(arg.clone())
        }
    };
    let (Some(socket), Some(device)) = (
        from_env(socket, "RIG_SOCKET"),
        from_env(device, "RIG_DEVICE"),
    ) else {
        println!("FAIL - given for SOCKET or DEVICE, but RIG_SOCKET or RIG_DEVICE is not set");
        return ExitCode::from(2);
    };
    if args[1] == "-" || args[2] == "-" {
        println!("ok from the environment: RIG_SOCKET={socket} RIG_DEVICE={device}");
    }
    let (socket, device) = (socket.as_str(), device.as_str());
    let s = match Session::open(socket, device).await {
        Ok(s) => s,
        Err(e) => {
            println!("FAIL open a DMA session on {device}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let r = match command.as_str() {
        "dma" => {
            let seed = rest.first().and_then(|s| s.parse().ok()).unwrap_or(3);
            dma(&s, device, seed).await
        }
        "hang" => hang(&s, device).await,
        "keep" => keep(&s, device).await,
        "keep-map" => keep_map(&s, socket, device, None).await,
        "keep-map-beside" => match rest.first() {
            Some(other) => keep_map(&s, socket, device, Some(other)).await,
            None => Err("keep-map-beside needs the other device".into()),
        },
        "try" => attempt(&s, device).await,
        other => Err(format!("unknown command {other}").into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("FAIL {command}: {e}");
            ExitCode::FAILURE
        }
    }
}
