//! rig-queue-client SOCKET DEVICE COMMAND…: an unprivileged client of a queue rigd
//! lends, for the disposable machine's scenarios.
//! - `run DEPTH COUNT BASE`: opens a queue of DEPTH, writes COUNT 4 KiB patterns from
//!   4 KiB block BASE on, reads them back and compares, closes the queue;
//! - `hold DEPTH`: opens a queue, submits DEPTH reads and never reaps: waits to be
//!   killed with commands in flight;
//! - `lat COUNT BASE`: depth-1 read latency of blocks written before, polled, then
//!   sleeping on the queue's MSI-X interrupt eventfd;
//! - `flood COUNT`: rings the kick COUNT times with nothing to fetch;
//! - `stray ADDR`: reads into device address ADDR, outside the session's leases;
//! - `bad`: asks for depth 0 and depth 1025 (over the default `queue.max_depth`) and
//!   prints the refusals;
//! - `isolated DEPTH COUNT BASE`: DEVICE is an SR-IOV PF: `run` on a queue of the first
//!   free VF of it that rigd holds (`rig_client::queue::LentQueue::open_isolated`);
//! - `overrun`: stores a shadow SQ tail past its ring (the controller trusts it
//!   unchecked) and kicks, reports what came back, and gives the queue back;
//! - `canary DEPTH MS`: takes the memory a `hold DEPTH` client takes (its rings, then
//!   its read buffer), fills it with a pattern, waits MS ms and checks that nothing
//!   wrote it: after a killed holder's reclaim the pool hands the same IOVAs out again,
//!   so a write by the holder's never-deleted queue would land here.
//!
//! Prints `ok WHAT`, `FAIL WHAT: why`, `refused KIND: message` and `measure NAME VALUE
//! UNIT` lines; exits 0 when nothing failed.

use std::{process::ExitCode, time::Instant};

use rig_client::{
    queue::{LentQueue, QueueError},
    session::{Buffer, Session},
};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn pattern(block: u64) -> Vec<u8> {
    let seed = block.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..4096u64)
        .map(|i| (seed.wrapping_add(i.wrapping_mul(0x2545_f491)) >> 24).to_le_bytes()[0])
        .collect()
}

/// Logical blocks in one 4 KiB page of the queue's namespace (8 at 512 bytes).
fn blocks_per_page<T>(q: &LentQueue<T>) -> u32 {
    4096 >> q.namespace.lba_shift
}

async fn run(s: &Session, depth: u32, count: u64, base: u64) -> Res<()> {
    let q: LentQueue<(u64, u64)> = LentQueue::open(s, depth).await?;
    run_on(s, q, depth, count, base).await
}

async fn run_on(
    s: &Session,
    mut q: LentQueue<(u64, u64)>,
    depth: u32,
    count: u64,
    base: u64,
) -> Res<()> {
    println!(
        "ok queue {} of {} entries lent, namespace {} of {} blocks of {} bytes",
        q.qid,
        q.entries,
        q.nsid,
        q.namespace.blocks,
        1u64 << q.namespace.lba_shift
    );
    let per = blocks_per_page(&q);
    let slots = u64::from(depth);
    let data: Buffer = s.alloc(2 * slots * 4096, 4096).await?;
    let dev = data.device_address().ok_or("no device address")?.get();
    let read_at = slots * 4096;
    for (what, writing) in [("writes", true), ("reads", false)] {
        let t = Instant::now();
        let mut free: Vec<u64> = (0..slots).collect();
        let (mut i, mut done) = (0, 0);
        let mut idle = Instant::now();
        while done < count {
            while i < count && !free.is_empty() {
                let slot = free.pop().expect("a slot");
                let lba = (base + i) * u64::from(per);
                if writing {
                    data.write(slot * 4096, &pattern(base + i))?;
                    q.nvme.write(lba, per, dev + slot * 4096, 4096, (i, slot))?;
                } else {
                    q.nvme
                        .read(lba, per, dev + read_at + slot * 4096, 4096, (i, slot))?;
                }
                i += 1;
            }
            q.nvme.ring()?;
            let mut bad = None;
            let mut got = vec![0u8; 4096];
            let n = q.nvme.reap(u32::MAX, |c| {
                let (block, slot) = c.tag;
                if !c.status.is_success() {
                    bad = Some(format!("{what}: block {block}: {:?}", c.status));
                } else if !writing
                    && (data.read(read_at + slot * 4096, &mut got).is_err()
                        || got != pattern(base + block))
                {
                    bad = Some(format!("block {block} read back differs"));
                }
                free.push(slot);
            })?;
            if let Some(b) = bad {
                return Err(b.into());
            }
            done += u64::from(n);
            if n > 0 {
                idle = Instant::now();
            } else if idle.elapsed().as_secs() >= 5 {
                return Err(format!("no {what} completed for 5 s").into());
            }
        }
        let iops = count as f64 / t.elapsed().as_secs_f64();
        println!("ok depth {depth}: {count} {what} through the lent queue");
        println!("measure lent-d{depth}-{what}-iops {iops:.0} iops");
    }
    println!("ok depth {depth}: every block read back as written");
    q.close(s).await?;
    println!("ok queue closed");
    Ok(())
}

