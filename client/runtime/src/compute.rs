//! A compute channel: a lent HOPPER_COMPUTE_A channel with its memory windows, its
//! local memory (SLM) buffer sized for the largest stack of the modules loaded through
//! it, and an arena of launch templates; kernels launch on it with
//! `ch.launch(&kernel, grid, block, dynamic_shared, &args)` and complete by their QMD's
//! own release.
//!
//! Flow (a launch): the template for (kernel, grid, block, dynamic shared) — found, or
//! built once: shape checked against sm_90 and the kernel (`launch::Shape`), bank 0 and
//! the QMD built (`cbank0`, `qmd`), slots taken in the arena (`arena`) → the arguments
//! checked and laid out (`params`) → the next slot patched in place (`template`) →
//! the slot's own launch words (a host WFI when work is in flight, SEND_PCAS) queued as
//! one ring entry with the launch's value (`Channel::push_segment_released`; after a
//! module load, copies of them behind INVALIDATE_SHADER_CACHES_NO_WFI go through the
//! pushbuffer, `Channel::push_released`) → submit. Every refusal comes before the first
//! word is written. The hot path allocates nothing, makes no syscall and takes no lock:
//! a compare of the last template's key, the arguments laid into a buffer the template
//! owns, one or two arena stores, one queued ring entry and the channel's submit.
//!
//! Completion: the QMD's release slot 0 writes the 64-bit value (TWO_WORDS,
//! PAYLOAD64B) when the grid is done; a kernel that faults never releases it, and the
//! wait returns the RM's fault (docs/hardware/nvidia-compute.md, "Completion"). The
//! channel's one-time set-up (SET_OBJECT, the windows, SKED/sampler/texture-header
//! invalidations, the SLM buffer) is what ran on the H200; an SLM size is never put in
//! a QMD the channel's buffer cannot cover (the QMD builder refuses: on the H200 that
//! was Xid 13 SKEDCHECK05_LOCAL_MEMORY_TOTAL_SIZE).
//!
//! State: the lent channel, its windows and SLM buffer, the arena's free list and the
//! templates (least recently used ones give way when the arena is full, once their
//! launches landed). Owned by one caller (`&mut self`): no lock.

use std::time::Duration;

use rig_client::{
    channel::{Channel, ChannelError, Engine, Fence, Options, Rings},
    session::Session,
};
use rig_model::addr::{
    GpuVa,
    layout::{LOCAL_WINDOW, SHARED_WINDOW},
};
use rig_nv::method::compute::{
    self as words, ComputeError as WordError, Invalidate, LOCAL_MEMORY_ALIGN, LocalMemory,
    NON_THROTTLED_C_DEFAULT, PcasAction,
};

use crate::{
    arena::{Arena, GRANULE},
    cbank0::Cbank0Error,
    copy::{self, CopyChannel},
    graph::Recorded,
    launch::{Dim3, LaunchError, Shape},
    load::{self, Kernel, LoadError, Module},
    memory::{self, Alloc, Memory, MemoryError, Span},
    occupancy::{self, CooperativeError},
    params::Arg,
    qmd::{QmdError, QmdVersion},
    template::{self, Key, Spec, Template},
    window::{self, Geometry, WindowError, Windows},
};

pub use crate::window::GH100;

/// Slots per template: launches of one (kernel, shape) in flight at once.
pub const SLOTS: usize = 64;
pub use crate::template::WORKSPACE;

