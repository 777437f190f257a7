//! What a launch costs the host: `ComputeChannel::launch` (template look-up, arguments
//! checked and laid out, the slot patched in the arena, the slot's launch words queued,
//! the submit's ring entry, fences, GP_PUT and doorbell) against rigd's fake RM in this
//! process, so everything but the GPU is the real code on real mappings: the ring
//! memfd, the session's leases, a shmem page standing in for the doorbell. The "GPU"
//! is this loop: every 32 launches it writes the last value into the semaphore (through
//! rigd's view of the lease, outside the timed part), so slots and pushbuffer words are
//! reused as on a GPU that keeps up.
//!
//! Prints `rig <name> median <x> p99 <y> us (n <count>)` lines, as the H200 probe
//! does; each sample is one launch timed alone (two clock reads, about 20 ns of it),
//! and the `_batch` lines divide 1,000 launches' time by 1,000 (`enqueue_…`: launches
//! queued 32 at a time and submitted together, chained behind each other or not). With rings in host
//! memory only: the fake's GPU window is ordinary memory, so BAR1's write-combined
//! stores are not what they are on the GPU (docs/compute.md, "Host time per launch").
//!
//!     cargo bench -p rig-runtime --bench launch

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use rig_client::{
    channel::{EMPTY_RELEASE, Engine, Rings},
    session::Session,
};
use rig_model::addr::GpuVa;
use rig_runtime::{
    Arg, ComputeChannel, ComputeOptions, CopyChannel, CopyOptions, HostAlloc, Kernel, load,
};
use support::{Fixture, GPU, KERNELS, gpu_writes, serve};

const LAUNCHES: usize = 100_000;
const BATCH: usize = 1000;
const LAND_EVERY: usize = 32;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "an index below the length"
    )]
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i]
}

fn report(name: &str, v: &mut [f64]) {
    let (m, p) = (pct(v, 0.5), pct(v, 0.99));
    println!("rig {name} median {m:.3} p99 {p:.3} us (n {})", v.len());
}

struct Bench<'a> {
    f: &'a Fixture,
    s: &'a Session,
    c: ComputeChannel,
    sem: u64,
    /// A copy channel, for the floor: an empty submission's host time.
    floor: rig_client::channel::Channel,
}

