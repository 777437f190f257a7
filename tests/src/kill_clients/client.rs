//! The client a campaign kills: a process of its own that connects to rigd, opens a
//! DMA session and leases memory, a lent NVMe queue or a device whole, telling its
//! driver each phase it reaches by one byte on stdout, then waits to be killed.
//!
//! The campaign starts it as `EXE ARGS…` with `RIG_KILL_CHILD` (the [`Work`]),
//! `RIG_KILL_SOCKET`, `RIG_KILL_DEVICE` and `RIG_KILL_BLOCKS` set, and `RIG_KILL_AS`
//! (`UID:GID`) where it must drop root first (the guest's driver runs as root to read
//! /proc of rigd; its clients are a user of group rig). Phases: `c` connected
//! (`Version` answered), `s` session open, `l` leased, `h` holding. On any error it
//! prints `client: …` on stderr and exits 3: a client that ends on its own is a
//! violation of the campaign.

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::Duration,
};

use rig_client::{Client, lease::DeviceLease, queue::LentQueue, session::Session};

/// A lease's block (the pools' 2 MiB hugepages or shmem blocks).
pub const BLOCK: u64 = 2 << 20;
/// A queue client's depth: that many reads in flight while it holds.
const QUEUE_DEPTH: u32 = 32;

/// What a client does before it is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// A session on a pool; a lease of 1 to 3 blocks written through, and a buffer.
    Dma,
    /// A session on the device's pool; the device leased whole, BAR0 mapped and
    /// written, bus mastering on through the lent config region.
    Lease,
    /// A session on an NVMe controller's pool; a lent I/O queue kept full of reads.
    Queue,
}

impl Work {
    pub const ALL: [Work; 3] = [Work::Dma, Work::Lease, Work::Queue];

    pub fn name(self) -> &'static str {
        match self {
            Self::Dma => "dma",
            Self::Lease => "lease",
            Self::Queue => "queue",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|w| w.name() == name)
    }

    pub(super) fn index(self) -> usize {
        match self {
            Self::Dma => 0,
            Self::Lease => 1,
            Self::Queue => 2,
        }
    }
}

/// Runs the client when this process was started as one (`RIG_KILL_CHILD` set):
/// never returns then. Otherwise returns at once.
pub fn run_if_child() {
    let Some(work) = std::env::var_os("RIG_KILL_CHILD") else {
        return;
    };
    let r = child(&work.to_string_lossy());
    if let Err(e) = r {
        eprintln!("client: {e}");
        std::process::exit(3);
    }
    std::process::exit(0);
}

fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

fn child(work: &str) -> Result<(), String> {
    let work = Work::parse(work).ok_or_else(|| format!("no such work {work:?}"))?;
    let socket = PathBuf::from(env("RIG_KILL_SOCKET")?);
    let device = env("RIG_KILL_DEVICE")?;
    let blocks: u64 = env("RIG_KILL_BLOCKS")?
        .parse()
        .map_err(|_| "RIG_KILL_BLOCKS is not a number")?;
    if let Ok(who) = std::env::var("RIG_KILL_AS") {
        drop_root(&who)?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut client = Client::connect(&socket).await.map_err(|e| e.to_string())?;
        client.version().await.map_err(|e| e.to_string())?;
        phase(b'c');
        let s = Session::open(&socket, &device)
            .await
            .map_err(|e| format!("open a session on {device}: {e}"))?;
        phase(b's');
        match work {
            Work::Dma => dma(&s, blocks).await,
            Work::Lease => lease(&s, &device).await,
            Work::Queue => queue(&s).await,
        }
        .map_err(|e| format!("{} on {device}: {e}", work.name()))
    })
}

/// `UID:GID`: the groups become GID alone, then the ids (group first: a process
/// that is no longer root cannot change its group).
fn drop_root(who: &str) -> Result<(), String> {
    let bad = || format!("RIG_KILL_AS={who:?} is not UID:GID");
    let (uid, gid) = who.split_once(':').ok_or_else(bad)?;
    let uid = nix::unistd::Uid::from_raw(uid.parse().map_err(|_| bad())?);
    let gid = nix::unistd::Gid::from_raw(gid.parse().map_err(|_| bad())?);
    nix::unistd::setgroups(&[gid]).map_err(|e| format!("setgroups: {e}"))?;
    nix::unistd::setgid(gid).map_err(|e| format!("setgid: {e}"))?;
    nix::unistd::setuid(uid).map_err(|e| format!("setuid: {e}"))?;
    Ok(())
}

fn phase(c: u8) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&[c]);
    let _ = out.flush();
}

type Res = Result<(), Box<dyn std::error::Error>>;

async fn dma(s: &Session, blocks: u64) -> Res {
    let lease = s.lease(blocks * BLOCK).await?;
    s.write_lease(lease.id, 0, b"killed")?;
    let buf = s.alloc(4096, 4096).await?;
    buf.write(0, b"soon")?;
    phase(b'l');
    phase(b'h');
    std::future::pending::<()>().await;
    Ok(())
}

async fn lease(s: &Session, device: &str) -> Res {
    let lease = DeviceLease::open(s, device).await?;
    phase(b'l');
    let bar = lease.map_bar(0)?;
    // edu's DMA source register (QEMU docs/specs/edu.rst): a store that starts nothing.
    bar.write_u32(0x80, 0x1234_5678)?;
    lease.set_bus_master(true)?;
    phase(b'h');
    std::future::pending::<()>().await;
    Ok(())
}

async fn queue(s: &Session) -> Res {
    let mut q = LentQueue::<u64>::open(s, QUEUE_DEPTH).await?;
    phase(b'l');
    let per = 4096 >> q.namespace.lba_shift;
    let slots = u64::from(QUEUE_DEPTH);
    let data = s.alloc(slots * 4096, 4096).await?;
    let dev = data.device_address().ok_or("no device address")?.get();
    for slot in 0..slots {
        q.nvme
            .read(slot * u64::from(per), per, dev + slot * 4096, 4096, slot)?;
    }
    q.nvme.ring()?;
    phase(b'h');
    // Every completion's slot is read again: the queue stays full until the kill.
    loop {
        let mut done = Vec::new();
        let mut failed = None;
        q.nvme.reap(u32::MAX, |c| {
            if !c.status.is_success() {
                failed = Some(c.status);
            }
            done.push(c.tag);
        })?;
        if let Some(st) = failed {
            return Err(format!("a read failed: {st:?}").into());
        }
        for &slot in &done {
            q.nvme
                .read(slot * u64::from(per), per, dev + slot * 4096, 4096, slot)?;
        }
        if !done.is_empty() {
            q.nvme.ring()?;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// How the campaign starts a client: this executable, and what the client needs in
/// its environment besides its work.
#[derive(Debug, Clone)]
pub struct Launcher {
    pub exe: PathBuf,
    pub socket: PathBuf,
    /// `UID:GID` the client drops to (`RIG_KILL_AS`), if any.
    pub run_as: Option<String>,
}

impl Launcher {
    pub(super) fn command(&self, work: Work, device: &str, blocks: u64) -> std::process::Command {
        let mut c = std::process::Command::new(&self.exe);
        c.env("RIG_KILL_CHILD", work.name())
            .env("RIG_KILL_SOCKET", &self.socket)
            .env("RIG_KILL_DEVICE", device)
            .env("RIG_KILL_BLOCKS", blocks.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(who) = &self.run_as {
            c.env("RIG_KILL_AS", who);
        }
        c
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}