/// How a compute channel is opened.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ComputeOptions {
    /// Ring entries.
    pub entries: u64,
    /// Pushbuffer bytes.
    pub pushbuffer: u64,
    /// Arena bytes (QMDs and constant banks: about 1 KiB per slot of a small kernel).
    pub arena: u64,
    /// Where ring, pushbuffer and arena live: [`Rings::Gpu`] (trusted uids) saves the
    /// GPU's fetches across PCIe, the QMD's and bank 0's among them.
    pub rings: Rings,
    /// The GPU's shape, for sizing local memory; `None` (the default): the session's
    /// GPU as rigd reported it ([`Geometry::of_session`]).
    pub geometry: Option<Geometry>,
    /// How long a launch may wait for a slot or room in the pushbuffer (a launch waits
    /// only when that many of its launches are still in flight).
    pub timeout: Duration,
    /// Push INVALIDATE_SHADER_CACHES (instruction, global data and constant caches)
    /// before every launch, not only after a module was loaded. Off by default: each
    /// QMD invalidates the data caches and its constant banks itself, and the H200 ran
    /// every fixture kernel right without it, with a launch's round trip 0.16 µs
    /// shorter (docs/hardware/nvidia-compute.md, "What the H200 ran").
    pub invalidate_each_launch: bool,
    /// Slots per template.
    pub slots: usize,
    /// SEND_SIGNALING_PCAS2_B's action: INVALIDATE_PREFETCH_COPY_SCHEDULE (libcuda's,
    /// the default: 10,000 launches back to back took 1.79 µs each on the H200 against
    /// 1.93 µs, every fixture kernel right with either) or INVALIDATE_COPY_SCHEDULE
    /// (Mesa NVK's) (docs/hardware/nvidia-compute.md, "What the H200 ran").
    pub pcas: PcasAction,
    /// A host WFI ahead of every launch, so that a channel's grids run one after another
    /// and release in order (true: a value that landed then means every launch before
    /// it is done, and a slot is rewritten only after its QMD retired). False lets grids
    /// overlap; then a wait's value no longer covers the launches before it
    /// (docs/compute.md, "Completion").
    pub ordered: bool,
    /// Chain a launch behind the one before it when that one is still queued (launches
    /// enqueued back to back, or under held doorbells): the earlier QMD schedules the
    /// next itself once its grid is done (DEPENDENT_QMD0), instead of a host WFI and a
    /// SEND_PCAS between them (docs/compute.md, "Chained launches"). Needs `ordered`.
    /// On by default: on an H100 the second of two queued kernels started 2.3 µs after
    /// the first ended, against 4.3 µs behind a WFI (CUDA's stream: 2.0), and a queued
    /// launch cost the host 0.29 µs chained against 0.11 not (medians of one run);
    /// launches submitted one by one never chain.
    pub chain: bool,
}

impl Default for ComputeOptions {
    fn default() -> Self {
        Self {
            entries: 1024,
            pushbuffer: 256 << 10,
            arena: 1 << 20,
            rings: Rings::Host,
            geometry: None,
            // TIMEOUT: a launch waits for one that went 64 launches before it; kernels
            // of seconds are the caller's to wait for with a longer timeout first.
            timeout: Duration::from_secs(10),
            invalidate_each_launch: false,
            ordered: true,
            chain: true,
            pcas: PcasAction::InvalidatePrefetchCopySchedule,
            slots: SLOTS,
        }
    }
}

/// Why a launch, a load or a copy kernel was refused or did not complete.
#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    /// The channel's own error: a posted fault (the RM's reason), a timeout, a full
    /// ring.
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// A grid, block or shared memory size sm_90 or the kernel does not allow.
    #[error("The launch's shape is refused")]
    Shape(#[from] LaunchError),
    /// Arguments that do not match the kernel's parameters.
    #[error("The launch's arguments are refused")]
    Params(#[from] Cbank0Error),
    /// A QMD that cannot describe the launch (more local memory than the channel holds).
    #[error("The launch cannot be described")]
    Qmd(#[from] QmdError),
    /// A QMD version whose release payload straddles two 64-bit words, which a launch
    /// template cannot patch with one store (V05_00; no Blackwell GPU is served yet).
    #[error(
        "QMD {version:?} keeps the release payload in two 64-bit words; launch templates patch one"
    )]
    Unpatchable {
        /// The version.
        version: QmdVersion,
    },
    /// A method word that cannot be sent.
    #[error(transparent)]
    Words(#[from] WordError),
    /// Windows or local memory that cannot be programmed.
    #[error(transparent)]
    Window(#[from] WindowError),
    /// Memory for the SLM buffer.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// A module that did not load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A copy the copy kernel does not do.
    #[error(transparent)]
    Copy(#[from] Box<copy::CopyError>),
    /// A cooperative launch whose blocks cannot all be resident at once.
    #[error("The cooperative launch of {kernel} is refused")]
    Cooperative {
        /// The kernel.
        kernel: String,
        /// Why.
        #[source]
        source: CooperativeError,
    },
    /// A launch template larger than the arena.
    #[error("A launch of {kernel} needs {needed} bytes of arena; the channel has {len}")]
    Arena {
        /// The kernel.
        kernel: String,
        /// One slot's bytes.
        needed: u64,
        /// The arena's.
        len: u64,
    },
    /// A channel of another engine, or without an arena.
    #[error(
        "Channel {channel} drives the {engine:?} engine with {arena} bytes of arena: a compute channel needs the compute engine and an arena"
    )]
    NotCompute {
        /// rigd's handle.
        channel: u64,
        /// Its engine.
        engine: Engine,
        /// Its arena.
        arena: u64,
    },
    /// A kernel of a module loaded into another session's address space: its code
    /// and constant banks are not at those addresses in this channel's.
    #[error(
        "Kernel {kernel} was loaded by session {module_session}; this channel is session {channel_session}'s"
    )]
    ForeignKernel {
        /// Its name.
        kernel: String,
        /// The session that loaded its module.
        module_session: u64,
        /// The channel's.
        channel_session: u64,
    },
    /// The copy kernel copies 16-byte words.
    #[error(
        "The copy kernel moves 16-byte words: {len} bytes between {src} and {dst} are not all 16-byte aligned"
    )]
    Unaligned {
        /// Source.
        src: GpuVa,
        /// Destination.
        dst: GpuVa,
        /// Length.
        len: u64,
    },
}

