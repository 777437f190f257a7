//! What a campaign reads of rigd: its process's figures from /proc (RSS, anonymous
//! RSS, open fds, threads) and what an operator sees through rigd's RPCs (sessions,
//! leased blocks, lent queues, whole-device lease holders), and whether rigd still
//! holds anything for a killed client's pid.
//!
//! [`Observer`] is the campaign's view: over the fake kernel rigd is the test process
//! itself (/proc/self, and the fake IOMMU's mappings beside the RPCs); in the
//! disposable machine it is /proc/<rigd's pid> and the RPCs alone ([`Rpcs`]).

use std::path::{Path, PathBuf};

use rig_client::Client;

/// What the campaign needs of rigd.
pub trait Observer {
    /// Whether rigd still holds anything for `pid`: a session, a lent queue, a
    /// device's lease.
    fn holds_for(&self, pid: i32) -> bool;
    /// rigd's use of what a killed client could leak, now.
    fn usage(&self) -> Usage;
}

/// rigd's process, from /proc/<pid>/status and /proc/<pid>/fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcUsage {
    pub rss_kib: u64,
    pub rss_anon_kib: u64,
    pub fds: usize,
    pub threads: u64,
}

impl ProcUsage {
    /// Reads `proc` (`/proc/self` or `/proc/<pid>`).
    ///
    /// # Panics
    /// When the process is gone or /proc lacks a field: the campaign cannot go on.
    pub fn read(proc: &Path) -> Self {
        let text = std::fs::read_to_string(proc.join("status"))
            .unwrap_or_else(|e| panic!("{}/status: {e}", proc.display()));
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} in {}/status", proc.display()))
        };
        let (rss_kib, rss_anon_kib, threads) =
            (field("VmRSS:"), field("RssAnon:"), field("Threads:"));
        let fds = std::fs::read_dir(proc.join("fd"))
            .unwrap_or_else(|e| panic!("{}/fd: {e}", proc.display()))
            .count();
        Self {
            rss_kib,
            rss_anon_kib,
            fds,
            threads,
        }
    }
}

/// What an operator sees through rigd's RPCs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RpcCounts {
    /// `Dma.Status`: sessions open.
    pub sessions: usize,
    /// `Dma.Status`: blocks leased, summed over the pools.
    pub leased_blocks: u32,
    /// `Queues.Status`: queues lent.
    pub queues: usize,
    /// `Status`: devices leased whole.
    pub lease_holders: usize,
}

/// rigd's use: its process and its RPCs, and figures only one side has (the fake
/// IOMMU's mappings over the fake kernel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    pub proc: ProcUsage,
    pub rpc: RpcCounts,
    /// Figures that must come back to their baseline: (name, value).
    pub extra: Vec<(&'static str, u64)>,
    /// Figures shown, not judged: (name, value).
    pub shown: Vec<(&'static str, u64)>,
}

/// rigd's RPCs, on connections kept open (a poll every few milliseconds would
/// otherwise be a connection each).
#[derive(Debug)]
pub struct Rpcs {
    rt: tokio::runtime::Runtime,
    socket: PathBuf,
    dma: Client,
    status: Client,
}

impl Rpcs {
    /// Connects to rigd at `socket`.
    ///
    /// # Errors
    /// The connection's error, as a line.
    pub fn connect(socket: &Path) -> Result<Self, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let (dma, status) = rt.block_on(async {
            let dma = Client::connect(socket).await.map_err(|e| e.to_string())?;
            let status = Client::connect(socket).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((dma, status))
        })?;
        Ok(Self {
            rt,
            socket: socket.to_owned(),
            dma,
            status,
        })
    }

    /// The socket these connections reach.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sessions, leased blocks, lent queues and lease holders now.
    ///
    /// # Panics
    /// When rigd does not answer: the campaign's verdict needs these.
    pub fn counts(&mut self) -> RpcCounts {
        let (dma, status) = (&mut self.dma, &mut self.status);
        self.rt.block_on(async {
            let d = dma.dma_status().await.expect("Dma.Status");
            let q = dma.queues().await.expect("Queues.Status");
            let s = status.status().await.expect("Status");
            RpcCounts {
                sessions: d.clients.len(),
                leased_blocks: d.pools.iter().map(|p| p.leased_blocks).sum(),
                queues: q.len(),
                lease_holders: s.devices.iter().filter(|d| d.lease.is_some()).count(),
            }
        })
    }

    /// Whether any of the three RPCs shows something of `pid`: its session first
    /// (what a kill ends first), then its queues and device leases. An RPC that
    /// fails counts as "still held" (the caller retries until its limit).
    pub fn holds_for(&mut self, pid: i32) -> bool {
        let (dma, status) = (&mut self.dma, &mut self.status);
        self.rt.block_on(async {
            let Ok(d) = dma.dma_status().await else {
                return true;
            };
            if d.clients.iter().any(|c| c.pid == pid) {
                return true;
            }
            let Ok(q) = dma.queues().await else {
                return true;
            };
            if q.iter().any(|q| q.pid == pid) {
                return true;
            }
            let Ok(s) = status.status().await else {
                return true;
            };
            s.devices
                .iter()
                .any(|d| d.lease.as_ref().is_some_and(|l| l.pid == pid))
        })
    }
}

/// The disposable machine's rigd: another process, seen through /proc/<pid> and
/// its RPCs.
#[derive(Debug)]
pub struct Process {
    proc: PathBuf,
    rpcs: std::sync::Mutex<Rpcs>,
}

impl Process {
    pub fn new(pid: i32, rpcs: Rpcs) -> Self {
        Self {
            proc: PathBuf::from(format!("/proc/{pid}")),
            rpcs: std::sync::Mutex::new(rpcs),
        }
    }
}

impl Observer for Process {
    fn holds_for(&self, pid: i32) -> bool {
        self.rpcs.lock().expect("rpcs").holds_for(pid)
    }

    fn usage(&self) -> Usage {
        // The process's own figures first: the RPCs' connections are kept open, so
        // reading them opens nothing new in rigd.
        let proc = ProcUsage::read(&self.proc);
        let rpc = self.rpcs.lock().expect("rpcs").counts();
        Usage {
            proc,
            rpc,
            extra: Vec::new(),
            shown: Vec::new(),
        }
    }
}
