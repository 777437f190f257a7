//! A session's GPU work in one place: a compute channel, a copy channel and the copy
//! kernel, with copies sent to whichever does them fastest.
//!
//! Flow: [`Runtime::open`] opens both channels and loads the runtime's own cubin
//! (`builtin`) into memory from the caller's [`Alloc`]; [`Runtime::load`] loads a
//! cubin; kernels launch on [`Runtime::compute`]; [`Runtime::copy`] copies between
//! host leases and GPU memory on the copy engine, and between two places in GPU memory
//! with the copy kernel (16-byte aligned copies; others on the copy engine), and says
//! in its [`Done`] which engine releases the value.
//!
//! Ordering: work on one channel follows that channel's earlier work. Work that needs
//! the other channel's ([`Runtime::launch`], [`Runtime::copy_after`],
//! [`Runtime::fill`] with `after`) waits for it on the GPU: a semaphore acquire on its
//! own channel for each [`Done`] not yet landed (rig-client's `channel::fence`), so
//! the host never waits between a copy and the kernel that reads it
//! (docs/compute.md, "Dependencies").
//!
//! Streams: a runtime is one stream of compute and one of copies. More streams are more
//! runtimes on the same session; work on one waits for another's on the GPU through
//! [`Runtime::export`] (a fence) and [`Runtime::import`] (an acquire). Between
//! sessions of one uid (CUDA's IPC events): [`Runtime::record_shared`] records an
//! event the session exported, [`Runtime::wait_shared`] makes a channel wait for an
//! imported one on the GPU, [`Runtime::wait_event`] makes the host wait
//! (rig-client's `event`).
//!
//! Graphs: [`Runtime::replay`] queues a recorded [`Graph`] on the compute channel in one
//! call (module `graph`).
//!
//! Values in memory: [`Runtime::write_value`] has a channel write a 64-bit value (and
//! the GPU's time) into the session's memory after its work, [`Runtime::wait_value`]
//! has a channel wait until a value there reaches one: ordering on signals that the
//! host or another device sets too (module `value`).
//!
//! State: the two channels and the copy kernel's module. Not here: the checks (each
//! channel's), GPU memory itself (the session's).

use std::{
    os::fd::{AsRawFd, RawFd},
    time::Duration,
};

use rig_client::{
    channel::{Channel, ChannelError, Engine, Fence, WaitPolicy},
    event::{EventError as SharedError, ExportedEvent, ImportedEvent},
    session::Session,
};

use rig_nv::method::Release;

use crate::{
    builtin,
    compute::{ComputeChannel, ComputeError, ComputeOptions},
    copy::{CopyChannel, CopyError, CopyOptions},
    event::{Event, EventError, EventPage},
    graph::{Graph, GraphError, Submit},
    launch::Dim3,
    load::{self, Kernel, Module},
    memory::{Alloc, Place, Span},
    params::Arg,
    value::{self, Use, ValueError},
};

/// How a runtime's channels are opened.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RuntimeOptions {
    /// The compute channel.
    pub compute: ComputeOptions,
    /// The copy channel.
    pub copy: CopyOptions,
}

/// What a copy or a launch returns: the value, and the engine whose channel releases it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// The engine that releases it.
    pub engine: Engine,
    /// The value.
    pub value: u64,
}