impl From<copy::CopyError> for ComputeError {
    fn from(e: copy::CopyError) -> Self {
        Self::Copy(Box::new(e))
    }
}

/// A lent compute channel that launches kernels. Give it back with
/// [`ComputeChannel::close`], which stops and drains the channel in rigd before its
/// memory is freed here; one dropped with launches in flight keeps its pushbuffer,
/// arena and semaphore out of use (as `Channel` does), but frees its local memory and
/// the modules only its templates held while the GPU may still use them: only this
/// session's memory, so only its own results can suffer.
#[derive(Debug)]
pub struct ComputeChannel {
    ch: Channel,
    windows: Windows,
    geometry: Geometry,
    /// The SLM buffer and the local memory per thread it holds.
    slm: Option<Box<dyn Memory>>,
    /// Cooperative launches' grid workspaces, one per arena granule
    /// (`ensure_workspaces`).
    workspaces: Option<Box<dyn Memory>>,
    local_capacity: u64,
    arena_va: GpuVa,
    arena: Arena,
    templates: Vec<Template>,
    last: usize,
    launches: u64,
    /// The value known landed.
    completed: u64,
    /// `load::generation` at the last invalidate.
    generation: u64,
    timeout: Duration,
    invalidate_each_launch: bool,
    ordered: bool,
    chain: bool,
    /// The last launch pushed: (template, slot, value), what a next launch may chain
    /// behind while it is still queued.
    tail: Option<(usize, usize, u64)>,
    pcas: PcasAction,
    /// The QMD version the channel's compute class reads.
    qmd: QmdVersion,
    slots: usize,
}

impl ComputeChannel {
    /// Opens a compute channel in `session` and pushes its set-up (submitted with the
    /// first launch).
    ///
    /// # Errors
    /// [`ComputeError::Channel`] with rigd's refusal (`GpuRingsRefused` for GPU rings
    /// outside the trusted group, `BadRing` for a window over its limit).
    pub async fn open(session: &Session, o: ComputeOptions) -> Result<Self, ComputeError> {
        let opts = Options {
            entries: o.entries,
            pushbuffer: o.pushbuffer,
            arena: o.arena,
            rings: o.rings,
        };
        let ch = Channel::open_opts(session, Engine::Compute, opts).await?;
        let o = ComputeOptions {
            geometry: Some(o.geometry.unwrap_or_else(|| Geometry::of_session(session))),
            ..o
        };
        Self::from_channel(ch, o).map_err(|b| b.0)
    }

    /// Launches on `ch`, which must be a compute channel with an arena; another comes
    /// back with the refusal, nothing pushed.
    ///
    /// # Errors
    /// [`ComputeError::NotCompute`] (a copy channel, no arena), with the channel.
    pub fn from_channel(
        mut ch: Channel,
        o: ComputeOptions,
    ) -> Result<Self, Box<(ComputeError, Channel)>> {
        let arena_va = match ch.arena_va() {
            Some(va) if ch.engine() == Engine::Compute => va,
            _ => {
                let e = ComputeError::NotCompute {
                    channel: ch.id(),
                    engine: ch.engine(),
                    arena: ch.arena_len(),
                };
                return Err(Box::new((e, ch)));
            }
        };
        let setup = (|| -> Result<(Windows, QmdVersion), ComputeError> {
            let qmd = crate::qmd::for_class(rig_client::channel::GENERATION.compute)?;
            let windows = Windows::new(SHARED_WINDOW, LOCAL_WINDOW)?;
            ch.push(&words::set_shared_memory_window(windows.shared())?)?;
            ch.push(&words::set_local_memory_window(windows.local())?)?;
            ch.push(&words::invalidate_sked_caches())?;
            ch.push(&words::invalidate_sampler_cache())?;
            ch.push(&words::invalidate_texture_header_cache())?;
            Ok((windows, qmd))
        })();
        let (windows, qmd) = match setup {
            Ok(w) => w,
            Err(e) => return Err(Box::new((e, ch))),
        };
        Ok(Self {
            arena: Arena::new(ch.arena_len()),
            ch,
            windows,
            geometry: o.geometry.unwrap_or(GH100),
            slm: None,
            workspaces: None,
            local_capacity: 0,
            arena_va,
            templates: Vec::new(),
            last: 0,
            launches: 0,
            completed: 0,
            generation: 0,
            timeout: o.timeout,
            invalidate_each_launch: o.invalidate_each_launch,
            ordered: o.ordered,
            chain: o.chain && o.ordered,
            tail: None,
            pcas: o.pcas,
            qmd,
            slots: o.slots.max(1),
        })
    }