/// Depth-1 read latency of blocks `base..base + count` (written by an earlier `run`),
/// completions polled, then slept for on the queue's interrupt eventfd.
async fn lat(s: &Session, count: u64, base: u64) -> Res<()> {
    let mut q: LentQueue<u64> = LentQueue::open(s, 1).await?;
    if !q.has_interrupt() {
        return Err("the queue came without an interrupt".into());
    }
    println!("ok queue {} lent with its MSI-X interrupt", q.qid);
    let per = blocks_per_page(&q);
    let data = s.alloc(4096, 4096).await?;
    let dev = data.device_address().ok_or("no device address")?.get();
    let mut got = vec![0u8; 4096];
    for irq in [false, true] {
        let mut woken = 0u64;
        let t = Instant::now();
        for i in 0..count {
            q.nvme
                .read((base + i) * u64::from(per), per, dev, 4096, i)?;
            q.nvme.ring()?;
            let started = Instant::now();
            let mut done = 0;
            while done == 0 {
                if irq && q.wait(5000)? {
                    woken += 1;
                }
                done = q.nvme.reap(1, |_| {})?;
                if started.elapsed().as_secs() >= 5 {
                    return Err(format!("read {i} did not complete in 5 s").into());
                }
            }
            data.read(0, &mut got)?;
            if got != pattern(base + i) {
                return Err(format!("block {} read back differs", base + i).into());
            }
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / count as f64;
        let how = if irq { "interrupt" } else { "polled" };
        println!("measure lent-d1-read-latency-{how} {us:.1} us");
        if irq {
            println!("ok depth 1: {count} reads, {woken} woken by the interrupt eventfd");
            if woken < count {
                return Err(format!("only {woken} of {count} completions woke the eventfd").into());
            }
        } else {
            println!("ok depth 1: {count} reads, completions polled");
        }
    }
    q.close(s).await?;
    Ok(())
}

/// Rings the kick `count` times with nothing new to fetch, then checks the queue
/// still works: a flood costs the flooder, not the controller or rigd.
async fn flood(s: &Session, count: u64) -> Res<()> {
    use rig_client::queue::Doorbell;
    let mut q: LentQueue<u64> = LentQueue::open(s, 1).await?;
    let t = Instant::now();
    for _ in 0..count {
        let tail = q.nvme.queue().sq_tail();
        q.nvme.queue_mut().doorbell().sq_tail(tail)?;
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / count as f64;
    println!("ok {count} kicks with nothing to fetch");
    println!("measure lent-kick-flood {us:.2} us");
    q.close(s).await?;
    Ok(())
}

/// Reads into a device address outside every lease of this session and prints how
/// the command completed.
async fn stray(s: &Session, addr: u64) -> Res<()> {
    let mut q: LentQueue<u64> = LentQueue::open(s, 1).await?;
    let per = blocks_per_page(&q);
    q.nvme.read(0, per, addr, 4096, 0)?;
    q.nvme.ring()?;
    let t = Instant::now();
    let mut status = None;
    while status.is_none() && t.elapsed().as_secs() < 5 {
        q.nvme.reap(1, |c| status = Some(c.status))?;
    }
    // What the device answers is reported, not judged: the IOMMU's fault is what
    // protects memory (the scenario checks it), whatever status the device posts.
    match status {
        Some(st) => println!(
            "ok a read into {addr:#x} completed, status type {:#x} code {:#04x}",
            st.sct, st.sc
        ),
        None => println!("FAIL a read into {addr:#x} did not complete in 5 s"),
    }
    q.close(s).await?;
    Ok(())
}

async fn hold(s: &Session, depth: u32) -> Res<()> {
    let mut q: LentQueue<u64> = LentQueue::open(s, depth).await?;
    let per = blocks_per_page(&q);
    let data = s.alloc(u64::from(depth) * 4096, 4096).await?;
    let dev = data.device_address().ok_or("no device address")?.get();
    for i in 0..u64::from(depth) {
        data.write(i * 4096, &pattern(i))?;
        // Reads into the buffer: the device writes this process's memory.
        q.nvme
            .read(i * u64::from(per), per, dev + i * 4096, 4096, i)?;
    }
    q.nvme.ring()?;
    println!(
        "holding queue {} with {} commands in flight, rings at {:#x}, reads into {dev:#x}",
        q.qid,
        q.nvme.in_flight(),
        q.nvme.queue().mem().device_address().map_or(0, |d| d.get()),
    );
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}

/// A tail past the ring: what the controller does with it is reported; what must hold
/// is that the queue can still be deleted and the client's session ends cleanly.
async fn overrun(s: &Session) -> Res<()> {
    use rig_client::queue::Doorbell;
    let mut q: LentQueue<u64> = LentQueue::open(s, 8).await?;
    let past = q.entries + 100;
    q.nvme.queue_mut().doorbell().sq_tail(past)?;
    println!(
        "ok shadow tail {past} stored past a ring of {} entries, kicked",
        q.entries
    );
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    match q.nvme.reap(u32::MAX, |_| {}) {
        Ok(n) => println!("note the controller posted {n} completions"),
        Err(e) => println!("note reaping after the overrun: {e}"),
    }
    q.close(s).await?;
    println!("ok the overrun queue was given back (rigd deleted it)");
    Ok(())
}

async fn canary(s: &Session, depth: u32, ms: u64) -> Res<()> {
    let entries = depth.saturating_add(1).max(2);
    let rings = s
        .alloc(rig_client::queue::queue_bytes(entries), 4096)
        .await?;
    let data = s.alloc(u64::from(depth) * 4096, 4096).await?;
    let fill = |b: &Buffer, tag: u8| -> Res<Vec<u8>> {
        let len = usize::try_from(b.len())?;
        let want: Vec<u8> = (0..len).map(|i| i.to_le_bytes()[0] ^ tag ^ 0xa5).collect();
        b.write(0, &want)?;
        Ok(want)
    };
    let want = [fill(&rings, 1)?, fill(&data, 2)?];
    println!(
        "canary rings at {:#x}, data at {:#x}",
        rings.device_address().map_or(0, |d| d.get()),
        data.device_address().map_or(0, |d| d.get())
    );
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    for ((b, want), what) in [&rings, &data]
        .into_iter()
        .zip(&want)
        .zip(["rings", "data"])
    {
        let mut got = vec![0u8; want.len()];
        b.read(0, &mut got)?;
        match got.iter().zip(want).position(|(g, w)| g != w) {
            None => println!("ok the {what} canary is intact after {ms} ms"),
            Some(at) => println!("FAIL the {what} canary was written at offset {at:#x}"),
        }
    }
    Ok(())
}

async fn bad(s: &Session) {
    // 1025: one over the default queue.max_depth.
    for depth in [0, 1025] {
        match LentQueue::<u64>::open(s, depth).await {
            Ok(q) => println!("FAIL depth {depth} was lent as queue {}", q.qid),
            Err(QueueError::Refused { kind, message }) => {
                println!("refused {kind:?}: {message}");
            }
            Err(e) => println!("FAIL depth {depth}: {e}"),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let a: Vec<String> = std::env::args().collect();
    let (Some(socket), Some(device), Some(cmd)) = (a.get(1), a.get(2), a.get(3)) else {
        eprintln!(
            "usage: rig-queue-client SOCKET DEVICE run DEPTH COUNT BASE | hold DEPTH | lat COUNT BASE | flood COUNT | stray ADDR | canary DEPTH MS | overrun | isolated DEPTH COUNT BASE | bad"
        );
        return ExitCode::from(2);
    };
    let num = |i: usize| a.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let depth = u32::try_from(num(4)).unwrap_or(u32::MAX);
    if cmd == "isolated" {
        let r = match LentQueue::open_isolated(socket, device, depth).await {
            Ok((s, q)) => {
                println!("ok isolated on {}", s.device());
                run_on(&s, q, depth, num(5), num(6)).await
            }
            Err(e) => Err(e.into()),
        };
        return match r {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                println!("FAIL isolated: {}", rigd::service::status::error_line(&*e));
                ExitCode::FAILURE
            }
        };
    }
    let session = match Session::open(socket, device).await {
        Ok(s) => s,
        Err(e) => {
            println!("FAIL open a DMA session on {device}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let r = match cmd.as_str() {
        "run" => run(&session, depth, num(5), num(6)).await,
        "hold" => hold(&session, depth).await,
        "lat" => lat(&session, num(4), num(5)).await,
        "flood" => flood(&session, num(4)).await,
        "stray" => stray(&session, num(4)).await,
        "canary" => canary(&session, depth, num(5)).await,
        "overrun" => overrun(&session).await,
        "bad" => {
            bad(&session).await;
            Ok(())
        }
        _ => Err("unknown command".into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("FAIL {cmd}: {}", rigd::service::status::error_line(&*e));
            ExitCode::FAILURE
        }
    }
}
