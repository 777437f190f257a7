//! rig-fault-probe: copy-engine fills and copies of every size, and faults that must
//! stay in their session, against a running rigd on a real GPU (tests/h200/faults.sh).
//! Not an interface for people.
//!
//! `rig-fault-probe fills MAX_GIB SOCKET GPU CHECK_CUBIN`: GPU memory of 1 MiB, 16 MiB,
//! 256 MiB, then 1 GiB doubling up to MAX_GIB, each filled by the copy engine with a
//! value of its own and every word checked by a kernel (`count_ne` of
//! tests/h200/check.cu); then copies on the copy engine of a pattern that differs at
//! every word (`fill_pattern`), up to MAX_GIB / 2, every word checked at the other end
//! (`count_ne_pattern`); then the sequence that once lost an H100: an 8 GiB fill, a
//! new runtime in the same session, a kernel on it. Sizes go up, and the first error
//! ends the run: a size that faulted is never sent again.
//!
//! `rig-fault-probe contain SOCKET GPU CHECK_CUBIN FAULTY_CUBIN [CASE…]`: each fault
//! kind once, each in a session of its own (default: every case, in [`CASES`]'s order,
//! the riskiest last; `none`: no case, only the new session). A case must end as that session's typed fault (or run to
//! completion where the hardware lets it, which is said), after which rigd must refuse
//! the session a new channel (`CHANNEL_FAULTED`); then a new session must run a kernel
//! correctly.
//!
//! `rig-fault-probe busy kernel|copy|acquire|hog SOCKET GPU CHECK_CUBIN`: a kernel of
//! short blocks that runs for about 20 s, or 20 s of copy-engine fills queued, or a
//! compute channel stopped at a GPU wait for a value nothing releases, then `busy` on
//! stdout, and the process waits to be killed (tests/h200/faults.sh kills it with
//! SIGKILL); or (`hog`) a kernel of one 20 s block per SM, waited for: beside another
//! session's work the RM ends it (Xid 109), after which a new session of the uid must
//! be refused channels (`GPU_TIME`).
//!
//! `rig-fault-probe slice SECONDS SOCKET GPU CHECK_CUBIN [BLOCK_MS]`: a kernel of one
//! block per SM spinning SECONDS (or of blocks of BLOCK_MS, as many as last SECONDS)
//! in one session, and in a second session of the same process a tiny kernel launched
//! and waited for, one after the other, until the first ends: how long the second
//! session waited shows whether the first's blocks were switched out mid-block
//! (milliseconds), at their end (BLOCK_MS) or not at all (SECONDS).
//!
//! With `RIG_PROBE_UID=N` a root start drops to uid N first. Prints `check NAME ok …`
//! per result and `rig NAME …` per figure; the first failed check ends the run with a
//! non-zero status.

use std::{
    error::Error,
    process::ExitCode,
    time::{Duration, Instant},
};

use rig_client::{
    channel::{ChannelError, Fence},
    session::Session,
};
use rig_model::addr::GpuVa;
use rig_runtime::{
    Alloc, Arg, ComputeError, CopyError, GpuAlloc, Memory, Module, Runtime, RuntimeOptions, Span,
    gpu_va,
};

type Res<T> = Result<T, Box<dyn Error>>;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
// TIMEOUT: the copy engine fills about 100 GB/s and copies 95 GB/s on the H200
// (docs/hardware/nvidia-compute.md, "What the H200 ran"): 64 GiB in under a second.
// 60 s says the engine stopped.
const LONG: Duration = Duration::from_secs(60);
/// An address below everything rigd maps in a session's space.
const NOWHERE: GpuVa = GpuVa(0xf_0000_0000);

const USAGE: &str = "usage: rig-fault-probe fills MAX_GIB SOCKET GPU CHECK_CUBIN
       rig-fault-probe contain SOCKET GPU CHECK_CUBIN FAULTY_CUBIN [CASE...]
       rig-fault-probe busy kernel|copy|hog SOCKET GPU CHECK_CUBIN
       rig-fault-probe slice SECONDS SOCKET GPU CHECK_CUBIN [BLOCK_MS]
  env: RIG_PROBE_UID=N [RIG_PROBE_GID=G]  drop to uid N before connecting";

