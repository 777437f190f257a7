//! On the H200 (device machine): GPU memory lent by rigd, through the client library,
//! to clients of another uid. Skipped unless `RIG_H200=1`; run as root, with the static
//! test binary where uid 65534 can read and run it (it runs itself again as the
//! clients):
//!
//!     install -m 755 <static hw_h200_gpumem test binary> /tmp/rig-gpumem
//!     RIG_H200=1 /tmp/rig-gpumem --ignored --nocapture
//!
//! What it does, in order, each step printed: starts rigd in this process serving every
//! GPU the RM drives (`[channels] serve = ["all"]`, a 64 MiB hugepage pool, quotas of
//! 128 GiB) on a socket of its own; a client (root) checks what the claim says of the
//! GPU (sm_90, 132 SMs, the layout); a client of uid 65534 fills 16 leases of 2 MiB
//! (rigd's spare pages and those made again after), then 64 MiB, then 1 GiB of GPU
//! memory with 0xa5 on the copy engine and exits; a root client then gets GPU memory
//! of the same sizes and reads every word of it back through the copy engine:
//! all must be zero (rigd does not clear what it lends: the RM hands it out cleared).
//! Then the figures: a lease and release of 2 MiB through rigd, a cached alloc and free,
//! and a 1 GiB device-to-device copy on one copy engine with the clocks boosted
//! (a channel is open); how much one client can hold in 1 GiB leases of 2 MiB pages (the
//! RM's own mapping limit with huge pages); and 20 clients of uid 65534 killed with
//! SIGKILL while holding 1 GiB and a compute channel each, after which rigd holds no
//! GPU memory and `nvidia-smi`'s memory in use is back where it started (within 64 MiB).
//!
//! Safety on the GPU: only through its driver (rigd's RM calls and the lent channels'
//! copies into memory the session holds); every wait is bounded. rigd stops at the end
//! and frees everything it made.

use std::{
    io::BufRead,
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use rig_client::{
    channel::{Channel, Engine},
    gpumem::GpuMemory,
    session::Session,
};
use rig_model::addr::GpuVa;
use rigd::{config::Config, rig::Rig, testing::Serving};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const NOBODY: u32 = 65534;
/// Host staging: one 2 MiB buffer per copy.
const STAGE: u64 = 2 * MIB;
// TIMEOUT: a 256 MiB copy takes ~3 ms at the copy engine's 95 GB/s; a first copy
// also loads the channel's context. 5 s says something is wrong.
const COPY_TIMEOUT: Duration = Duration::from_secs(5);
const CHILD_ENV: &str = "RIG_H200_GPUMEM_CHILD";

fn main_test_name() -> &'static str {
    "h200_gpu_memory_is_lent_cleared_fast_and_taken_back"
}

/// Copies `bytes` from `src` to `dst` in `chunk`-byte copies, then waits for the
/// engine's release.
fn copy(ch: &mut Channel, src: GpuVa, dst: GpuVa, bytes: u64, chunk: u64) -> Res<()> {
    let mut done = 0;
    let mut copies = 0u32;
    while done < bytes {
        let n = chunk.min(bytes - done);
        ch.copy(GpuVa(src.get() + done), GpuVa(dst.get() + done), n)?;
        done += n;
        copies += 1;
        if copies.is_multiple_of(64) {
            ch.submit()?;
        }
    }
    let v = ch.release()?;
    ch.submit()?;
    ch.wait(v, COPY_TIMEOUT)?;
    Ok(())
}

/// A child's part: `fill SOCKET GPU BYTES` fills BYTES of GPU memory with 0xa5 and
/// exits; `hold SOCKET GPU` holds 1 GiB and a compute channel until killed.
async fn child(args: &str) -> Res<()> {
    let mut it = args.split(' ');
    let (mode, socket, gpu) = (
        it.next().ok_or("mode")?,
        it.next().ok_or("socket")?,
        it.next().ok_or("gpu")?,
    );
    let s = Session::open(socket, gpu).await?;
    match mode {
        "fill" => {
            // COUNT leases of BYTES each (2 MiB ones come from rigd's spare pages).
            let bytes: u64 = it.next().ok_or("bytes")?.parse()?;
            let count: u64 = it.next().ok_or("count")?.parse()?;
            let h = s.alloc(STAGE, 4096).await?;
            h.write(0, &vec![0xa5u8; usize::try_from(STAGE)?])?;
            let mut ch = Channel::open(&s, Engine::Copy, 1024).await?;
            let hva = h.gpu_va().ok_or("a served GPU's buffer")?;
            let mut held = Vec::new();
            for _ in 0..count {
                let g = GpuMemory::lease(&s, bytes).await?;
                let mut at = 0;
                while at < bytes {
                    copy(&mut ch, hva, GpuVa(g.va.get() + at), STAGE, STAGE)?;
                    at += STAGE;
                }
                held.push(g);
            }
            println!("filled {count} x {bytes} bytes");
        }
        "hold" => {
            let _g = GpuMemory::lease(&s, GIB).await?;
            let _ch = Channel::open(&s, Engine::Compute, 1024).await?;
            println!("ready");
            tokio::time::sleep(Duration::from_secs(120)).await;
        }
        other => return Err(format!("no child mode {other}").into()),
    }
    Ok(())
}