    /// Whether launches queued back to back chain through their QMDs
    /// ([`ComputeOptions::chain`]; never when grids may overlap).
    pub fn chains(&self) -> bool {
        self.chain
    }

    /// Chains launches queued back to back from the next one on (`on`), or stops.
    pub fn set_chain(&mut self, on: bool) {
        self.chain = on && self.ordered;
    }

    /// The lent channel.
    pub fn channel(&mut self) -> &mut Channel {
        &mut self.ch
    }

    /// Local memory per thread the channel's SLM buffer holds.
    pub fn local_capacity(&self) -> u64 {
        self.local_capacity
    }

    /// The memory windows.
    pub fn windows(&self) -> Windows {
        self.windows
    }

    /// Loads `bytes` (`load::load`, uploaded through `copies`) into memory from
    /// `alloc`, and sizes the SLM buffer for its largest stack.
    ///
    /// # Errors
    /// [`ComputeError::Load`], and as [`ComputeChannel::ensure_local`].
    pub async fn load<A: Alloc>(
        &mut self,
        session: &Session,
        copies: &mut CopyChannel,
        alloc: &A,
        bytes: &[u8],
    ) -> Result<Module, ComputeError> {
        let m = load::load(session, copies, alloc, bytes, self.timeout).await?;
        self.ensure_local(session, alloc, m.local_bytes()).await?;
        self.ensure_workspaces(session, copies, alloc).await?;
        Ok(m)
    }

    /// Gives the channel its cooperative launches' grid workspaces, once: 16 bytes per
    /// granule of the arena from `alloc` (GPU memory, where the session has it: every
    /// block of a grid sync polls its barrier), zeroed through `copies`. A cooperative
    /// launch's slot uses the one of the granule its QMD starts at, so no two slots
    /// share one. [`ComputeChannel::load`] calls it.
    ///
    /// # Errors
    /// [`ComputeError::Memory`]; [`ComputeError::Copy`] (the zeroing fill and its wait).
    pub async fn ensure_workspaces<A: Alloc>(
        &mut self,
        session: &Session,
        copies: &mut CopyChannel,
        alloc: &A,
    ) -> Result<(), ComputeError> {
        if self.workspaces.is_some() {
            return Ok(());
        }
        let len = (self.arena.len() / GRANULE).max(1) * WORKSPACE;
        let mem = alloc.alloc(session, len, WORKSPACE).await?;
        let v = copies.fill(session, Span::new(&mem, 0, len)?, 0)?;
        copies.wait(v, self.timeout)?;
        self.workspaces = Some(Box::new(mem));
        Ok(())
    }

    /// Makes the SLM buffer hold `per_thread` bytes of local memory per thread: a new
    /// buffer from `alloc` (sized for the GPU's geometry) once everything submitted
    /// has completed, programmed with SET_SHADER_LOCAL_MEMORY (docs/hardware/
    /// nvidia-compute.md, "Once per channel").
    ///
    /// # Errors
    /// [`ComputeError::Window`] for a size past the local window,
    /// [`ComputeError::Memory`], [`ComputeError::Channel`] (the wait for earlier work).
    pub async fn ensure_local<A: Alloc>(
        &mut self,
        session: &Session,
        alloc: &A,
        per_thread: u64,
    ) -> Result<(), ComputeError> {
        if per_thread <= self.local_capacity {
            return Ok(());
        }
        let slm = window::slm(per_thread, self.geometry)?;
        let mem = alloc.alloc(session, slm.total, LOCAL_MEMORY_ALIGN).await?;
        // Kernels in flight may use the old buffer: they finish first.
        self.drain()?;
        let addr = memory::gpu_va(&mem)?;
        self.ch.push(&words::set_local_memory(LocalMemory {
            addr,
            per_tpc: slm.per_tpc,
            non_throttled_c: NON_THROTTLED_C_DEFAULT,
        })?)?;
        self.slm = Some(Box::new(mem));
        self.local_capacity = u64::from(slm.per_thread);
        Ok(())
    }

