//! Campaign: rigd killed at random during resizes (docs/RELIABILITY.md, "During
//! resizes, over the fake kernel"). No emulated device has a Resizable BAR
//! (docs/hardware/qemu-tier.md, "Resizable BAR"), so this runs over the fake kernel on
//! the host, with rigd as a real process that really gets SIGKILL: this binary re-run
//! with `RIG_RESIZE_SERVE` set is rigd (its whole service through
//! `rigd::testing::Serving` over a fake tree on disk,
//! `rigd::testing::FakeWorld::persistent`, its journal in a state dir on disk; it runs
//! recovery at start, as rigd's main does). The tree holds one GPU on nvidia whose BAR2
//! has a Resizable BAR capability offering 256M to 8G; the fake kernel honours the
//! sizes (config's control register and `resource`), takes `RIG_RESIZE_STEP_MS` for
//! each unbind, probe and resize (so kills land in the middle of steps), lets nvidia
//! turn bus mastering on at probe and off at remove as a driver does, and, in one start
//! of three, its bridge window has no room for 8G (ENOSPC; rigd falls back).
//!
//! Per kill: a fresh rigd starts over the same tree and state dir (recovery from the
//! journal); a client asks it for one operation chosen by a seeded generator (not
//! held: detach in vfio or sysfs mode with the BAR resized to max; held: resize to a
//! size, resize back to 256M, give back, reset); after a seeded random delay the rigd
//! process gets SIGKILL; the journal's record says which step was under way. Then a
//! new rigd starts, and the invariants are read from the tree and from rigd's RPCs:
//! recovery left nothing "as it is" (no error loop: the next start would meet it
//! again); the GPU is held (bound to vfio-pci, or driverless with rig's override) or
//! back on nvidia with driver_override clear and nvidia's bus mastering untouched;
//! never driverless with bus mastering on; BAR2's size in `resource` equals the
//! control register's, is one the device offers, and is what `GetDevice` and
//! `Status` report; the journal decodes and has a record exactly when rigd holds
//! the GPU. At the end whatever is held is given back, and the GPU must be on nvidia.
//!
//! What survives a kill here is what survives in a real kernel: the tree on disk
//! (bindings, driver_override, config space, `resource`) and what the fake keeps
//! under `sys/fake-kernel/` (`FakeKernel::persistent`: which driver matches the GPU,
//! enable counts, a resize in flight). What dies with rigd's process is also what
//! dies with it in a real one: its VFIO fds and the fake kernel's call log.
//!
//! ```text
//! cargo test -p rig-client --test resize_killed                  # 20 kills (CI)
//! RIG_RESIZE_KILLS=100 cargo test -p rig-client --test resize_killed
//! RIG_RESIZE_SEED=N ...                                           # replays run N
//! ```
//!
//! A harness-less test: one binary is the campaign, the clients (tasks of its own)
//! and, re-run, each rigd.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::{Duration, Instant},
};

use nix::{sys::signal, unistd::Pid};
use rig_client::{BarSize, Client, DetachRequest, Mode as ClientMode, ResetMethod};
use rigd::{
    pci::{Bdf, SysfsRoot},
    take::{Journal, SYSFS_MODE_OVERRIDE},
    testing::{FakeDevice, FakeSysfs, FakeWorld, Serving},
};

const GPU: &str = "0000:03:00.0";
const BAR: u8 = 2;
/// BAR2's sizes (size codes 8 to 13), and the one it starts with.
const SIZES: [u64; 6] = [256 << 20, 512 << 20, 1 << 30, 2 << 30, 4 << 30, 8 << 30];
const ORIGINAL: u64 = 256 << 20;
/// The Resizable BAR capability's offset and its BAR2 control register.
const REBAR: usize = 0x100;
const REBAR_CTRL: usize = REBAR + 8;
/// Each unbind, probe and resize in the fake kernel.
const STEP_MS: u64 = 40;
/// How long a rigd may take to start and recover.
const START_LIMIT: Duration = Duration::from_secs(30);