/// The fault kinds `contain` causes, in the order it causes them: MMU faults of a
/// kernel and of the copy engine, the SM's own exceptions, then what the channel's
/// front end and the copy engine refuse.
const CASES: &[&str] = &[
    "kernel-store",
    "kernel-load",
    "copy-read",
    "copy-write",
    "kernel-trap",
    "kernel-misaligned",
    "pbdma-header",
    "copy-bad-launch",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let run = || -> Res<()> {
        let role = args.get(1).map(String::as_str).ok_or(USAGE)?;
        let (max_gib, what, rest) = match role {
            "fills" => (args.get(2).ok_or(USAGE)?.parse::<u64>()?, "", &args[3..]),
            "busy" => (0, args.get(2).map_or("", String::as_str), &args[3..]),
            "contain" => (0, "", &args[2..]),
            "slice" => (0, args.get(2).map_or("", String::as_str), &args[3..]),
            _ => return Err(USAGE.into()),
        };
        let [socket, gpu, cubin, more @ ..] = rest else {
            return Err(USAGE.into());
        };
        let bytes = std::fs::read(cubin).map_err(|e| format!("{cubin}: {e}"))?;
        let faulty = match (role, more.first()) {
            ("contain", Some(f)) => std::fs::read(f).map_err(|e| format!("{f}: {e}"))?,
            ("contain", None) => return Err(USAGE.into()),
            _ => Vec::new(),
        };
        rig_tests::probe::drop_privileges()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            match role {
                "fills" => fills(socket, gpu, &bytes, max_gib * GIB).await,
                "busy" => busy(what, socket, gpu, &bytes).await,
                "slice" => {
                    let block_ms = more.first().map(|m| m.parse()).transpose()?;
                    slice(what.parse()?, block_ms, socket, gpu, &bytes).await
                }
                _ => {
                    // `none`: no fault, only the new session's check at the end.
                    let cases: Vec<&str> = if more.len() > 1 {
                        more[1..]
                            .iter()
                            .map(String::as_str)
                            .filter(|&c| c != "none")
                            .collect()
                    } else {
                        CASES.to_vec()
                    };
                    contain(socket, gpu, &bytes, &faulty, &cases).await
                }
            }
        })
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rig-fault-probe: {}", rig_client::error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// A session, its runtime and the check kernels, with an 8-byte counter in host memory
/// the kernels add their mismatches to.
struct Checker {
    s: Session,
    rt: Runtime,
    m: Module,
    counter: rig_client::session::Buffer,
}

impl Checker {
    async fn open(socket: &str, gpu: &str, cubin: &[u8]) -> Res<Self> {
        let s = Session::open(socket, gpu).await?;
        let mut rt = Runtime::open(&s, &GpuAlloc, RuntimeOptions::default()).await?;
        let m = rt.load(&s, &GpuAlloc, cubin).await?;
        let counter = s.alloc(2 * MIB, 2 * MIB).await?;
        Ok(Self { s, rt, m, counter })
    }