impl Bench<'_> {
    /// The "GPU" finishes everything launched so far.
    fn land(&mut self) {
        let last = self.c.channel().last_value();
        gpu_writes(self.f, self.s, self.sem, &last.to_le_bytes());
    }

    fn run(&mut self, name: &str, k: &Kernel, grid: u32, block: u32, args: &[Arg<'_>]) {
        // Warm: every slot written whole once.
        for i in 0..256 {
            self.c.launch(k, grid, block, 0, args).expect("launch");
            if i % LAND_EVERY == 0 {
                self.land();
            }
        }
        let mut one = Vec::with_capacity(LAUNCHES);
        for i in 0..LAUNCHES {
            if i % LAND_EVERY == 0 {
                self.land();
            }
            let t = Instant::now();
            self.c.launch(k, grid, block, 0, args).expect("launch");
            one.push(t.elapsed().as_secs_f64() * 1e6);
        }
        report(name, &mut one);
        let mut batches = Vec::new();
        for _ in 0..LAUNCHES / BATCH {
            let mut spent = Duration::ZERO;
            for _ in 0..BATCH / LAND_EVERY {
                self.land();
                let t = Instant::now();
                for _ in 0..LAND_EVERY {
                    self.c.launch(k, grid, block, 0, args).expect("launch");
                }
                spent += t.elapsed();
            }
            batches.push(spent.as_secs_f64() * 1e6 / (BATCH / LAND_EVERY * LAND_EVERY) as f64);
        }
        report(&format!("{name}_batch"), &mut batches);
    }

    /// Launches queued and submitted 32 at a time (`enqueue`), their enqueue timed,
    /// with each queued launch chained behind the one before (DEPENDENT_QMD0) and
    /// without, rounds interleaved so that both see the same machine.
    fn enqueued(&mut self, k: &Kernel) {
        let (mut plain, mut chained) = (Vec::new(), Vec::new());
        for round in 0..2 * LAUNCHES / BATCH {
            let chain = round % 2 == 1;
            self.c.set_chain(chain);
            let mut spent = Duration::ZERO;
            for _ in 0..BATCH / LAND_EVERY {
                self.land();
                let t = Instant::now();
                for _ in 0..LAND_EVERY {
                    self.c.enqueue(k, 1, 1, 0, &[]).expect("enqueue");
                }
                spent += t.elapsed();
                self.c.submit().expect("submit");
            }
            let us = spent.as_secs_f64() * 1e6 / (BATCH / LAND_EVERY * LAND_EVERY) as f64;
            if chain { &mut chained } else { &mut plain }.push(us);
        }
        self.c.set_chain(false);
        report("enqueue_host_empty_batch", &mut plain);
        report("enqueue_host_empty_chained_batch", &mut chained);
    }

    /// The channel's own floor, interleaved with launches so that both see the same
    /// machine: a host release and a submit on a copy channel (what an empty
    /// submission's round trip sends), against a launch and its submit.
    fn floor(&mut self, k: &Kernel) {
        let (mut launch, mut empty) = (Vec::new(), Vec::new());
        for _ in 0..LAUNCHES / BATCH {
            let (mut l, mut e) = (Duration::ZERO, Duration::ZERO);
            for _ in 0..BATCH / LAND_EVERY {
                self.land();
                let last = self.floor.last_value();
                gpu_writes(
                    self.f,
                    self.s,
                    self.floor.semaphore_va().get(),
                    &last.to_le_bytes(),
                );
                let t = Instant::now();
                for _ in 0..LAND_EVERY {
                    self.c.launch(k, 1, 1, 0, &[]).expect("launch");
                }
                l += t.elapsed();
                let t = Instant::now();
                for _ in 0..LAND_EVERY {
                    self.floor.release_with(EMPTY_RELEASE).expect("release");
                    self.floor.submit().expect("submit");
                }
                e += t.elapsed();
            }
            let n = (BATCH / LAND_EVERY * LAND_EVERY) as f64;
            launch.push(l.as_secs_f64() * 1e6 / n);
            empty.push(e.as_secs_f64() * 1e6 / n);
        }
        report("launch_host_empty_interleaved", &mut launch);
        report("channel_empty_submission_host", &mut empty);
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let f = serve(32).await;
        let s = Session::open(&f.server.socket, GPU).await.expect("session");
        let mut copies = CopyChannel::open(&s, CopyOptions::default())
            .await
            .expect("copy channel");
        let sem = copies.channel().semaphore_va().get();
        gpu_writes(&f, &s, sem, &2u64.to_le_bytes());
        // TIMEOUT: the upload's values were landed by hand above.
        let module = load::load(&s, &mut copies, &HostAlloc, KERNELS, Duration::from_secs(1))
            .await
            .expect("loads");
        let c = ComputeChannel::open(
            &s,
            ComputeOptions {
                entries: 1 << 20,
                pushbuffer: 4 << 20,
                rings: Rings::Host,
                ..ComputeOptions::default()
            },
        )
        .await
        .expect("compute channel");
        let floor = rig_client::channel::Channel::open(&s, Engine::Copy, 1 << 20)
            .await
            .expect("copy channel");
        let mut b = Bench {
            f: &f,
            s: &s,
            c,
            sem: 0,
            floor,
        };
        b.sem = b.c.channel().semaphore_va().get();
        let empty = module.kernel("empty").expect("empty");
        b.run("launch_host_empty", &empty, 1, 1, &[]);
        let saxpy = module.kernel("saxpy").expect("saxpy");
        let args = [
            Arg::F32(3.0),
            Arg::Ptr(GpuVa(0x40_0000_0000)),
            Arg::Ptr(GpuVa(0x41_0000_0000)),
            Arg::U64(1 << 28),
        ];
        b.run("launch_host_saxpy", &saxpy, 1 << 20, 256, &args);
        b.floor(&empty);
        b.enqueued(&empty);
        drop(b);
        f.server.stop().await;
    });
}