/// Why a runtime call failed.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The compute channel's.
    #[error(transparent)]
    Compute(#[from] ComputeError),
    /// The copy channel's.
    #[error(transparent)]
    Copy(#[from] CopyError),
    /// An event's.
    #[error(transparent)]
    Event(#[from] EventError),
    /// An event shared with another session's.
    #[error(transparent)]
    Shared(#[from] SharedError),
    /// A graph's refusal, before anything was queued.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A value's place refused ([`Runtime::write_value`], [`Runtime::wait_value`]),
    /// before anything was pushed.
    #[error(transparent)]
    Value(#[from] ValueError),
    /// A launch of a graph the compute channel refused; the launches before it were
    /// submitted.
    #[error("Launch {launch} of the graph ({kernel}) is refused")]
    Replay {
        /// Its index in the graph.
        launch: usize,
        /// Its kernel.
        kernel: String,
        /// The compute channel's refusal.
        #[source]
        source: Box<ComputeError>,
    },
}

/// A compute channel, a copy channel and the copy kernel of one session.
#[derive(Debug)]
pub struct Runtime {
    compute: ComputeChannel,
    copies: CopyChannel,
    copy_kernel: Kernel,
    _builtin: Module,
    events: Option<EventPage>,
    /// Doorbells held ([`Runtime::hold`]): work is queued on both channels and
    /// submitted at [`Runtime::submit`] or before a wait.
    held: bool,
}

impl Runtime {
    /// Opens the two channels in `session` and loads the copy kernel into memory from
    /// `alloc` (GPU memory, where the session has it).
    ///
    /// # Errors
    /// Either channel's refusal; the copy kernel's load.
    pub async fn open<A: Alloc>(
        session: &Session,
        alloc: &A,
        o: RuntimeOptions,
    ) -> Result<Self, RuntimeError> {
        let mut copies = CopyChannel::open(session, o.copy).await?;
        let compute = ComputeChannel::open(session, o.compute).await?;
        // Not `ComputeChannel::load`: the cubin's other kernels have stacks, but the
        // copy kernel has none, so it needs no local memory.
        let module = load::load(
            session,
            &mut copies,
            alloc,
            builtin::CUBIN,
            o.compute.timeout,
        )
        .await
        .map_err(ComputeError::from)?;
        let events = EventPage::new(session).await?;
        let mut rt = Self::with(compute, copies, module)?;
        rt.events = Some(events);
        Ok(rt)
    }

    /// A runtime of channels opened by the caller, with `builtin` the runtime's own
    /// cubin ([`builtin::CUBIN`]) loaded already.
    ///
    /// # Errors
    /// [`ComputeError::Load`] when `builtin` has no copy kernel.
    pub fn with(
        compute: ComputeChannel,
        copies: CopyChannel,
        builtin: Module,
    ) -> Result<Self, RuntimeError> {
        let copy_kernel = builtin
            .kernel(builtin::COPY_KERNEL)
            .map_err(ComputeError::from)?;
        Ok(Self {
            compute,
            copies,
            copy_kernel,
            _builtin: builtin,
            events: None,
            held: false,
        })
    }

    /// Gives a runtime built by [`Runtime::with`] its event page ([`EventPage::on`]).
    pub fn set_event_page(&mut self, page: EventPage) {
        self.events = Some(page);
    }

    /// Records an event on `engine`'s channel: when that engine has finished
    /// everything submitted to it before, and everything in `after` landed (waited
    /// for on the GPU, as [`Runtime::order`] does), the GPU writes its timer into the
    /// event (module `event`). Submits.
    ///
    /// # Errors
    /// [`EventError::NoPage`]; [`Runtime::order`]'s; the channel's.
    pub fn record(&mut self, engine: Engine, after: &[Done]) -> Result<Event, RuntimeError> {
        if self.events.is_none() {
            return Err(EventError::NoPage.into());
        }
        self.order(engine, after)?;
        let page = self.events.as_mut().ok_or(EventError::NoPage)?;
        // As in `event_time`: the page and the channel are fields apart.
        let ch = match engine {
            Engine::Compute => self.compute.channel(),
            Engine::Copy => self.copies.channel(),
        };
        let ev = page.record(ch)?;
        self.ring(engine)?;
        Ok(ev)
    }

    /// Holds the doorbells: launches, copies, fills and events from now on are written
    /// to their channels and queued, and the GPU sees them at [`Runtime::submit`] (or
    /// at a wait, which submits first), so a run of work reaches the GPU as one
    /// submission per channel, and the GPU's time between two events is the work's,
    /// not the host's time between calls. A dependency on another channel still
    /// submits that channel first (an acquire never waits for unsent work).
    pub fn hold(&mut self) {
        self.held = true;
    }

    /// Rings both channels' doorbells for everything queued and ends a
    /// [`Runtime::hold`].
    ///
    /// # Errors
    /// Either channel's (`RingFull`).
    pub fn submit(&mut self) -> Result<(), RuntimeError> {
        self.held = false;
        self.flush()
    }

    /// Rings `engine`'s doorbell for what was just queued, unless doorbells are held.
    fn ring(&mut self, engine: Engine) -> Result<(), RuntimeError> {
        if !self.held {
            match engine {
                Engine::Compute => self.compute.submit()?,
                Engine::Copy => self.copies.submit()?,
            }
        }
        Ok(())
    }

    /// Rings both doorbells (nothing new rings none).
    fn flush(&mut self) -> Result<(), RuntimeError> {
        self.compute.submit()?;
        self.copies.submit()?;
        Ok(())
    }

    /// Waits up to `timeout` for `ev` and returns the GPU's time at it, in
    /// nanoseconds.
    ///
    /// # Errors
    /// As `EventPage::time`; [`EventError::NoPage`].
    pub fn event_time(&mut self, ev: Event, timeout: Duration) -> Result<u64, RuntimeError> {
        if self.held {
            self.flush()?;
        }
        let page = self.events.as_ref().ok_or(EventError::NoPage)?;
        // The page and the channel are fields apart: `channel()` would borrow all.
        let ch = match ev.engine {
            Engine::Compute => self.compute.channel(),
            Engine::Copy => self.copies.channel(),
        };
        Ok(page.time(ev, ch, timeout)?)
    }

    /// The GPU's nanoseconds from `start` to `end`, each waited for up to `timeout`:
    /// CUDA's `cuEventElapsedTime`, to the nanosecond.
    ///
    /// # Errors
    /// As [`Runtime::event_time`]; [`EventError::Reversed`].
    pub fn elapsed(
        &mut self,
        start: Event,
        end: Event,
        timeout: Duration,
    ) -> Result<u64, RuntimeError> {
        let (a, b) = (
            self.event_time(start, timeout)?,
            self.event_time(end, timeout)?,
        );
        Ok(EventPage::elapsed((start, a), (end, b))?)
    }

    /// The compute channel: launches.
    pub fn compute(&mut self) -> &mut ComputeChannel {
        &mut self.compute
    }

    /// The copy channel.
    pub fn copies(&mut self) -> &mut CopyChannel {
        &mut self.copies
    }

    /// Loads `bytes` into memory from `alloc` (`ComputeChannel::load`).
    ///
    /// # Errors
    /// As `ComputeChannel::load`.
    pub async fn load<A: Alloc>(
        &mut self,
        session: &Session,
        alloc: &A,
        bytes: &[u8],
    ) -> Result<Module, RuntimeError> {
        Ok(self
            .compute
            .load(session, &mut self.copies, alloc, bytes)
            .await?)
    }

    /// Copies `src` to `dst`, both checked against `session`'s ledger before anything
    /// is submitted: by the copy kernel when both are GPU memory and 16-byte aligned,
    /// on the copy engine otherwise. Returns which engine releases which value.
    ///
    /// # Errors
    /// The checks' refusals (memory not the session's, lengths), either channel's.
    pub fn copy(
        &mut self,
        session: &Session,
        src: Span<'_>,
        dst: Span<'_>,
    ) -> Result<Done, RuntimeError> {
        self.copy_after(session, src, dst, &[])
    }

    /// The engine whose channel [`Runtime::copy`] gives a copy from `src` to `dst`:
    /// the compute channel's copy kernel when both are GPU memory and 16-byte aligned,
    /// else the copy engine.
    pub fn copy_engine(src: &Span<'_>, dst: &Span<'_>) -> Engine {
        let by_kernel = src.place() == Place::Gpu
            && dst.place() == Place::Gpu
            && src.va().is_aligned(16)
            && dst.va().is_aligned(16)
            && src.len().is_multiple_of(16);
        if by_kernel {
            Engine::Compute
        } else {
            Engine::Copy
        }
    }

    /// [`Runtime::copy`], starting on the GPU only once everything in `after` landed.
    ///
    /// # Errors
    /// As [`Runtime::copy`]; [`Runtime::order`]'s.
    pub fn copy_after(
        &mut self,
        session: &Session,
        src: Span<'_>,
        dst: Span<'_>,
        after: &[Done],
    ) -> Result<Done, RuntimeError> {
        if Self::copy_engine(&src, &dst) == Engine::Compute {
            self.order(Engine::Compute, after)?;
            let value = self
                .compute
                .enqueue_copy(session, &self.copy_kernel, src, dst)?;
            self.ring(Engine::Compute)?;
            return Ok(Done {
                engine: Engine::Compute,
                value,
            });
        }
        self.order(Engine::Copy, after)?;
        let value = self.copies.enqueue_copy(session, src, dst)?;
        self.ring(Engine::Copy)?;
        Ok(Done {
            engine: Engine::Copy,
            value,
        })
    }

    /// Fills `dst` with the 32-bit `value` on the copy engine (`CopyChannel::fill`),
    /// starting on the GPU only once everything in `after` landed.
    ///
    /// # Errors
    /// As `CopyChannel::fill`; [`Runtime::order`]'s.
    pub fn fill(
        &mut self,
        session: &Session,
        dst: Span<'_>,
        value: u32,
        after: &[Done],
    ) -> Result<Done, RuntimeError> {
        self.order(Engine::Copy, after)?;
        let value = self.copies.enqueue_fill(session, dst, value)?;
        self.ring(Engine::Copy)?;
        Ok(Done {
            engine: Engine::Copy,
            value,
        })
    }

    /// Launches `kernel` (`ComputeChannel::launch`), starting on the GPU only once
    /// everything in `after` landed.
    ///
    /// # Errors
    /// As `ComputeChannel::launch`; [`Runtime::order`]'s.
    pub fn launch(
        &mut self,
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_shared: u32,
        args: &[Arg<'_>],
        after: &[Done],
    ) -> Result<Done, RuntimeError> {
        self.order(Engine::Compute, after)?;
        let value = self
            .compute
            .enqueue(kernel, grid, block, dynamic_shared, args)?;
        self.launched(value)
    }

    /// [`Runtime::launch`] as a cooperative launch
    /// (`ComputeChannel::enqueue_cooperative`): every block resident at once and a
    /// grid workspace, so the kernel's grid syncs work.
    ///
    /// # Errors
    /// As `ComputeChannel::enqueue_cooperative`; [`Runtime::order`]'s.
    pub fn launch_cooperative(
        &mut self,
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_shared: u32,
        args: &[Arg<'_>],
        after: &[Done],
    ) -> Result<Done, RuntimeError> {
        self.order(Engine::Compute, after)?;
        let value = self
            .compute
            .enqueue_cooperative(kernel, grid, block, dynamic_shared, args)?;
        self.launched(value)
    }

    /// Replays `graph` on the compute channel: its first launch starts on the GPU only
    /// once everything in `after` landed, each launch after the one before (chained
    /// through its QMD where they go in one run), and the doorbell rings as `submit`
    /// says — unless doorbells are held ([`Runtime::hold`]), when all of it waits for
    /// [`Runtime::submit`]. Returns the last launch's `Done`, which lands after every
    /// launch of the graph.
    ///
    /// # Errors
    /// [`GraphError::Empty`], [`Runtime::order`]'s, and [`RuntimeError::Replay`] for a
    /// template that could not be made large enough, before anything is queued;
    /// [`RuntimeError::Replay`]: a launch the channel refused (an arena too small for
    /// its template, a slot whose wait timed out), naming it. The launches queued
    /// before it are submitted, so a later wait sees them land.
    pub fn replay(
        &mut self,
        graph: &Graph,
        after: &[Done],
        submit: Submit,
    ) -> Result<Done, RuntimeError> {
        if graph.is_empty() {
            return Err(GraphError::Empty.into());
        }
        // A kernel-and-shape launched more times than a template has slots gets a
        // template that holds them all, so the replay never waits for its own launches.
        let refused = |launch: usize, source| RuntimeError::Replay {
            launch,
            kernel: graph.launches()[launch].kernel.name().into(),
            source: Box::new(source),
        };
        for (first, n) in graph.repeats(self.compute.slots()) {
            let r = &graph.launches()[first];
            self.compute
                .reserve(&r.kernel, r.key, n)
                .map_err(|e| refused(first, e))?;
        }
        self.order(Engine::Compute, after)?;
        // Where a run ends and the doorbell rings (`Submit::Early`): after launches 1,
        // 2, 4, 8…; never while the caller holds the doorbells.
        let mut cut = match submit {
            Submit::Early if !self.held => 1,
            _ => usize::MAX,
        };
        let mut value = 0;
        let mut failed = None;
        for (j, r) in graph.launches().iter().enumerate() {
            if j == cut {
                if let Err(e) = self.compute.submit() {
                    failed = Some((j, e));
                    break;
                }
                cut *= 2;
            }
            match self.compute.enqueue_recorded(r) {
                Ok(v) => value = v,
                Err(e) => {
                    failed = Some((j, e));
                    break;
                }
            }
        }
        let rung = self.ring(Engine::Compute);
        if let Some((launch, e)) = failed {
            return Err(refused(launch, e));
        }
        rung?;
        Ok(Done {
            engine: Engine::Compute,
            value,
        })
    }

    /// Rings for a launch just queued on the compute channel.
    fn launched(&mut self, value: u64) -> Result<Done, RuntimeError> {
        self.ring(Engine::Compute)?;
        Ok(Done {
            engine: Engine::Compute,
            value,
        })
    }

    /// Makes the next work on `engine`'s channel wait on the GPU for each of `after`
    /// that has not landed yet: a semaphore acquire for the other channel's values
    /// (their words are submitted first, so each is on its way), nothing or a WFI for
    /// the channel's own (`ComputeChannel::acquire`). What already landed costs one
    /// read of a semaphore and adds no word.
    ///
    /// # Errors
    /// A dependency whose channel faulted (that channel's `Fault`: what it waited for
    /// will never land, so nothing is pushed); a value its channel never promised
    /// (`Timeline`, `NeverReleased`); a full pushbuffer.
    pub fn order(&mut self, engine: Engine, after: &[Done]) -> Result<(), RuntimeError> {
        for &d in after {
            if self.landed(d)? {
                continue;
            }
            // The channel's own work: the copy engine runs a channel's copies in order,
            // and the compute channel orders its own grids; no fence, so nothing is
            // submitted for it (a held run stays held).
            if d.engine == engine {
                if engine == Engine::Compute {
                    self.compute.after_own(d.value)?;
                }
                continue;
            }
            let fence = self
                .channel(d.engine)
                .fence(d.value)
                .map_err(|e| channel_error(d.engine, e))?;
            match engine {
                Engine::Compute => self.compute.acquire(fence)?,
                Engine::Copy => self.copies.acquire(fence)?,
            }
        }
        Ok(())
    }

    /// A fence for `done` that any channel of the session can wait for on the GPU:
    /// how work on another runtime of the same session (another stream) depends on
    /// this one's ([`Runtime::import`]). The words that release it are submitted
    /// first, held doorbells or not, so that a wait for it never waits for work that
    /// was never sent.
    ///
    /// # Errors
    /// A value its channel never promised (`Timeline`, `NeverReleased`); the channel's
    /// (`RingFull`).
    pub fn export(&mut self, done: Done) -> Result<Fence, RuntimeError> {
        self.channel(done.engine)
            .fence(done.value)
            .map_err(|e| channel_error(done.engine, e))
    }

    /// Makes the next work on `engine`'s channel wait on the GPU until `fence` (another
    /// runtime's [`Runtime::export`]) has landed: a semaphore acquire, no host wait. A
    /// fence of this runtime's own channel adds nothing.
    ///
    /// # Errors
    /// `ForeignFence` for a fence of another session (its address means other memory
    /// here); a full pushbuffer.
    pub fn import(&mut self, engine: Engine, fence: Fence) -> Result<(), RuntimeError> {
        match engine {
            Engine::Compute => self.compute.acquire(fence)?,
            Engine::Copy => self.copies.acquire(fence)?,
        }
        Ok(())
    }

    /// Writes the 64-bit `value` at `at` (memory of `session`: 16 bytes with the GPU's
    /// nanosecond time after the value when `timestamp`, else 8) from `engine`'s
    /// channel, once that engine finished everything submitted to it before and
    /// everything in `after` landed (waited for on the GPU, as [`Runtime::order`]
    /// does): a host semaphore release with RELEASE_WFI. CUDA's
    /// `cuStreamWriteValue64`. The host reads it in memory; a channel waits for it
    /// with [`Runtime::wait_value`]. Returns a [`Done`] of the channel that lands only
    /// once the value is written (a timeline release right behind it), so that work
    /// ordered after the `Done` never sees the memory without it, and two channels
    /// writing one place in turn never land out of turn. Rings unless held.
    ///
    /// # Errors
    /// [`ValueError`] for a place that is not the session's, too short or misaligned
    /// (16 bytes with a timestamp, 8 without), or over one of the runtime's timelines;
    /// [`Runtime::order`]'s; the channel's (a full pushbuffer).
    pub fn write_value(
        &mut self,
        session: &Session,
        engine: Engine,
        at: Span<'_>,
        value: u64,
        timestamp: bool,
        after: &[Done],
    ) -> Result<Done, RuntimeError> {
        let timelines = [
            self.compute.channel().semaphore_va(),
            self.copies.channel().semaphore_va(),
        ];
        let va = value::place(session, &at, Use::Write { timestamp }, &timelines)?;
        self.order(engine, after)?;
        let how = Release {
            wait_idle: true,
            timestamp,
        };
        // The engine idled for the write just before: the timeline's release needs no
        // second WFI to say that everything before it is done.
        self.then_timeline(engine, false, |ch| ch.release_to(va, value, how))
    }

    /// Makes the next work on `engine`'s channel wait on the GPU until the 64-bit
    /// value at `at` (8 bytes of `session`'s memory) has reached `value`, compared
    /// circularly: a semaphore acquire, no host wait, the channel group switched out
    /// meanwhile so that other groups run. CUDA's `cuStreamWaitValue64` with
    /// `CU_STREAM_WAIT_VALUE_GEQ`. Whoever sets the value (the host, another
    /// channel's [`Runtime::write_value`]), work after this on the channel waits for
    /// it. Returns a [`Done`] of the channel (a timeline release with WFI behind the
    /// acquire) that lands once the value was reached and everything before it on the
    /// channel is done: what work on the other channel waits for ([`Runtime::order`]).
    /// A value that never comes holds that channel until waits on later work time
    /// out. Rings unless held.
    ///
    /// # Errors
    /// [`ValueError`] for a place that is not the session's, short or not 8-byte
    /// aligned; the channel's (a full pushbuffer).
    pub fn wait_value(
        &mut self,
        session: &Session,
        engine: Engine,
        at: Span<'_>,
        value: u64,
    ) -> Result<Done, RuntimeError> {
        let va = value::place(session, &at, Use::Wait, &[])?;
        self.then_timeline(engine, true, |ch| ch.acquire_at(va, value))
    }

    /// Pushes `words` on `engine`'s channel, then its timeline's next value (after an
    /// idle engine with `wait_idle`), and rings unless held: the `Done` of what
    /// `words` did, for methods that release no timeline value of their own.
    fn then_timeline(
        &mut self,
        engine: Engine,
        wait_idle: bool,
        words: impl FnOnce(&mut Channel) -> Result<(), ChannelError>,
    ) -> Result<Done, RuntimeError> {
        let ch = self.channel(engine);
        let value = words(ch)
            .and_then(|()| {
                ch.release_with(Release {
                    wait_idle,
                    timestamp: false,
                })
            })
            .map_err(|e| channel_error(engine, e))?;
        self.ring(engine)?;
        Ok(Done { engine, value })
    }

    /// Records `event`, which this session exported, on `engine`'s channel: once the
    /// engine finished everything submitted to it before and everything in `after`
    /// landed (waited for on the GPU, as [`Runtime::order`] does), its host releases
    /// the event's next value with the GPU's time; importers' waits from then on are
    /// for it. Submits that channel, held doorbells or not (an importer may wait for
    /// the value at once: it must be on its way). CUDA's `cuEventRecord` on an IPC
    /// event. Returns the value.
    ///
    /// # Errors
    /// [`Runtime::order`]'s; the event's (`ForeignChannel` for another session's
    /// event) and the channel's.
    pub fn record_shared(
        &mut self,
        event: &mut ExportedEvent,
        engine: Engine,
        after: &[Done],
    ) -> Result<u64, RuntimeError> {
        self.order(engine, after)?;
        Ok(event.record(self.channel(engine))?)
    }

    /// Makes the next work on `engine`'s channel wait on the GPU for the last record
    /// of `event` (imported from another session) as of now: an acquire, no host
    /// wait, while the scheduler serves other groups. CUDA's `cuStreamWaitEvent` on an
    /// IPC event. Returns the value waited for (0: nothing recorded yet, so nothing to
    /// wait for); once work after it is done, [`ImportedEvent::check`] with that value
    /// says whether the exporter's work released it or its end let the wait pass.
    ///
    /// # Errors
    /// The channel's (a full pushbuffer).
    pub fn wait_shared(
        &mut self,
        engine: Engine,
        event: &ImportedEvent,
    ) -> Result<u64, RuntimeError> {
        Ok(event.acquire_on(self.channel(engine))?)
    }

    /// Waits on the host, up to `timeout`, for the last record of `event` (imported)
    /// as of now, as the runtime's [`WaitPolicy`] would: sleeping on the compute
    /// channel's wake descriptor, woken by the exporter's record or its end. Adds no
    /// work to any channel: a timeout leaves nothing waiting on the GPU. CUDA's
    /// `cuEventSynchronize` on an IPC event. Returns the value.
    ///
    /// # Errors
    /// `Timeout` naming the event and the value; `ExporterGone` when the exporter
    /// ended before its work released it.
    pub fn wait_event(
        &mut self,
        event: &ImportedEvent,
        timeout: Duration,
    ) -> Result<u64, RuntimeError> {
        let value = event.target();
        if value != 0 {
            event.wait(value, timeout, Some(self.compute.channel()))?;
        }
        Ok(value)
    }

    /// Waits up to `timeout` for `done`; a fault comes back typed. Held doorbells
    /// ([`Runtime::hold`]) are rung first; the hold goes on.
    ///
    /// # Errors
    /// The channel's `Fault` or `Timeout`.
    pub fn wait(&mut self, done: Done, timeout: Duration) -> Result<(), RuntimeError> {
        if self.held {
            self.flush()?;
        }
        match done.engine {
            Engine::Compute => self.compute.wait(done.value, timeout)?,
            Engine::Copy => self.copies.wait(done.value, timeout)?,
        }
        Ok(())
    }

    /// How both channels' waits spend their time (rig-client's [`WaitPolicy`]: spin,
    /// yield, block, or spin then block, the default).
    pub fn wait_policy(&mut self) -> WaitPolicy {
        self.compute.channel().wait_policy()
    }

    /// Sets how both channels' waits spend their time, from the next wait on.
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.compute.channel().set_wait_policy(policy);
        self.copies.channel().set_wait_policy(policy);
    }

    /// For an event loop: has the GPU raise its interrupt once `done` has landed and
    /// returns the descriptor that then turns readable (valid while the runtime lives;
    /// read 8 bytes from it to clear it, then [`Runtime::poll`]). None when rigd gave
    /// the channel no wake descriptor, or it has no room for the words now: poll
    /// instead. Held doorbells are rung first.
    ///
    /// # Errors
    /// As the channel's `arm`: a value never promised.
    pub fn arm(&mut self, done: Done) -> Result<Option<RawFd>, RuntimeError> {
        if self.held {
            self.flush()?;
        }
        let ch = self.channel(done.engine);
        let armed = ch
            .arm(done.value)
            .map_err(|e| channel_error(done.engine, e))?;
        Ok(armed
            .then(|| ch.wake_fd().map(|fd| fd.as_raw_fd()))
            .flatten())
    }

    /// Whether `done` has landed, without waiting: one read of the engine's semaphore
    /// and of the channel's error notifier. A posted fault comes back typed, as from
    /// `wait`, whether or not the value landed: faulted work never reads as done.
    /// Held doorbells are rung first, as by `wait`.
    ///
    /// # Errors
    /// The channel's `Fault`.
    pub fn poll(&mut self, done: Done) -> Result<bool, RuntimeError> {
        if self.held {
            self.flush()?;
        }
        self.landed(done)
    }

    /// [`Runtime::poll`] without ringing held doorbells: `order` asks it of
    /// dependencies, inside a held run.
    fn landed(&mut self, done: Done) -> Result<bool, RuntimeError> {
        let ch = self.channel(done.engine);
        let landed = match ch.fault() {
            Some(fault) => Err(ChannelError::Fault {
                channel: ch.id(),
                fault,
            }),
            None => ch.completed().map(|c| c >= done.value),
        };
        landed.map_err(|e| channel_error(done.engine, e))
    }

    /// `engine`'s channel.
    fn channel(&mut self, engine: Engine) -> &mut Channel {
        match engine {
            Engine::Compute => self.compute.channel(),
            Engine::Copy => self.copies.channel(),
        }
    }

    /// Closes both channels in rigd.
    ///
    /// # Errors
    /// The first channel's close that failed.
    pub async fn close(self, session: &Session) -> Result<(), RuntimeError> {
        let compute = self.compute.close(session).await;
        self.copies.close(session).await?;
        Ok(compute?)
    }
}

/// A channel's error as the error of the runtime's channel for `engine`.
fn channel_error(engine: Engine, e: ChannelError) -> RuntimeError {
    match engine {
        Engine::Compute => ComputeError::from(e).into(),
        Engine::Copy => CopyError::from(e).into(),
    }
}