/// This binary, run again for this test alone as uid 65534 with `args`.
fn spawn(args: &str) -> Res<Child> {
    Ok(Command::new(std::env::current_exe()?)
        .args(["--ignored", "--exact", main_test_name(), "--nocapture"])
        .env(CHILD_ENV, args)
        .env("RIG_H200", "1")
        .uid(NOBODY)
        .gid(NOBODY)
        .stdout(Stdio::piped())
        .spawn()?)
}

/// Waits for the child's line containing `word`; its output goes on to ours.
fn wait_for(child: &mut Child, word: &str) -> Res<()> {
    let out = child.stdout.take().ok_or("stdout")?;
    for line in std::io::BufReader::new(out).lines() {
        let line = line?;
        println!("  child: {line}");
        if line.contains(word) {
            return Ok(());
        }
    }
    Err(format!("the child ended without saying {word}").into())
}

fn nvidia_smi_used_mib(bdf: &str) -> Res<u64> {
    let out = Command::new("nvidia-smi")
        .args([
            "--query-gpu=memory.used",
            "--format=csv,noheader,nounits",
            "-i",
            bdf,
        ])
        .output()?;
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v.get(v.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// rigd serving every GPU on a socket uid 65534 may use.
fn start_rigd(dir: &Path) -> Res<(Arc<Rig>, Serving, PathBuf, String)> {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    let mut config = Config::default();
    config.paths.state_dir = dir.join("state");
    config.channels.serve = vec!["all".into()];
    config.dma.pool_bytes = 64 * MIB;
    config.dma.reserve_hugepages = true;
    config.gpu_memory.per_uid_bytes = 128 * GIB;
    config.gpu_memory.per_gpu_bytes = 128 * GIB;
    let (rig, _) = Rig::new(&config);
    let rig = Arc::new(rig);
    if let Some(w) = rig.serve_configured().first() {
        return Err(format!("not served: {w}").into());
    }
    let gpu = rig
        .gpu_memory_status(None)
        .1
        .first()
        .map(|t| t.gpu.clone())
        .ok_or("no GPU served")?;
    let socket = dir.join("rigd.sock");
    let serving = Serving::start(Arc::clone(&rig), &socket, Some(NOBODY));
    Ok((rig, serving, socket, gpu))
}

async fn run() -> Res<()> {
    let dir = tempfile::tempdir()?;
    let (rig, serving, socket, gpu) = start_rigd(dir.path())?;
    let sock = socket.display().to_string();
    println!("rigd serves {gpu} on {sock}");

    // What the claim says.
    let s = Session::open(&socket, &gpu).await?;
    let g = s.gpu().ok_or("no SessionGpu in the claim's reply")?.clone();
    let geo = g
        .geometry
        .ok_or("no geometry: GR_GET_INFO failed (rigd's log says why)")?;
    println!(
        "geometry: sm_version {:#x}, {} GPCs x {} TPCs max, {} TPCs enabled x {} SMs = {} SMs, {} warps/SM; GPU memory {}..{}",
        geo.sm_version,
        geo.gpcs,
        geo.max_tpcs_per_gpc,
        geo.tpcs,
        geo.sms_per_tpc,
        geo.sms(),
        geo.max_warps_per_sm,
        g.gpu_memory.start,
        g.gpu_memory.end
    );
    // Checked at the end, so that one wrong index does not hide the rest of the run.
    let geometry_ok = geo.sm_version == 0x900 && geo.sms() == 132;

    // Another uid's data never reaches this one.
    // 16 pages of 2 MiB, each its own lease: the first four are rigd's spare pages made
    // before the filler freed, the rest made again after it, from what the RM freed.
    for (bytes, count) in [(2 * MIB, 16), (64 * MIB, 1), (GIB, 1)] {
        let mut c = spawn(&format!("fill {sock} {gpu} {bytes} {count}"))?;
        wait_for(&mut c, "filled")?;
        c.wait()?;
        let t = Instant::now();
        while rig
            .gpu_memory_status(None)
            .1
            .iter()
            .any(|t| t.lent_bytes > 0)
        {
            if t.elapsed() > Duration::from_secs(5) {
                return Err("the filler's GPU memory was not taken back".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let h = s.alloc(STAGE, 4096).await?;
        let hva = h.gpu_va().ok_or("GPU VA")?;
        let mut ch = Channel::open(&s, Engine::Copy, 1024).await?;
        let mut buf = vec![0u8; usize::try_from(STAGE)?];
        let (mut stale, mut nonzero) = (0u64, 0u64);
        let mut lent = Vec::new();
        for _ in 0..count {
            let m = GpuMemory::lease(&s, bytes).await?;
            let mut at = 0;
            while at < bytes {
                h.write(0, &vec![0x5au8; buf.len()])?;
                copy(&mut ch, GpuVa(m.va.get() + at), hva, STAGE, STAGE)?;
                h.read(0, &mut buf)?;
                for w in buf.chunks_exact(4) {
                    let w = u32::from_ne_bytes(w.try_into()?);
                    stale += u64::from(w == 0xa5a5_a5a5);
                    nonzero += u64::from(w != 0);
                }
                at += STAGE;
            }
            lent.push(m.id);
        }
        println!(
            "{count} x {} MiB lent after uid {NOBODY} filled and freed as much: {stale} stale words, {nonzero} nonzero",
            bytes / MIB
        );
        ch.close(&s).await?;
        for id in lent {
            GpuMemory::release(&s, id).await?;
        }
        if stale + nonzero > 0 {
            return Err("memory lent to a session held another uid's data".into());
        }
    }

    // Figures.
    let mut raw = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let m = GpuMemory::lease(&s, 2 * MIB).await?;
        GpuMemory::release(&s, m.id).await?;
        raw.push(t.elapsed());
    }
    let mut cached = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let b = GpuMemory::alloc(&s, 2 * MIB).await?;
        GpuMemory::free(&s, b).await?;
        cached.push(t.elapsed());
    }
    println!(
        "2 MiB lease + release through rigd: median {:.1} µs; alloc + free from the session's pages: {:.2} µs (CUDA's cuMemAlloc + cuMemFree: 87.5 µs)",
        median(raw),
        median(cached)
    );
    let a = GpuMemory::lease(&s, GIB).await?;
    let b = GpuMemory::lease(&s, GIB).await?;
    let mut ch = Channel::open(&s, Engine::Copy, 1024).await?;
    copy(&mut ch, a.va, b.va, GIB, 256 * MIB)?;
    let mut d2d = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        copy(&mut ch, a.va, b.va, GIB, 256 * MIB)?;
        d2d.push(t.elapsed());
    }
    let us = median(d2d);
    println!(
        "1 GiB device to device on one copy engine, clocks boosted: {us:.0} µs = {:.1} GB/s",
        GIB as f64 / us / 1e3
    );
    ch.close(&s).await?;
    GpuMemory::release(&s, a.id).await?;
    GpuMemory::release(&s, b.id).await?;

    // How much one client can hold in 2 MiB pages.
    let mut held = Vec::new();
    let t = Instant::now();
    let stop = loop {
        match GpuMemory::lease(&s, GIB).await {
            Ok(m) => held.push(m.id),
            Err(e) => break e,
        }
    };
    println!(
        "one client held {} GiB in 1 GiB leases of 2 MiB pages ({:.1} s), then: {stop}",
        held.len(),
        t.elapsed().as_secs_f64()
    );
    for id in held.drain(..) {
        GpuMemory::release(&s, id).await?;
    }

    // 20 clients killed while they hold GPU memory and a channel.
    let base = nvidia_smi_used_mib(&gpu)?;
    for i in 0..20 {
        let mut c = spawn(&format!("hold {sock} {gpu}"))?;
        wait_for(&mut c, "ready")?;
        c.kill()?;
        c.wait()?;
        let t = Instant::now();
        while rig
            .gpu_memory_status(None)
            .0
            .iter()
            .any(|u| u.uid == NOBODY)
            || !rig.channel_status(Some(NOBODY)).is_empty()
        {
            if t.elapsed() > Duration::from_secs(5) {
                return Err(format!("kill {i}: not reclaimed within 5 s").into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let after = nvidia_smi_used_mib(&gpu)?;
    println!(
        "20 clients killed with SIGKILL: nvidia-smi memory used {base} MiB before, {after} MiB after"
    );
    if after > base + 64 {
        return Err("the RM holds more memory after the kills".into());
    }
    drop(s);
    serving
        .stop(Duration::from_secs(10))
        .await
        .map_err(|_| "rigd did not stop")??;
    println!("rigd stopped; it freed what it made");
    if !geometry_ok {
        return Err(format!("an H200 is sm_90 with 132 SMs: {geo:?}").into());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the H200: RIG_H200=1, root, --ignored --nocapture"]
async fn h200_gpu_memory_is_lent_cleared_fast_and_taken_back() {
    if let Ok(args) = std::env::var(CHILD_ENV) {
        if let Err(e) = child(&args).await {
            panic!("child: {e}");
        }
        return;
    }
    if std::env::var("RIG_H200").as_deref() != Ok("1") {
        println!("skipped: RIG_H200 is not 1");
        return;
    }
    if let Err(e) = run().await {
        panic!("{e}");
    }
}