fn main() {
    if let Some(dir) = std::env::var_os("RIG_RESIZE_SERVE") {
        serve(Path::new(&dir));
        return;
    }
    if std::env::args().any(|a| a == "--list") {
        println!("campaign: test");
        return;
    }
    let kills = env_u64("RIG_RESIZE_KILLS").unwrap_or(20);
    let seed = env_u64("RIG_RESIZE_SEED").unwrap_or_else(|| {
        u64::from(std::process::id()) << 32
            ^ u64::from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .expect("after the epoch")
                    .subsec_nanos(),
            )
    });
    println!("resize_killed: {kills} kills, RIG_RESIZE_SEED={seed}");
    let tally = campaign(kills, seed);
    println!("{tally}");
    if !tally.violations.is_empty() {
        eprintln!("resize_killed: FAILED (replay with RIG_RESIZE_SEED={seed})");
        std::process::exit(1);
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

/// splitmix64, as the other campaigns: a seed replays the same run anywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---------------------------------------------------------------------------------
// The world on disk, and rigd over it.

/// The GPU: BAR0 16M, BAR2 256M resizable to 8G, bus mastering on (nvidia's), FLR.
fn gpu() -> FakeDevice {
    let sizes: u32 = (8..=13).map(|n| 1u32 << (n + 4)).sum();
    let mut d = FakeDevice::new(GPU, 0x10de, 0x2335, 0x030200)
        .with_bar64(0, 0xa000_0000, 16 << 20, false)
        .with_bar64(2, 0x1_0000_0000, ORIGINAL, true)
        .with_bytes(0x04, &[0x06, 0x00])
        // Resizable BAR (PCIe Base 6.0 §7.8.6): one entry, BAR2, sizes 256M..8G,
        // current size code 8 (256M).
        .with_bytes(REBAR, &0x0001_0015u32.to_le_bytes())
        .with_bytes(REBAR + 4, &sizes.to_le_bytes())
        .with_bytes(REBAR_CTRL, &(2u32 | (1 << 5) | (8 << 8)).to_le_bytes())
        .with_driver("nvidia")
        .in_group(5)
        .with_attr("reset_method", "flr bus");
    d.resize_files = vec![BAR];
    d
}

/// rigd: recovery, then the service, until stdin closes or SIGKILL.
fn serve(dir: &Path) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut world =
            FakeWorld::persistent(dir, &["nvidia", "vfio-pci"]).expect("the fake kernel");
        world.config.take.allow_sysfs_mode = true;
        world.config.dma.pool_bytes = 2 << 20;
        {
            let mut s = world.kernel.script.lock().expect("script");
            s.step_delay = Some(Duration::from_millis(
                env_u64("RIG_RESIZE_STEP_MS").unwrap_or(STEP_MS),
            ));
            s.drivers_master = true;
            if std::env::var("RIG_RESIZE_NO_ROOM").as_deref() == Ok("1") {
                s.resize_errno.insert(13, nix::libc::ENOSPC);
            }
        }
        let (rig, _) = world.rig();
        let rig = Arc::new(rig);
        rig.recover();
        let serving = Serving::start(Arc::clone(&rig), &dir.join("rigd.sock"), None);
        println!("ready");
        tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).is_ok_and(|n| n > 0) {}
        })
        .await
        .expect("stdin");
        let _ = serving.stop(Duration::from_secs(5)).await;
    });
}

/// One rigd process.
struct Rigd {
    child: Child,
}

