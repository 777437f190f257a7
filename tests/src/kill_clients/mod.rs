//! Campaign: clients killed by the thousand (docs/RELIABILITY.md). Each cycle starts a
//! client process ([`client`]) that connects to rigd, opens a DMA session and leases
//! memory, a lent NVMe queue or a device whole, and SIGKILLs it at a seeded random
//! instant (before it connects, while it connects, with its session open, leased,
//! holding); then reaps it and times the reclaim: from the kill until rigd shows
//! nothing of the pid any more. rigd's use is read after the warm-up and after the
//! campaign, and [`Verdict`] judges the two against each other.
//!
//! Two places run it, through an [`Observer`] each: `tests/tests/clients_killed.rs`
//! against rigd's service over the fake kernel in the test's own process (CI, 1,000
//! cycles), and `rig-kill-clients` against the disposable machine's rigd over real
//! VFIO and an emulated IOMMU (scenario clients-killed). docs/RELIABILITY.md has the
//! commands and the last results.
//!
//! Not here: rigd itself (the fake server is the test's, the guest's rigd the
//! scenario's), and how usage is read (`observe`).

pub mod client;
pub mod observe;
mod verdict;

use std::{
    io::Read,
    os::fd::AsFd,
    process::ChildStdout,
    time::{Duration, Instant},
};

use nix::{sys::signal, unistd::Pid};

pub use client::{BLOCK, Launcher, Work, run_if_child};
pub use observe::{Observer, ProcUsage, Process, RpcCounts, Rpcs, Usage};
pub use verdict::{Limits, Verdict, percentile};

/// splitmix64: a seeded generator small enough to state here, so a seed replays the
/// same choices on any machine.
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// The latest instant a kill may land, from a client's start.
#[derive(Debug, Clone, Copy)]
pub enum Delays {
    /// The same for every work.
    Fixed(Duration),
    /// Per work: the warm-up clients' median time to holding, times this many
    /// percent (past 100, so that kills fall in every phase however slow or loaded
    /// the machine: under TCG a client takes hundreds of milliseconds to get there,
    /// on a host a few tens when other builds share its cores).
    Calibrated { percent: u32 },
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub cycles: u64,
    pub seed: u64,
    /// What the clients do, on which device (the session's pool; the device leased
    /// whole), and how often against the others (a weight).
    pub works: Vec<(Work, String, u64)>,
    /// Warm-up cycles per work before the baseline, each client run to holding
    /// and then killed: tokio's blocking threads, tonic's buffers and the allocator's
    /// arenas reach their working size.
    pub warmup: u32,
    pub delays: Delays,
    /// Between two looks at whether a killed pid's things are reclaimed.
    pub poll: Duration,
    /// Before usage is read: rigd finishes what the last kill started.
    pub settle: Duration,
    pub limits: Limits,
    /// A progress line every this many cycles (0: none).
    pub progress_every: u64,
}

/// Runs the campaign: the warm-up, the baseline, `plan.cycles` kills, the usage after.
pub fn run(plan: &Plan, launcher: &Launcher, obs: &dyn Observer) -> Verdict {
    let mut v = Verdict::new(plan.cycles, plan.seed, plan.limits);
    let mut to_holding: [Vec<Duration>; 3] = Default::default();
    for _ in 0..plan.warmup {
        for (work, device, _) in &plan.works {
            let c = cycle(plan, launcher, obs, (*work, device, 1), Kill::AtHolding);
            if let Some(t) = c.to_holding {
                to_holding[work.index()].push(t);
            }
            if let Some(e) = c.error {
                v.client_errors.push(format!("warm-up: {e}"));
            }
        }
    }
    for (work, _, _) in &plan.works {
        v.latest_kill[work.index()] = Some(match plan.delays {
            Delays::Fixed(d) => d,
            Delays::Calibrated { percent } => {
                percentile(&to_holding[work.index()], 0.5) * percent / 100
            }
        });
    }
    v.baseline = settled(plan, obs);
    let weights: u64 = plan.works.iter().map(|w| w.2).sum();
    let mut rng = Rng(plan.seed);
    let start = Instant::now();
    for i in 0..plan.cycles {
        let mut pick = rng.below(weights);
        let (work, device, _) = plan
            .works
            .iter()
            .find(|w| {
                let hit = pick < w.2;
                pick = pick.saturating_sub(w.2);
                hit
            })
            .expect("a pick below the weights' sum falls on a work");
        let blocks = 1 + rng.below(3);
        let latest = v.latest_kill[work.index()].unwrap_or_default();
        let latest_us = u64::try_from(latest.as_micros()).unwrap_or(u64::MAX);
        let delay = Duration::from_micros(rng.below(latest_us));
        let c = cycle(
            plan,
            launcher,
            obs,
            (*work, device, blocks),
            Kill::After(delay),
        );
        v.count(*work, &c, i);
        if plan.progress_every > 0 && (i + 1) % plan.progress_every == 0 {
            println!("kill_clients: {} cycles done", i + 1);
        }
    }
    v.took = start.elapsed();
    v.after = settled(plan, obs);
    v
}