    /// Runs `kernel` over `mem` (a multiple of 16 bytes) with `word` as its third
    /// argument; returns the counter it leaves (mismatches, for the `count_*` kernels).
    fn sweep(&mut self, kernel: &str, mem: &dyn Memory, word: u32) -> Res<u64> {
        self.counter.write(0, &[0u8; 8])?;
        let k = self.m.kernel(kernel)?;
        let args = [
            Arg::Ptr(gpu_va(mem)?),
            Arg::U64(mem.len() / 16),
            Arg::U32(word),
            Arg::Ptr(gpu_va(&self.counter)?),
        ];
        let n = if kernel == "fill_pattern" { 3 } else { 4 };
        let v = self
            .rt
            .compute()
            .launch(&k, (132 * 16, 1, 1), (256, 1, 1), 0, &args[..n])?;
        self.rt.compute().wait(v, LONG)?;
        let mut b = [0u8; 8];
        self.counter.read(0, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Fills `mem` with `value` on the copy engine; returns how long it took.
    fn fill(&mut self, mem: &dyn Memory, value: u32) -> Res<Duration> {
        let t = Instant::now();
        let v = self
            .rt
            .copies()
            .fill(&self.s, Span::new(mem, 0, mem.len())?, value)?;
        self.rt.copies().wait(v, LONG)?;
        Ok(t.elapsed())
    }
}

fn gbps(bytes: u64, d: Duration) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a figure")]
    let b = bytes as f64;
    b / d.as_secs_f64() / 1e9
}

fn name(bytes: u64) -> String {
    if bytes >= GIB {
        format!("{}gib", bytes / GIB)
    } else {
        format!("{}mib", bytes / MIB)
    }
}

fn check(what: &str, wrong: u64, of: u64, figure: &str) -> Res<()> {
    if wrong != 0 {
        return Err(format!("check {what} FAILED: {wrong} wrong words of {of}").into());
    }
    println!("check {what} ok ({of} words checked{figure})");
    Ok(())
}

fn sizes(max: u64) -> Vec<u64> {
    let mut v = vec![MIB, 16 * MIB, 256 * MIB];
    let mut g = GIB;
    while g <= max {
        v.push(g);
        g *= 2;
    }
    v.retain(|&b| b <= max);
    v
}

async fn fills(socket: &str, gpu: &str, cubin: &[u8], max: u64) -> Res<()> {
    let mut c = Checker::open(socket, gpu, cubin).await?;
    for (i, bytes) in sizes(max).into_iter().enumerate() {
        let buf = GpuAlloc.alloc(&c.s, bytes, 2 * MIB).await?;
        let value = 0x5a5a_0000 | u32::try_from(i)?;
        // The kernel checks every word, so a line the engine skipped reads as the
        // allocation's zeros, never as the value.
        let took = c.fill(&buf, value)?;
        let wrong = c.sweep("count_ne", &buf, value)?;
        check(
            &format!("fill_{}", name(bytes)),
            wrong,
            bytes / 4,
            &format!(", {:.1} GB/s", gbps(bytes, took)),
        )?;
        rig_client::gpumem::GpuMemory::free(&c.s, buf).await?;
    }
    for (i, bytes) in sizes(max / 2).into_iter().enumerate() {
        let src = GpuAlloc.alloc(&c.s, bytes, 2 * MIB).await?;
        let dst = GpuAlloc.alloc(&c.s, bytes, 2 * MIB).await?;
        let seed = 0x1234_0000 | u32::try_from(i)?;
        c.sweep("fill_pattern", &src, seed)?;
        c.fill(&dst, 0)?;
        let t = Instant::now();
        let v =
            c.rt.copies()
                .copy(&c.s, Span::new(&src, 0, bytes)?, Span::new(&dst, 0, bytes)?)?;
        c.rt.copies().wait(v, LONG)?;
        let took = t.elapsed();
        let wrong = c.sweep("count_ne_pattern", &dst, seed)?;
        check(
            &format!("copy_{}", name(bytes)),
            wrong,
            bytes / 4,
            &format!(", {:.1} GB/s", gbps(bytes, took)),
        )?;
        rig_client::gpumem::GpuMemory::free(&c.s, src).await?;
        rig_client::gpumem::GpuMemory::free(&c.s, dst).await?;
    }
    if max >= 8 * GIB {
        // The sequence of the lost H100: one 8 GiB fill, then a new runtime in the
        // same session, whose kernel must run.
        let buf = GpuAlloc.alloc(&c.s, 8 * GIB, 2 * MIB).await?;
        c.fill(&buf, 0x5a5a_5a5a)?;
        let mut second = Runtime::open(&c.s, &GpuAlloc, RuntimeOptions::default()).await?;
        let m = second.load(&c.s, &GpuAlloc, cubin).await?;
        let k = m.kernel("count_ne")?;
        c.counter.write(0, &[0u8; 8])?;
        let v = second.compute().launch(
            &k,
            (132 * 16, 1, 1),
            (256, 1, 1),
            0,
            &[
                Arg::Ptr(buf.va()),
                Arg::U64(buf.len() / 16),
                Arg::U32(0x5a5a_5a5a),
                Arg::Ptr(gpu_va(&c.counter)?),
            ],
        )?;
        second.compute().wait(v, LONG)?;
        let mut b = [0u8; 8];
        c.counter.read(0, &mut b)?;
        check(
            "fill_8gib_then_a_new_runtime",
            u64::from_le_bytes(b),
            2 << 30,
            "",
        )?;
        second.close(&c.s).await?;
    }
    c.rt.close(&c.s).await?;
    Ok(())
}

/// Whether a new runtime in `s` is refused because the session's fault was contained.
async fn refused_as_faulted(s: &Session) -> Res<String> {
    // TIMEOUT: rigd's watch reads notifiers every 10 ms and contains on its next tick.
    tokio::time::sleep(Duration::from_millis(200)).await;
    match Runtime::open(s, &GpuAlloc, RuntimeOptions::default()).await {
        Ok(_) => Err("a faulted session opened a new runtime".into()),
        Err(e) => {
            let line = rig_client::error_line(&e);
            if line.contains("faulted") && line.contains("open a new session") {
                Ok(line)
            } else {
                Err(format!("refused, but not for the fault: {line}").into())
            }
        }
    }
}

/// An INC_METHOD header on the copy subchannel.
fn ce(method: u32, count: u32) -> Res<u32> {
    Ok(rig_nv::method::inc(
        rig_nv::method::copy::SUBCH_COPY,
        method,
        count,
    )?)
}

/// Causes fault kind `case` in `c`'s session; returns the value whose wait must end in
/// the fault, and whether it waits on the compute channel.
fn cause(c: &mut Checker, faulty: &Module, case: &str, out: GpuVa) -> Res<(u64, bool)> {
    use rig_nv::class::clc8b5 as m;
    let kernel = |c: &mut Checker, k: &str, args: &[Arg<'_>]| -> Res<(u64, bool)> {
        let k = faulty.kernel(k).or_else(|_| c.m.kernel(k))?;
        Ok((c.rt.compute().launch(&k, 1, 1, 0, args)?, true))
    };
    let after = GpuVa(out.get() + 64);
    match case {
        "kernel-store" => kernel(
            c,
            "fill_pattern",
            &[Arg::Ptr(NOWHERE), Arg::U64(1), Arg::U32(7)],
        ),
        "kernel-load" => kernel(c, "load_at", &[Arg::Ptr(NOWHERE), Arg::Ptr(out)]),
        "kernel-trap" => kernel(c, "trap_now", &[Arg::Ptr(out)]),
        "kernel-misaligned" => kernel(c, "misaligned", &[Arg::Ptr(out), Arg::Ptr(after)]),
        "copy-read" | "copy-write" => {
            let ch = c.rt.copies().channel();
            let v = if case == "copy-read" {
                ch.copy(NOWHERE, out, 4096)?
            } else {
                ch.copy(out, NOWHERE, 4096)?
            };
            ch.submit()?;
            Ok((v, false))
        }
        // SEC_OP 6 is reserved (clc86f.h has no such operation): the channel's front end
        // refuses the header; the fill after it releases a value that must never land.
        "pbdma-header" => {
            let ch = c.rt.copies().channel();
            ch.push(&[0xc001_0000, 0])?;
            let v = ch.fill(out, 1, 4)?;
            ch.submit()?;
            Ok((v, false))
        }
        // DATA_TRANSFER_TYPE 3 is no value clc8b5.h defines (NONE 0, PIPELINED 1,
        // NON_PIPELINED 2): a 4-byte copy within the session's own memory with it.
        "copy-bad-launch" => {
            let ch = c.rt.copies().channel();
            let (o, a) = (out.get(), after.get());
            let half = |x: u64, hi: bool| u32::try_from(if hi { x >> 32 } else { x & 0xffff_ffff });
            ch.push(&[
                ce(m::NVC8B5_OFFSET_IN_UPPER, 4)?,
                half(o, true)?,
                half(o, false)?,
                half(a, true)?,
                half(a, false)?,
                ce(m::NVC8B5_LINE_LENGTH_IN, 1)?,
                4,
                ce(m::NVC8B5_LAUNCH_DMA, 1)?,
                m::NVC8B5_LAUNCH_DMA_DATA_TRANSFER_TYPE.encode_masked(3)
                    | m::NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT
                        .of(m::NVC8B5_LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH)
                    | m::NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT
                        .of(m::NVC8B5_LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH),
            ])?;
            let v = ch.fill(out, 1, 4)?;
            ch.submit()?;
            Ok((v, false))
        }
        other => Err(format!("no fault case {other}").into()),
    }
}

async fn contain(
    socket: &str,
    gpu: &str,
    check_cubin: &[u8],
    faulty_cubin: &[u8],
    cases: &[&str],
) -> Res<()> {
    for &case in cases {
        let mut c = Checker::open(socket, gpu, check_cubin).await?;
        let faulty = c.rt.load(&c.s, &GpuAlloc, faulty_cubin).await?;
        let out = GpuAlloc.alloc(&c.s, 2 * MIB, 2 * MIB).await?;
        let (v, compute) = cause(&mut c, &faulty, case, out.va())?;
        let t = Instant::now();
        let fault = if compute {
            match c.rt.compute().wait(v, LONG) {
                Err(ComputeError::Channel(ChannelError::Fault { fault, .. })) => Some(fault),
                Ok(()) => None,
                Err(e) => return Err(format!("check {case} FAILED: {e}").into()),
            }
        } else {
            match c.rt.copies().wait(v, LONG) {
                Err(CopyError::Channel(ChannelError::Fault { fault, .. })) => Some(fault),
                Ok(()) => None,
                Err(e) => return Err(format!("check {case} FAILED: {e}").into()),
            }
        };
        if let Some(fault) = fault {
            println!(
                "check {case}_typed ok (info32 {} info16 {:#x} {}, after {} ms)",
                fault.info32,
                fault.info16,
                fault.reason(),
                t.elapsed().as_millis()
            );
            println!(
                "check {case}_no_new_channels ok ({})",
                refused_as_faulted(&c.s).await?
            );
        } else {
            println!("case {case}: ran to completion, no fault posted");
        }
        c.rt.close(&c.s).await?;
    }
    // A new session runs as if nothing happened.
    let mut c = Checker::open(socket, gpu, check_cubin).await?;
    let buf = GpuAlloc.alloc(&c.s, 64 * MIB, 2 * MIB).await?;
    c.sweep("fill_pattern", &buf, 0xabcd)?;
    let wrong = c.sweep("count_ne_pattern", &buf, 0xabcd)?;
    check("a_new_session_after_the_faults", wrong, 16 * MIB, "")?;
    c.rt.close(&c.s).await?;
    Ok(())
}

/// `slice SECONDS [BLOCK_MS]`: see the module head.
async fn slice(secs: f64, block_ms: Option<f64>, socket: &str, gpu: &str, cubin: &[u8]) -> Res<()> {
    let block_s = block_ms.map_or(secs, |ms| ms / 1e3);
    if !(0.000_1..=3.0).contains(&block_s) || !(0.01..=30.0).contains(&secs) {
        // Past about 4 s a block the RM cannot switch out is ended with Xid 109.
        return Err("slice: blocks of up to 3 s, for up to 30 s".into());
    }
    // One block per SM, or (BLOCK_MS) 16 of 128 threads at once on each of 132 SMs,
    // as many as last SECONDS.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let blocks = match block_ms {
        None => 132,
        Some(_) => (132.0 * 16.0 * secs / block_s) as u32,
    };
    let mut hog = Checker::open(socket, gpu, cubin).await?;
    let mut other = Checker::open(socket, gpu, cubin).await?;
    let done = GpuAlloc.alloc(&hog.s, 2 * MIB, 2 * MIB).await?;
    let mark = GpuAlloc.alloc(&other.s, 2 * MIB, 2 * MIB).await?;
    let tiny = other.m.kernel("spin")?;
    let tiny_args = [Arg::U64(0), Arg::Ptr(mark.va())];
    let ping = |other: &mut Checker| -> Res<Duration> {
        let t = Instant::now();
        let v = other
            .rt
            .compute()
            .launch(&tiny, (1, 1, 1), (32, 1, 1), 0, &tiny_args)?;
        other.rt.compute().wait(v, LONG)?;
        Ok(t.elapsed())
    };
    for _ in 0..100 {
        ping(&mut other)?;
    }
    let k = hog.m.kernel("spin")?;
    // The H100's and H200's SMs run at 1.98 GHz.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let clocks = (block_s * 1.98e9) as u64;
    let t0 = Instant::now();
    let v = hog.rt.compute().launch(
        &k,
        (blocks, 1, 1),
        (128, 1, 1),
        0,
        &[Arg::U64(clocks), Arg::Ptr(done.va())],
    )?;
    let mut waits = Vec::new();
    while hog.rt.compute().channel().completed()? < v && t0.elapsed() < LONG {
        waits.push(ping(&mut other)?);
    }
    let ended = hog.rt.compute().wait(v, LONG);
    let took = t0.elapsed().as_secs_f64();
    waits.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let n = waits.len().max(1);
    println!(
        "rig slice_us the other session beside {blocks} blocks of {:.1} ms: median {:.1} p99 {:.1} max {:.1} us (n {}); the blocks ended after {took:.2} s",
        block_s * 1e3,
        waits.get(n / 2).map_or(0.0, |&d| us(d)),
        waits.get((n - 1) * 99 / 100).map_or(0.0, |&d| us(d)),
        waits.last().map_or(0.0, |&d| us(d)),
        waits.len(),
    );
    ended.map_err(|e| format!("check slice FAILED: the blocks were ended: {e}").into())
}

