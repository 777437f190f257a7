//! rig-kill-clients: the clients-killed campaign (docs/RELIABILITY.md, "Clients killed
//! by the thousand"), by the hundred, in the disposable machine, against the guest's
//! rigd over real VFIO and an emulated IOMMU. Runs `rig_tests::kill_clients` with
//! clients that are this binary again (as a user of group rig): DMA sessions leasing
//! pool blocks, lent NVMe queues kept full of reads, and whole-device leases of edu
//! with BAR0 mapped and bus mastering on, each SIGKILLed at a seeded random instant;
//! rigd's use is read from /proc/<its pid> (so this runs as root) and from its RPCs.
//! Scenario clients-killed.
//!
//! ```text
//! rig-kill-clients --socket S --rigd-pid P --cycles N [--seed N] [--warmup N]
//!     [--dma BDF] [--queue BDF] [--lease BDF] [--as UID:GID]
//! ```
//!
//! Prints the verdict's lines and one `RESULT … verdict=PASS|FAIL` line; exits 0
//! when it passed, 1 when not, 2 on bad arguments.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use rig_tests::kill_clients::{self, Delays, Launcher, Limits, Plan, Process, Rpcs, Work};

fn main() -> ExitCode {
    kill_clients::run_if_child();
    match parse(std::env::args().skip(1)) {
        Ok((plan, launcher, pid)) => campaign(&plan, &launcher, pid),
        Err(e) => {
            eprintln!("rig-kill-clients: {e}");
            eprintln!(
                "usage: rig-kill-clients --socket S --rigd-pid P --cycles N [--seed N] [--warmup N] \
                 [--dma BDF] [--queue BDF] [--lease BDF] [--as UID:GID]"
            );
            ExitCode::from(2)
        }
    }
}

fn campaign(plan: &Plan, launcher: &Launcher, pid: i32) -> ExitCode {
    let rpcs = match Rpcs::connect(launcher.socket()) {
        Ok(r) => r,
        Err(e) => {
            println!(
                "FAIL connect to rigd at {}: {e}",
                launcher.socket().display()
            );
            return ExitCode::FAILURE;
        }
    };
    let works: Vec<String> = plan
        .works
        .iter()
        .map(|(w, d, n)| format!("{} on {d} (weight {n})", w.name()))
        .collect();
    println!(
        "rig-kill-clients: {} cycles, seed {}, rigd pid {pid}: {}",
        plan.cycles,
        plan.seed,
        works.join(", ")
    );
    let v = kill_clients::run(plan, launcher, &Process::new(pid, rpcs));
    println!("{v}");
    println!("{}", v.result_line());
    if v.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<(Plan, Launcher, i32), String> {
    let (mut socket, mut pid, mut cycles, mut seed, mut warmup, mut run_as) =
        (None, None, None, None, 3, None);
    let mut works = Vec::new();
    let number = |v: Option<String>, name: &str| -> Result<u64, String> {
        v.as_deref()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{name} takes a number"))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--socket" => socket = args.next().map(PathBuf::from),
            "--rigd-pid" => pid = Some(number(args.next(), &a)?),
            "--cycles" => cycles = Some(number(args.next(), &a)?),
            "--seed" => seed = Some(number(args.next(), &a)?),
            "--warmup" => warmup = number(args.next(), &a)?,
            "--as" => run_as = args.next(),
            // A DMA session's leases are the most common client; a queue and a
            // whole-device lease each half as common.
            "--dma" | "--queue" | "--lease" => {
                let work = Work::parse(&a[2..]).expect("one of the works");
                let device = args.next().ok_or_else(|| format!("{a} takes a BDF"))?;
                works.push((work, device, if work == Work::Dma { 2 } else { 1 }));
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let socket = socket.ok_or("--socket is needed")?;
    let pid = i32::try_from(pid.ok_or("--rigd-pid is needed")?).map_err(|e| e.to_string())?;
    if works.is_empty() {
        return Err("no work: give --dma, --queue or --lease".into());
    }
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let plan = Plan {
        cycles: cycles.ok_or("--cycles is needed")?,
        seed,
        works,
        warmup: u32::try_from(warmup).map_err(|e| e.to_string())?,
        // Under TCG a client takes a few hundred ms to hold; kills spread up to half
        // again the warm-up clients' median time.
        delays: Delays::Calibrated { percent: 150 },
        // Each look is up to three RPCs on rigd's one vCPU: a look every 2 ms keeps
        // rigd mostly free for the reclaim being timed.
        poll: Duration::from_millis(2),
        // tokio's blocking threads idle out after 10 s; the reading waits 2 s.
        settle: Duration::from_secs(2),
        limits: Limits {
            goal: Duration::from_millis(100),
            judge_goal: false,
            give_up: Duration::from_secs(5),
            rss_slack_kib: 4096,
            thread_slack: 4,
        },
        progress_every: 50,
    };
    let launcher = Launcher {
        exe: std::env::current_exe().map_err(|e| e.to_string())?,
        socket,
        run_as,
    };
    Ok((plan, launcher, pid))
}