    /// Submits everything and waits until it completed.
    fn drain(&mut self) -> Result<(), ComputeError> {
        let last = self.ch.last_value();
        self.ch.submit()?;
        if last > self.completed {
            self.ch.wait(last, self.timeout)?;
            self.completed = last;
        }
        Ok(())
    }

    /// Enqueues a launch of `kernel` over `grid` blocks of `block` threads with
    /// `dynamic_shared` bytes of dynamic shared memory and `args` (one per parameter,
    /// sizes as the kernel's), without ringing the doorbell; returns the value its QMD
    /// releases when the grid is done. Every refusal comes before anything is written.
    ///
    /// # Errors
    /// [`ComputeError::Shape`] (an extent of 0 or over the limits, too many threads,
    /// more shared memory than an SM has), [`ComputeError::Params`] (a wrong count or
    /// size), [`ComputeError::Qmd`] (more local memory than the channel holds),
    /// [`ComputeError::Arena`]; [`ComputeError::Channel`] when a wait for a slot or
    /// pushbuffer room fails.
    pub fn enqueue(
        &mut self,
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_shared: u32,
        args: &[Arg<'_>],
    ) -> Result<u64, ComputeError> {
        let key = Key {
            kernel: kernel.id,
            grid: grid.into(),
            block: block.into(),
            dynamic_shared,
            cooperative: false,
        };
        self.enqueue_keyed(kernel, key, args)
    }

    /// [`ComputeChannel::enqueue`] as a cooperative launch (CUDA's
    /// `cuLaunchCooperativeKernel`): every block resident at once, and a grid workspace
    /// of the launch's own, so that `cooperative_groups::this_grid().sync()` works
    /// (docs/compute.md, "Cooperative launches").
    ///
    /// # Errors
    /// [`ComputeError::Cooperative`] for a grid the GPU's SMs cannot hold at once (it
    /// names the SMs, the blocks each holds and what bounds them) or a GPU whose SM
    /// count rigd did not read; otherwise as [`ComputeChannel::enqueue`].
    pub fn enqueue_cooperative(
        &mut self,
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_shared: u32,
        args: &[Arg<'_>],
    ) -> Result<u64, ComputeError> {
        let key = Key {
            kernel: kernel.id,
            grid: grid.into(),
            block: block.into(),
            dynamic_shared,
            cooperative: true,
        };
        self.enqueue_keyed(kernel, key, args)
    }

    /// [`ComputeChannel::enqueue_cooperative`], then submit.
    ///
    /// # Errors
    /// As [`ComputeChannel::enqueue_cooperative`].
    pub fn launch_cooperative(
        &mut self,
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_shared: u32,
        args: &[Arg<'_>],
    ) -> Result<u64, ComputeError> {
        let v = self.enqueue_cooperative(kernel, grid, block, dynamic_shared, args)?;
        self.ch.submit()?;
        Ok(v)
    }

    /// Enqueues a launch recorded in a graph (`Runtime::replay`): its shape and
    /// arguments were checked when it was recorded or patched, and its parameter bytes
    /// are copied as they are.
    ///
    /// # Errors
    /// As [`ComputeChannel::enqueue`], but for the shape and the arguments.
    pub(crate) fn enqueue_recorded(&mut self, r: &Recorded) -> Result<u64, ComputeError> {
        let i = self.template(&r.kernel, r.key)?;
        self.templates[i].lay_bytes(&r.params);
        self.enqueue_laid(i)
    }

    fn enqueue_keyed(
        &mut self,
        kernel: &Kernel,
        key: Key,
        args: &[Arg<'_>],
    ) -> Result<u64, ComputeError> {
        let i = self.template(kernel, key)?;
        self.templates[i].lay(args)?;
        self.enqueue_laid(i)
    }

    /// Enqueues a launch from template `i`, its arguments laid out.
    fn enqueue_laid(&mut self, i: usize) -> Result<u64, ComputeError> {
        self.launches += 1;
        let t = &mut self.templates[i];
        t.used = self.launches;
        let busy = t.busy();
        if busy > self.completed {
            self.completed = self.ch.completed()?;
            if busy > self.completed {
                // The slot's last launch is still in flight: it must have been sent.
                self.ch.submit()?;
                self.ch.wait(busy, self.timeout)?;
                self.completed = busy;
            }
        }
        let value = self.ch.next_value()?;
        let slot = t.write_slot(value, &self.ch)?;
        let this = (i, t.next_slot());
        // Only behind work not yet seen done: with nothing in flight, no grid can run
        // beside this one, and a WFI would only cost the GPU its time.
        let wfi = self.ordered && self.ch.last_value() > self.completed;
        let generation = load::generation();
        let invalidate = self.invalidate_each_launch || self.generation != generation;
        // Behind the launch before it, still queued: its QMD starts this one.
        let behind = self
            .tail
            .filter(|&(_, _, v)| self.chain && !invalidate && self.ch.tail_queued(v));
        if let Some((ti, si, after)) = behind {
            let next = self.templates[this.0].qmd_va(this.1);
            self.templates[ti].chain(si, Some(next), &self.ch)?;
            self.ch.promise_chained(after, value)?;
            self.templates[this.0].commit(value);
            self.tail = Some((this.0, this.1, value));
            return Ok(value);
        }
        let push = |ch: &mut Channel| {
            if invalidate {
                // Rare (after a module load): the words go through the pushbuffer.
                let mut w = [0u32; 8];
                let mut n = 0;
                if wfi {
                    w[..2].copy_from_slice(&rig_nv::method::wfi());
                    n = 2;
                }
                w[n..n + 2].copy_from_slice(&words::invalidate_shader_caches(Invalidate::ALL));
                w[n + 2..n + 6].copy_from_slice(&slot.pcas);
                ch.push_released(&w[..n + 6], value)
            } else {
                let (va, n) = slot.segment(wfi);
                ch.push_segment_released(va, n, value)
            }
        };
        match push(&mut self.ch) {
            // Earlier launches hold the pushbuffer or the ring: once they are done, it
            // is free.
            Err(ChannelError::PushbufferFull { .. } | ChannelError::RingFull { .. }) => {
                self.drain()?;
                push(&mut self.ch)?;
            }
            other => {
                other?;
            }
        }
        // Only once the invalidation is pushed: a refused push leaves it owed.
        self.generation = generation;
        self.templates[i].commit(value);
        self.tail = Some((this.0, this.1, value));
        Ok(value)
    }

    /// [`ComputeChannel::enqueue`], then submit: the GPU starts the grid.
    ///
    /// # Errors
    /// As [`ComputeChannel::enqueue`].
    pub fn launch(
        &mut self,
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_shared: u32,
        args: &[Arg<'_>],
    ) -> Result<u64, ComputeError> {
        let v = self.enqueue(kernel, grid, block, dynamic_shared, args)?;
        self.ch.submit()?;
        Ok(v)
    }

    /// Makes the next launch wait on the GPU until `fence` landed: a semaphore
    /// acquire on this channel for another channel's value (rig-client's
    /// `Channel::acquire`). For this channel's own value nothing is needed while grids
    /// run in order; with [`ComputeOptions::ordered`] off, a WFI, unless the value
    /// already landed.
    ///
    /// # Errors
    /// [`ComputeError::Channel`]: a fence of another session (`ForeignFence`), a full
    /// pushbuffer.
    pub fn acquire(&mut self, fence: Fence) -> Result<(), ComputeError> {
        if fence.channel != self.ch.id() {
            self.ch.acquire(fence)?;
            return Ok(());
        }
        self.after_own(fence.value)
    }

    /// Makes the next launch start after this channel's own `value`: nothing while
    /// grids run in order; with [`ComputeOptions::ordered`] off, a WFI unless it
    /// landed. Nothing is submitted.
    ///
    /// # Errors
    /// [`ComputeError::Channel`]: a full pushbuffer.
    pub fn after_own(&mut self, value: u64) -> Result<(), ComputeError> {
        if !self.ordered && value > self.completed {
            self.completed = self.completed.max(self.ch.completed()?);
            if value > self.completed {
                self.ch.push(&rig_nv::method::wfi())?;
            }
        }
        Ok(())
    }

    /// Rings the doorbell for everything enqueued.
    ///
    /// # Errors
    /// [`ComputeError::Channel`] (`RingFull`).
    pub fn submit(&mut self) -> Result<(), ComputeError> {
        Ok(self.ch.submit()?)
    }

    /// Waits up to `timeout` until the launch that returned `value` (and every one
    /// before it) is done; a kernel that faulted comes back as the RM's fault, typed,
    /// never as done.
    ///
    /// # Errors
    /// [`ComputeError::Channel`] (`Fault`, `Timeout`).
    pub fn wait(&mut self, value: u64, timeout: Duration) -> Result<(), ComputeError> {
        self.ch.wait(value, timeout)?;
        self.completed = self.completed.max(value);
        Ok(())
    }

    /// Copies `src` to `dst` (16-byte aligned, a multiple of 16 bytes, in the
    /// session's memory) with `copy_kernel` (`copy_u4` of the runtime's own cubin:
    /// `builtin`), and submits; returns the value its QMD releases.
    ///
    /// # Errors
    /// [`ComputeError::Copy`] (an end the session does not hold, lengths that
    /// differ), [`ComputeError::Unaligned`], as [`ComputeChannel::launch`].
    pub fn copy(
        &mut self,
        session: &Session,
        copy_kernel: &Kernel,
        src: Span<'_>,
        dst: Span<'_>,
    ) -> Result<u64, ComputeError> {
        let v = self.enqueue_copy(session, copy_kernel, src, dst)?;
        self.ch.submit()?;
        Ok(v)
    }

    /// [`ComputeChannel::copy`] without ringing the doorbell
    /// ([`ComputeChannel::submit`]).
    ///
    /// # Errors
    /// As [`ComputeChannel::copy`].
    pub fn enqueue_copy(
        &mut self,
        session: &Session,
        copy_kernel: &Kernel,
        src: Span<'_>,
        dst: Span<'_>,
    ) -> Result<u64, ComputeError> {
        copy::check(session, &src, &dst)?;
        let len = src.len();
        if !(src.va().is_aligned(16) && dst.va().is_aligned(16) && len.is_multiple_of(16)) {
            return Err(ComputeError::Unaligned {
                src: src.va(),
                dst: dst.va(),
                len,
            });
        }
        let n16 = len / 16;
        let blocks = u32::try_from(n16.div_ceil(COPY_BLOCK.into()).min(COPY_GRID.into()))
            .unwrap_or(COPY_GRID);
        self.enqueue(
            copy_kernel,
            blocks,
            COPY_BLOCK,
            0,
            &[Arg::Ptr(src.va()), Arg::Ptr(dst.va()), Arg::U64(n16)],
        )
    }

    /// Closes the channel in rigd.
    ///
    /// # Errors
    /// As `Channel::close`.
    pub async fn close(self, session: &Session) -> Result<(), ComputeError> {
        Ok(self.ch.close(session).await?)
    }

    /// Slots a template gets ([`ComputeOptions::slots`]).
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// Makes the template for `key` hold `slots` slots, or as many as half the arena
    /// holds (`Runtime::replay`: a graph with more launches of one kernel in one shape than a
    /// template's slots would wait mid-replay for its own launches to land). A template
    /// with fewer is built again once its launches have all landed; one with launches
    /// in flight is left as it is. Nothing for `slots` within the channel's
    /// ([`ComputeOptions::slots`]).
    ///
    /// # Errors
    /// As a launch's first template: [`ComputeError::ForeignKernel`], the shape's,
    /// [`ComputeError::Arena`]; the channel's.
    pub(crate) fn reserve(
        &mut self,
        kernel: &Kernel,
        key: Key,
        slots: usize,
    ) -> Result<(), ComputeError> {
        // At most half the arena: the graph's other kernels need templates too.
        let half =
            usize::try_from(self.arena.len() / 2 / template::stride(self.qmd, kernel.info()))
                .unwrap_or(usize::MAX);
        let slots = slots.min(half);
        if slots <= self.slots {
            return Ok(());
        }
        if let Some(i) = self.templates.iter().position(|t| t.key == key) {
            if self.templates[i].slot_count() >= slots {
                return Ok(());
            }
            self.completed = self.completed.max(self.ch.completed()?);
            if self.templates[i].last_value() > self.completed {
                return Ok(());
            }
            self.remove(i);
        }
        self.build(kernel, key, slots).map(drop)
    }

    /// The index of the template for `key`: the last one used, one kept, or a new one
    /// (which may first give back idle templates' arena).
    fn template(&mut self, kernel: &Kernel, key: Key) -> Result<usize, ComputeError> {
        if self.templates.get(self.last).is_some_and(|t| t.key == key) {
            return Ok(self.last);
        }
        if let Some(i) = self.templates.iter().position(|t| t.key == key) {
            self.last = i;
            return Ok(i);
        }
        self.build(kernel, key, self.slots)
    }

    /// Builds the template for `key` with up to `slots` slots (as many as the arena
    /// holds), giving back idle templates' arena first where it is full; returns its
    /// index.
    fn build(&mut self, kernel: &Kernel, key: Key, slots: usize) -> Result<usize, ComputeError> {
        // Only here, where a kernel gets its first template: the lookups before match
        // only kernels that passed (a key names its kernel, unique in the process).
        if kernel.module.session != self.ch.session() {
            return Err(ComputeError::ForeignKernel {
                kernel: kernel.name().into(),
                module_session: kernel.module.session.0,
                channel_session: self.ch.session().0,
            });
        }
        let shape = Shape::new(kernel.info(), key.grid, key.block, key.dynamic_shared)?;
        let refused = |source| ComputeError::Cooperative {
            kernel: kernel.name().into(),
            source,
        };
        let (co_resident, workspaces) = if key.cooperative {
            let n =
                occupancy::cooperative(kernel.info(), &shape, self.geometry).map_err(refused)?;
            let ws = self
                .workspaces
                .as_deref()
                .and_then(Memory::va)
                .ok_or(CooperativeError::NoWorkspace)
                .map_err(refused)?;
            (n, Some(ws))
        } else {
            (0, None)
        };
        let stride = template::stride(self.qmd, kernel.info());
        let slots = usize::try_from(self.arena.len() / stride)
            .unwrap_or(usize::MAX)
            .min(slots);
        if slots == 0 {
            return Err(ComputeError::Arena {
                kernel: kernel.name().into(),
                needed: stride,
                len: self.arena.len(),
            });
        }
        let bytes = stride * slots as u64;
        let region = loop {
            if let Some(r) = self.arena.alloc(bytes) {
                break r;
            }
            self.evict()?;
        };
        let spec = Spec {
            arena_va: self.arena_va,
            semaphore: self.ch.semaphore_va(),
            windows: self.windows,
            local_capacity: self.local_capacity,
            pcas: self.pcas,
            qmd: self.qmd,
        };
        let coop = template::Cooperative {
            co_resident,
            workspaces,
        };
        match Template::build(spec, kernel, shape, coop, region, slots) {
            Ok(t) => {
                self.templates.push(t);
                self.last = self.templates.len() - 1;
                Ok(self.last)
            }
            Err(e) => {
                self.arena.free(region, bytes);
                Err(e)
            }
        }
    }

    /// Gives back the least recently used template whose launches all landed (after
    /// waiting for everything, when none has).
    fn evict(&mut self) -> Result<(), ComputeError> {
        if self.templates.is_empty() {
            return Err(ComputeError::Arena {
                kernel: String::new(),
                needed: self.arena.len() + 1,
                len: self.arena.len(),
            });
        }
        self.completed = self.completed.max(self.ch.completed()?);
        let lru = |templates: &[Template], completed: u64| {
            templates
                .iter()
                .enumerate()
                .filter(|(_, t)| t.last_value() <= completed)
                .min_by_key(|(_, t)| t.used)
                .map(|(i, _)| i)
        };
        let i = match lru(&self.templates, self.completed) {
            Some(i) => i,
            None => {
                // Every template has a launch in flight: once all landed, each is idle.
                self.drain()?;
                lru(&self.templates, u64::MAX).unwrap_or(0)
            }
        };
        self.remove(i);
        Ok(())
    }

    /// Gives template `i`, whose launches all landed, its arena back.
    fn remove(&mut self, i: usize) {
        let t = self.templates.swap_remove(i);
        self.arena.free(t.region, t.bytes());
        self.last = 0;
        // The last template moved into `i`; the removed one's launches all landed.
        self.tail = match self.tail {
            Some((ti, ..)) if ti == i => None,
            Some((ti, si, v)) if ti == self.templates.len() => Some((i, si, v)),
            other => other,
        };
    }
}

/// The copy kernel's block: 512 threads, and its largest grid, 8 blocks per SM of the
/// H200's 132 (the shape that moved 1949 GB/s there: docs/hardware/nvidia-compute.md).
const COPY_BLOCK: u32 = 512;
const COPY_GRID: u32 = 132 * 8;