/// `busy kernel|copy`: about 20 s of work in flight on the GPU, then `busy`; waits to
/// be killed.
async fn busy(what: &str, socket: &str, gpu: &str, cubin: &[u8]) -> Res<()> {
    let mut c = Checker::open(socket, gpu, cubin).await?;
    let done = GpuAlloc.alloc(&c.s, 2 * MIB, 2 * MIB).await?;
    let v = match what {
        "kernel" => {
            let k = c.m.kernel("spin")?;
            // Blocks of 2 * 10^6 clocks (1 ms at the H100's and H200's 1.98 GHz), 16 of
            // 128 threads at once on each of 132 SMs: 42 million of them last about
            // 20 s. The RM switched neither these nor blocks of seconds out in time
            // beside another session's work (Xid 109, docs/RELIABILITY.md).
            let args = [Arg::U64(2_000_000), Arg::Ptr(done.va())];
            c.rt.compute()
                .launch(&k, (42_000_000, 1, 1), (128, 1, 1), 0, &args)?
        }
        "hog" => {
            // One block per SM, each spinning 4 * 10^10 clocks (about 20 s): blocks
            // that only instruction-level preemption can switch out.
            let k = c.m.kernel("spin")?;
            let args = [Arg::U64(40_000_000_000), Arg::Ptr(done.va())];
            let v =
                c.rt.compute()
                    .launch(&k, (132, 1, 1), (128, 1, 1), 0, &args)?;
            println!("busy hog (value {v} in flight)");
            std::io::Write::flush(&mut std::io::stdout())?;
            let t = Instant::now();
            return match c.rt.compute().wait(v, LONG) {
                Ok(()) => {
                    println!(
                        "check hog_ran_to_its_end ok ({:.1} s beside the other session)",
                        t.elapsed().as_secs_f64()
                    );
                    Ok(())
                }
                Err(e) => {
                    let took = t.elapsed().as_secs_f64();
                    println!("rig hog ended after {took:.1} s: {e}");
                    // The RM ended it (Xid 109): rigd then refuses the uid channels
                    // for `[channels] switch_timeout_penalty_s`, with GPU_TIME.
                    match Checker::open(socket, gpu, cubin).await {
                        Err(r) if format!("{r}").contains("may open no channel") => {
                            println!("check hog_penalised ok ({r})");
                        }
                        Err(r) => return Err(format!("check hog_penalised FAILED: {r}").into()),
                        Ok(_) => {
                            return Err(
                                "check hog_penalised FAILED: a new session opened channels".into(),
                            );
                        }
                    }
                    Ok(())
                }
            };
        }
        "acquire" => {
            // A wait on the GPU for a value no work will ever release (a fence made by
            // hand, a million values past the copy channel's last): the compute
            // channel's host stops at the acquire, and the kernel behind it never
            // starts. The other session must not notice; the kill must reclaim it.
            let copy = c.rt.copies().channel();
            let fence = Fence {
                channel: copy.id(),
                session: c.s.id(),
                semaphore: copy.semaphore_va(),
                value: copy.last_value() + 1_000_000,
                payload: copy.payload(),
            };
            c.rt.compute().acquire(fence)?;
            let k = c.m.kernel("spin")?;
            c.rt.compute()
                .launch(&k, 1, 1, 0, &[Arg::U64(1000), Arg::Ptr(done.va())])?
        }
        "copy" => {
            // 32 fills of 16 GiB at about 95 GB/s: 20 s of copy-engine work queued.
            let buf = GpuAlloc.alloc(&c.s, 16 * GIB, 2 * MIB).await?;
            let mut v = 0;
            for i in 0..32 {
                v =
                    c.rt.copies()
                        .fill(&c.s, Span::new(&buf, 0, buf.len())?, i)?;
            }
            std::mem::forget(buf);
            v
        }
        _ => return Err(USAGE.into()),
    };
    std::thread::sleep(Duration::from_millis(500));
    let running = if what == "kernel" || what == "acquire" {
        c.rt.compute().channel().completed()? < v
    } else {
        c.rt.copies().channel().completed()? < v
    };
    if !running {
        return Err(format!("busy {what} FAILED: the work ended within 500 ms").into());
    }
    println!("busy {what} (value {v} in flight)");
    std::io::Write::flush(&mut std::io::stdout())?;
    std::thread::sleep(Duration::from_secs(60));
    Err("busy: not killed within 60 s".into())
}