fn settled(plan: &Plan, obs: &dyn Observer) -> Usage {
    std::thread::sleep(plan.settle);
    obs.usage()
}

/// When the client is killed.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// This long after its start.
    After(Duration),
    /// Once it says it holds (or after the give-up time).
    AtHolding,
}

/// One cycle's outcome.
#[derive(Debug)]
pub(crate) struct Cycle {
    /// Phases the client reached: 0 none, 1 connected, 2 session, 3 leased, 4 holding.
    pub phase: usize,
    pub reclaim: Option<Duration>,
    pub error: Option<String>,
    /// Whether the error is a reclaim past the give-up time.
    pub stuck: bool,
    /// From its start to its "holding" byte, where the cycle waited for it.
    pub to_holding: Option<Duration>,
}

fn cycle(
    plan: &Plan,
    launcher: &Launcher,
    obs: &dyn Observer,
    (work, device, blocks): (Work, &str, u64),
    kill: Kill,
) -> Cycle {
    let started = Instant::now();
    let mut child = launcher
        .command(work, device, blocks)
        .spawn()
        .expect("start a client");
    let mut out = Vec::new();
    let mut to_holding = None;
    match kill {
        Kill::After(delay) => std::thread::sleep(delay),
        Kill::AtHolding => {
            let stdout = child.stdout.as_mut().expect("a piped stdout");
            if read_until_holding(stdout, &mut out, plan.limits.give_up) {
                to_holding = Some(started.elapsed());
            }
        }
    }
    let pid = i32::try_from(child.id()).expect("a pid");
    let _ = signal::kill(Pid::from_raw(pid), signal::Signal::SIGKILL);
    let killed = Instant::now();
    let status = child.wait().expect("reap the client");
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_end(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let phase = out.len().min(4);
    let mut error = status.code().is_some().then(|| {
        format!(
            "{} client on {device} exited {status}: {}",
            work.name(),
            err.trim()
        )
    });
    // Reclaim: from the kill until rigd holds nothing for the pid. A client killed
    // before its first request reached rigd has nothing to reclaim.
    let held = obs.holds_for(pid);
    let mut reclaim = None;
    if held {
        while killed.elapsed() <= plan.limits.give_up {
            if !obs.holds_for(pid) {
                reclaim = Some(killed.elapsed());
                break;
            }
            std::thread::sleep(plan.poll);
        }
    } else if phase >= 2 {
        // Already gone by the first look: reclaimed within that look.
        reclaim = Some(killed.elapsed());
    }
    let stuck = held && reclaim.is_none();
    if stuck && error.is_none() {
        error = Some(format!(
            "{} client (pid {pid}, phase {phase}) still held {} s after its kill",
            work.name(),
            plan.limits.give_up.as_secs()
        ));
    }
    Cycle {
        phase,
        reclaim,
        error,
        stuck,
        to_holding,
    }
}

/// Reads the client's phase bytes into `out` until its `h` (true), its end, or
/// `limit` (false).
fn read_until_holding(stdout: &mut ChildStdout, out: &mut Vec<u8>, limit: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let t = Instant::now();
    while !out.contains(&b'h') {
        let Some(left) = limit.checked_sub(t.elapsed()) else {
            return false;
        };
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
        let mut buf = [0u8; 8];
        match stdout.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    true
}