impl Rigd {
    fn start(dir: &Path, no_room: bool, n: u64) -> Result<Self, String> {
        let log =
            std::fs::File::create(dir.join(format!("rigd-{n}.log"))).map_err(|e| e.to_string())?;
        let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
            .env("RIG_RESIZE_SERVE", dir)
            .env("RIG_RESIZE_NO_ROOM", if no_room { "1" } else { "0" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("start rigd: {e}"))?;
        let out = child.stdout.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        match rx.recv_timeout(START_LIMIT) {
            Ok(l) if l == "ready" => Ok(Self { child }),
            other => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!(
                    "rigd {n} did not come up within {START_LIMIT:?} ({other:?}; see rigd-{n}.log)"
                ))
            }
        }
    }

    fn kill(mut self) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("a pid"));
        let _ = signal::kill(pid, signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }

    /// Closes its stdin: a clean exit.
    fn stop(mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------
// The operations a client asks for.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Detach(ClientMode),
    ResizeTo(u64),
    ResizeBack,
    GiveBack,
    Reset,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Self::Detach(ClientMode::Vfio) => "detach vfio + resize max",
            Self::Detach(ClientMode::Sysfs) => "detach sysfs + resize max",
            Self::ResizeTo(_) => "resize to a size",
            Self::ResizeBack => "resize back",
            Self::GiveBack => "give back",
            Self::Reset => "reset",
        }
    }

    /// An operation for the state the last check saw: a take when the GPU is not
    /// held, else one of the four on a held device (a resize always to another size).
    fn pick(rng: &mut Rng, seen: &Seen) -> Self {
        if seen.held.is_none() {
            return Self::Detach(if rng.below(2) == 0 {
                ClientMode::Vfio
            } else {
                ClientMode::Sysfs
            });
        }
        let other: Vec<u64> = SIZES
            .into_iter()
            .filter(|&s| s != seen.bar_size && s != ORIGINAL)
            .collect();
        let to = other[usize::try_from(rng.below(other.len() as u64)).expect("small")];
        // Resizes three times in five.
        match rng.below(5) {
            2 if seen.bar_size != ORIGINAL => Self::ResizeBack,
            0..=2 => Self::ResizeTo(to),
            3 => Self::GiveBack,
            _ => Self::Reset,
        }
    }

    /// The latest a kill lands after the request: about as long as the operation
    /// takes here (a step is `STEP_MS`; a detach has 3 to 5 of them, a resize of a
    /// held device 1 to 3, a give-back 2, a reset none), so most kills land inside
    /// it and some after.
    fn max_delay_ms(self) -> u64 {
        match self {
            Self::Detach(_) => 220,
            Self::ResizeTo(_) | Self::ResizeBack => 160,
            Self::GiveBack => 140,
            Self::Reset => 40,
        }
    }

    async fn run(self, socket: &Path, last: &Mutex<String>) -> Result<(), String> {
        let mut c = Client::connect(socket).await.map_err(|e| e.to_string())?;
        let mut step = |s: &rig_client::Step| {
            *last.lock().expect("last step") = s.text.clone();
        };
        let r = match self {
            Self::Detach(mode) => {
                let req = DetachRequest {
                    bdf: GPU.into(),
                    mode: Some(mode),
                    bar_size: Some(BarSize::Max),
                    ..DetachRequest::default()
                };
                c.detach(&req, &mut step).await
            }
            Self::ResizeTo(size) => c.resize(GPU, BAR, BarSize::Bytes(size), &mut step).await,
            Self::ResizeBack => {
                c.resize(GPU, BAR, BarSize::Bytes(ORIGINAL), &mut step)
                    .await
            }
            Self::GiveBack => c.attach(GPU, &mut step).await,
            Self::Reset => c.reset(GPU, ResetMethod::Auto, &mut step).await,
        };
        r.map(|_| ()).map_err(|e| rig_client::error_line(&e))
    }
}

// ---------------------------------------------------------------------------------
// The invariants, after each start.

/// What one check saw.
struct Seen {
    /// rigd holds the GPU, in this mode.
    held: Option<ClientMode>,
    /// BAR2's size in the tree.
    bar_size: u64,
}

fn read_u16(cfg: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([cfg[at], cfg[at + 1]])
}

/// Reads the tree and asks rigd; pushes a line for each invariant broken.
async fn check(dir: &Path, violations: &mut Vec<String>, when: &str) -> Seen {
    let mut bad = |what: String| violations.push(format!("{when}: {what}"));
    let bdf: Bdf = GPU.parse().expect("address");
    let root = SysfsRoot::new(dir.join("sys"));
    let socket = dir.join("rigd.sock");
    let (status, device) = match Client::connect(&socket).await {
        Ok(mut c) => {
            let status = c.status().await.map_err(|e| e.to_string());
            let device = c.device(GPU).await.map_err(|e| e.to_string());
            (status, device)
        }
        Err(e) => (Err(e.to_string()), Err(e.to_string())),
    };
    let status = status.unwrap_or_else(|e| {
        bad(format!("Status failed: {e}"));
        rig_client::Status::default()
    });
    for line in &status.recovered {
        if line.contains("left as it is") {
            bad(format!("recovery failed: {line}"));
        }
    }
    let held_view = status.devices.iter().find(|d| d.bdf == GPU);
    let held = held_view.and_then(|d| d.mode);
    let driver = root.link_name(bdf, "driver");
    let over = root
        .read_attr(bdf, "driver_override")
        .ok()
        .flatten()
        .unwrap_or_default();
    let (cfg, _) = root.read_config(bdf).expect("config");
    let master = read_u16(&cfg, 4) & 0x4 != 0;
    if driver.is_none() && master {
        bad("driverless with bus mastering on".into());
    }
    match (held, held_view.is_some(), driver.as_deref()) {
        (Some(ClientMode::Vfio), _, Some("vfio-pci")) => {}
        (Some(ClientMode::Sysfs), _, None) if over == SYSFS_MODE_OVERRIDE => {}
        (None, false, Some("nvidia")) => {
            if over != "(null)" {
                bad(format!("on nvidia with driver_override `{over}`"));
            }
            if !master {
                bad("on nvidia with its bus mastering cleared under it".into());
            }
        }
        (mode, listed, d) => bad(format!(
            "neither held nor back on nvidia: rigd holds it {mode:?} (listed: {listed}), driver {d:?}, override `{over}`"
        )),
    }
    // BAR2: the control register's size, `resource`'s, and what rigd reports.
    let code =
        (u32::from_le_bytes(cfg[REBAR_CTRL..REBAR_CTRL + 4].try_into().expect("4")) >> 8) & 0x3f;
    let ctrl_size = 1u64 << (code + 20);
    let res = root.read_resources(bdf).expect("resource");
    let bar_size = res[usize::from(BAR)].size();
    if !SIZES.contains(&ctrl_size) || bar_size != ctrl_size {
        bad(format!(
            "BAR2 is {bar_size} bytes in `resource` and {ctrl_size} in its control register"
        ));
    }
    match device {
        Ok(d) => {
            let reported = d.bars.iter().find(|b| b.index == BAR);
            let sizes = reported.map(|b| (b.size, b.resizable_current));
            if sizes != Some((bar_size, Some(bar_size))) {
                bad(format!(
                    "GetDevice reports BAR2 as {sizes:?}; the tree: {bar_size}"
                ));
            }
        }
        Err(e) => bad(format!("GetDevice failed: {e}")),
    }
    if let Some(v) = held_view {
        let reported = v.bars.iter().find(|b| b.index == BAR).map(|b| b.size);
        if reported != Some(bar_size) {
            bad(format!(
                "Status reports BAR2 as {reported:?}; the tree: {bar_size}"
            ));
        }
    }
    // The journal: decodes, and holds a record exactly when rigd holds the device.
    let (records, errors) = Journal::new(&dir.join("state")).load();
    for e in errors {
        bad(format!("journal: {}", rig_client::error_line(&e)));
    }
    let recorded = records.iter().any(|r| r.bdf == bdf);
    if recorded != held_view.is_some() {
        bad(format!(
            "journal has {} record for the GPU; rigd {} it",
            if recorded { "a" } else { "no" },
            if held_view.is_some() {
                "holds"
            } else {
                "does not hold"
            }
        ));
    }
    Seen { held, bar_size }
}

// ---------------------------------------------------------------------------------
// The campaign.

#[derive(Default)]
struct Tally {
    seed: u64,
    kills: u64,
    recoveries: u64,
    /// Journal phase at the kill ("none": no record, the GPU not rig's).
    at_kill: BTreeMap<String, u64>,
    ops: BTreeMap<&'static str, u64>,
    /// Operations that had answered before the kill.
    finished: u64,
    /// After the restart: held in vfio / sysfs mode, on nvidia.
    after: BTreeMap<&'static str, u64>,
    bar_sizes: BTreeMap<u64, u64>,
    /// Kills inside a resize of a held device: BAR2 after the restart at the size
    /// asked for, or still at the one before.
    resize_landed: BTreeMap<&'static str, u64>,
    violations: Vec<String>,
    took: Duration,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "operations: {:?}", self.ops)?;
        writeln!(f, "answered before the kill: {}", self.finished)?;
        writeln!(f, "step at the kill (journal): {:?}", self.at_kill)?;
        writeln!(f, "after the restart: {:?}", self.after)?;
        let sizes: Vec<String> = self
            .bar_sizes
            .iter()
            .map(|(s, n)| format!("{}M {n}", s >> 20))
            .collect();
        writeln!(f, "BAR2 after the restarts: {}", sizes.join(", "))?;
        writeln!(
            f,
            "kills inside a held device's resize, BAR2 after: {:?}",
            self.resize_landed
        )?;
        for v in self.violations.iter().take(20) {
            writeln!(f, "VIOLATION {v}")?;
        }
        write!(
            f,
            "RESULT kills={} recoveries={} violations={} seed={} took={:.1}s",
            self.kills,
            self.recoveries,
            self.violations.len(),
            self.seed,
            self.took.as_secs_f64()
        )
    }
}

fn phase_now(dir: &Path) -> String {
    let (records, errors) = Journal::new(&dir.join("state")).load();
    match (records.first(), errors.first()) {
        (Some(r), _) => r.phase.to_string(),
        (None, Some(_)) => "undecodable".into(),
        (None, None) => "none".into(),
    }
}

fn campaign(kills: u64, seed: u64) -> Tally {
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let fake = FakeSysfs::new(&dir.join("sys")).expect("fake sysfs");
    fake.add(&gpu()).expect("gpu");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut rng = Rng(seed);
    let mut t = Tally {
        seed,
        ..Tally::default()
    };
    let mut rigd = Rigd::start(dir, false, 0).expect("the first rigd");
    let mut seen = rt.block_on(check(dir, &mut t.violations, "at the start"));
    for k in 1..=kills {
        let op = Op::pick(&mut rng, &seen);
        let size_before = seen.bar_size;
        let delay = Duration::from_millis(rng.below(op.max_delay_ms()));
        *t.ops.entry(op.name()).or_default() += 1;
        let last = Arc::new(Mutex::new(String::new()));
        let socket = dir.join("rigd.sock");
        let l = Arc::clone(&last);
        // A thread of its own: the client's calls take a step callback that is not
        // Send, so they run on a runtime of their own.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("client runtime");
            let _ = tx.send(rt.block_on(op.run(&socket, &l)));
        });
        std::thread::sleep(delay);
        let early = rx.try_recv().ok();
        let answered = early.is_some();
        rigd.kill();
        t.kills += 1;
        t.finished += u64::from(answered);
        let at = phase_now(dir);
        *t.at_kill.entry(at.clone()).or_default() += 1;
        // The client's call ends with its rigd (a reply, or the connection gone).
        let reply = match early.map_or_else(|| rx.recv_timeout(Duration::from_secs(10)), Ok) {
            Ok(r) => r,
            Err(_) => {
                t.violations.push(format!(
                    "kill {k}: the client's {} hung after rigd died",
                    op.name()
                ));
                Err("hung".into())
            }
        };
        let no_room = rng.below(3) == 0;
        rigd = match Rigd::start(dir, no_room, k) {
            Ok(r) => r,
            Err(e) => {
                t.violations.push(format!("kill {k}: {e}"));
                t.took = started.elapsed();
                keep_if_failed(tmp, &t);
                return t;
            }
        };
        let before = t.violations.len();
        seen = rt.block_on(check(dir, &mut t.violations, &format!("kill {k}")));
        if t.violations.len() == before {
            t.recoveries += 1;
        }
        *t.after
            .entry(match seen.held {
                Some(ClientMode::Vfio) => "held vfio",
                Some(ClientMode::Sysfs) => "held sysfs",
                None => "on nvidia",
            })
            .or_default() += 1;
        *t.bar_sizes.entry(seen.bar_size).or_default() += 1;
        let asked = match op {
            Op::ResizeTo(s) => Some(s),
            Op::ResizeBack => Some(ORIGINAL),
            _ => None,
        };
        if let Some(asked) = asked
            && at.starts_with("resizing")
        {
            let landed = match seen.bar_size {
                s if s == asked => "the size asked for",
                s if s == size_before => "the size before",
                _ => "another size",
            };
            *t.resize_landed.entry(landed).or_default() += 1;
        }
        let step = last.lock().expect("last step").clone();
        println!(
            "kill {k}: {} after {} ms ({}; journal: {at}; last step: {step}) -> {}",
            op.name(),
            delay.as_millis(),
            match &reply {
                Ok(()) if answered => "done before the kill".to_owned(),
                Ok(()) => "done".to_owned(),
                Err(e) => format!("ended: {}", e.chars().take(80).collect::<String>()),
            },
            match seen.held {
                Some(m) => format!("held ({m:?}), BAR2 {}M", seen.bar_size >> 20),
                None => format!("on nvidia, BAR2 {}M", seen.bar_size >> 20),
            }
        );
    }
    // The end: whatever is held goes back, and the GPU is nvidia's.
    if seen.held.is_some() {
        let last = Mutex::new(String::new());
        if let Err(e) = rt.block_on(Op::GiveBack.run(&dir.join("rigd.sock"), &last)) {
            t.violations.push(format!("the last give-back failed: {e}"));
        }
    }
    let end = rt.block_on(check(dir, &mut t.violations, "at the end"));
    if end.held.is_some() {
        t.violations
            .push("at the end: still held after the give-back".into());
    }
    rigd.stop();
    t.took = started.elapsed();
    keep_if_failed(tmp, &t);
    t
}

/// Keeps the tree, the journal and each rigd's stderr for a look when anything broke.
fn keep_if_failed(tmp: tempfile::TempDir, t: &Tally) {
    if !t.violations.is_empty() {
        println!(
            "the tree, journal and rigd logs are kept in {}",
            tmp.keep().display()
        );
    }
}
