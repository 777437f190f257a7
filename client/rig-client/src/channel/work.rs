//! What a lent channel's engine does and how its completion is released: copies and
//! memsets the copy engine releases in their own LAUNCH_DMA, the engine-aware
//! [`Channel::release`], host releases for what they measure, words a runtime pushes
//! with the engine's release inside (a launch whose QMD releases the value), and the
//! arena those runtimes write their launch descriptors into.
//!
//! The rule (docs/channels.md, "Completion"): a value says work is done only when the
//! engine that did the work released it. The copy engine releases after its own
//! copies, 32 bits wide ([`Payload::Word32`]); the compute engine releases through a
//! QMD's release slot, which rig-client does not build (rig-runtime does, and hands
//! the launch's words to [`Channel::push_released`], or queues the words it wrote
//! beside the QMD with [`Channel::push_segment_released`]). A host release
//! ([`Channel::release_with`]) says that the channel's methods were processed — with
//! WFI, that the engine went idle — not that the work did not fault.
//!
//! Chains: a launch's QMD may start the next launch's QMD itself when it is done
//! ([`Channel::promise_chained`]); the chained value needs no word of its own.
//!
//! State: the channel's `tail_release` (the last command releases that value) and
//! `unreleased` (raw words pushed since an engine release), kept by `lent`'s push.

use rig_model::addr::GpuVa;
use rig_nv::method::{
    self,
    copy::{self as ce, MAX_COPY, MAX_MEMSET, Semaphore},
};

use super::{
    TimelineError,
    lent::{Channel, ChannelError, Engine},
    pushbuf::Segment,
    ring,
    timeline::Payload,
};

impl Channel {
    fn semaphore(&self, value: u64) -> Semaphore {
        Semaphore {
            addr: self.semaphore_va(),
            // CAST: the copy engine releases the low 32 bits (clc8b5.h of 580 has no
            // 64-bit payload); waits compare them circularly (`timeline::extend`).
            payload: (value & 0xffff_ffff) as u32,
            timestamp: false,
        }
    }

    fn needs(&self, needs: Engine) -> Result<(), ChannelError> {
        if self.engine != needs {
            return Err(ChannelError::WrongEngine {
                channel: self.id,
                engine: self.engine,
                needs,
            });
        }
        Ok(())
    }

    /// The next timeline value, not yet promised.
    ///
    /// # Errors
    /// [`ChannelError::Timeline`] after 2^64 - 1 values.
    pub fn next_value(&self) -> Result<u64, ChannelError> {
        Ok(self
            .timeline
            .last()
            .checked_add(1)
            .ok_or(TimelineError::Exhausted)?)
    }

    /// Pushes one command whose work the engine marks done by releasing `value` at
    /// [`Channel::semaphore_va`], [`Channel::payload`] wide (a launch whose QMD's
    /// release slot holds it), and promises `value`. [`Channel::release`] right after
    /// returns it without adding anything.
    ///
    /// # Errors
    /// [`ChannelError::Timeline`] (`Backwards`) for a value not past the last one,
    /// as [`Channel::push`].
    pub fn push_released(&mut self, words: &[u32], value: u64) -> Result<u64, ChannelError> {
        self.with_release(value, |ch| ch.push_words(words))
    }

    /// Refuses a `value` not past the last one before `push` runs, then promises it as
    /// what the command `push` added releases.
    fn with_release(
        &mut self,
        value: u64,
        push: impl FnOnce(&mut Self) -> Result<(), ChannelError>,
    ) -> Result<u64, ChannelError> {
        let last = self.timeline.last();
        if value <= last {
            return Err(TimelineError::Backwards { value, last }.into());
        }
        push(self)?;
        self.timeline.promise(value)?;
        self.tail_release = Some(value);
        self.unreleased = false;
        Ok(value)
    }

    /// Queues a command segment the caller wrote beforehand outside the pushbuffer (a
    /// runtime's launch words beside the descriptor they launch, written once for many
    /// launches), as one ring entry whose work the engine marks done by releasing
    /// `value`, and promises `value`, as [`Channel::push_released`] does. The
    /// pushbuffer's open segment is queued first, so commands keep their order; the
    /// segment takes no pushbuffer words, so a launch from it stores only its ring
    /// entry at the next submission. With half the ring's entries queued, they are
    /// submitted first (the doorbell rings early, never late). The caller keeps the
    /// words unchanged until `value` lands.
    ///
    /// # Errors
    /// [`ChannelError::Timeline`] (`Backwards`) for a value not past the last one;
    /// [`ChannelError::Ring`] for a segment a ring entry cannot point at (misaligned,
    /// empty, too long, or reaching 2^40); as [`Channel::submit`].
    pub fn push_segment_released(
        &mut self,
        va: GpuVa,
        words: u32,
        value: u64,
    ) -> Result<u64, ChannelError> {
        self.with_release(value, |ch| {
            ring::entry(va, words)?;
            if ch.queued.len() >= ch.ring.entries() as usize / 2 {
                ch.submit()?;
            }
            if let Some(seg) = ch.pb.close() {
                ch.queued.push_back(seg);
            }
            ch.queued.push_back(Segment {
                va,
                words,
                end: ch.pb.head(),
            });
            Ok(())
        })
    }

    /// Whether the last command is the one that releases `value`, queued and not yet
    /// submitted, with nothing pushed after it: the GPU has not read it, so a runtime
    /// may chain the next launch behind it in the launch's own descriptor
    /// ([`Channel::promise_chained`]) instead of pushing words for it.
    pub fn tail_queued(&self, value: u64) -> bool {
        self.tail_release == Some(value) && value > self.recorded && self.pb.open_is_empty()
    }

    /// Promises `value`, released by work the engine starts by itself once the queued
    /// tail that releases `after` is done (a QMD chained behind that launch's QMD):
    /// nothing is pushed, and it reaches the GPU with the tail's own submission.
    ///
    /// # Errors
    /// [`ChannelError::NotChainable`] unless [`Channel::tail_queued`] holds for
    /// `after`; [`ChannelError::Timeline`] (`Backwards`) for a value not past the last.
    pub fn promise_chained(&mut self, after: u64, value: u64) -> Result<u64, ChannelError> {
        if !self.tail_queued(after) {
            return Err(ChannelError::NotChainable {
                channel: self.id,
                after,
                value,
            });
        }
        self.with_release(value, |_| Ok(()))
    }

    /// A value that says every command before it is done, released by the engine
    /// that did the work: the last command's own release when it has one (a copy, a
    /// launch), else a new one — on a copy channel the copy engine's, after its
    /// earlier copies; on a compute channel the host's (with WFI), and only when no
    /// words were pushed raw since the last launch: those may be a launch, which only
    /// its QMD's release completes. Returns the value.
    ///
    /// # Errors
    /// [`ChannelError::Unreleased`] on a compute channel with raw words since the
    /// last launch; as [`Channel::push`]; [`ChannelError::Timeline`] after 2^64 - 1
    /// values.
    pub fn release(&mut self) -> Result<u64, ChannelError> {
        if let Some(v) = self.tail_release.take() {
            return Ok(v);
        }
        match self.engine {
            Engine::Copy => {
                let v = self.next_value()?;
                self.push_words(&ce::release(self.semaphore(v))?)?;
                self.timeline.promise(v)?;
                self.unreleased = false;
                Ok(v)
            }
            Engine::Compute if self.unreleased => {
                Err(ChannelError::Unreleased { channel: self.id })
            }
            Engine::Compute => self.release_with(method::Release {
                wait_idle: true,
                timestamp: false,
            }),
        }
    }

    /// Appends a host release of the next timeline value, waiting for idle and
    /// writing the GPU timestamp as `how` says; returns the value. It says that the
    /// channel reached it (with WFI: and that the engine idled), not that the work
    /// before it succeeded; an empty submission's round trip is one of these with
    /// [`super::EMPTY_RELEASE`].
    ///
    /// # Errors
    /// As [`Channel::push`]; [`ChannelError::Timeline`] after 2^64 - 1 values.
    pub fn release_with(&mut self, how: method::Release) -> Result<u64, ChannelError> {
        let v = self.next_value()?;
        self.push_words(&method::release_with(self.semaphore_va(), v, how)?)?;
        self.timeline.advance()?;
        self.tail_release = None;
        Ok(v)
    }

    /// Appends a host release of `value` at `addr`, memory of this session outside the
    /// timeline (an event's slot, which the caller holds), as `how` says: with
    /// `wait_idle` once the engine finished everything before it, with `timestamp` the
    /// GPU's nanosecond clock at `addr + 8`. Not a timeline value: waits on the
    /// channel do not see it, and it completes no work.
    ///
    /// # Errors
    /// [`ChannelError::Method`] for an address that is misaligned (16 bytes with a
    /// timestamp, 8 without) or past 2^57; as [`Channel::push`].
    pub fn release_to(
        &mut self,
        addr: GpuVa,
        value: u64,
        how: method::Release,
    ) -> Result<(), ChannelError> {
        self.push_words(&method::release_with(addr, value, how)?)?;
        self.tail_release = None;
        Ok(())
    }

    /// Appends a host release of `value`, which must not be below the last one: a
    /// timeline never moves backwards, so a smaller value is refused before it is
    /// written.
    ///
    /// # Errors
    /// [`ChannelError::Timeline`] (`Backwards`), as [`Channel::push`].
    pub fn release_value(&mut self, value: u64) -> Result<u64, ChannelError> {
        if value < self.timeline.last() {
            return Err(TimelineError::Backwards {
                value,
                last: self.timeline.last(),
            }
            .into());
        }
        self.push_words(&method::release(self.semaphore_va(), value)?)?;
        self.timeline.promise(value)?;
        self.tail_release = None;
        Ok(value)
    }

    /// Appends a copy of `bytes` (any number above 0) from `src` to `dst`, GPU
    /// addresses of this session's memory, on a copy channel: one line per `MAX_COPY`
    /// (1 GiB, the longest line shown to run), each flushed, the last releasing the next timeline value in its own
    /// LAUNCH_DMA. Returns that value: it lands once every byte is written, and never
    /// if the engine faulted or refused the copy.
    ///
    /// # Errors
    /// [`ChannelError::WrongEngine`] on a compute channel; [`ChannelError::Copy`] for
    /// 0 bytes or an address past 2^57 (checked before anything is written); as
    /// [`Channel::push`] (a pushbuffer that fills midway leaves the lines before in
    /// it, unreleased).
    pub fn copy(&mut self, src: GpuVa, dst: GpuVa, bytes: u64) -> Result<u64, ChannelError> {
        self.needs(Engine::Copy)?;
        let v = self.next_value()?;
        // Every line's words are checked before the first is written.
        if bytes == 0 {
            ce::copy(src, dst, 0)?;
        }
        for (at, n) in lines(bytes, MAX_COPY) {
            ce::copy(offset(src, at)?, offset(dst, at)?, n)?;
        }
        let last = last_line(bytes, MAX_COPY);
        for (at, n) in lines(last, MAX_COPY) {
            self.push(&ce::copy_flushed(offset(src, at)?, offset(dst, at)?, n)?)?;
        }
        let (s, d) = (offset(src, last)?, offset(dst, last)?);
        let words = ce::copy_released(s, d, bytes - last, self.semaphore(v))?;
        self.push_released(&words, v)
    }

    /// Appends a fill of `bytes` (a multiple of 4) at `dst` with the 32-bit `value`,
    /// on a copy channel (the engine's remap unit; one line per `MAX_MEMSET`, 1 GiB), the last
    /// line releasing the next timeline value. Returns it.
    ///
    /// # Errors
    /// As [`Channel::copy`]; [`ChannelError::Copy`] for a misaligned address or a
    /// length that is 0 or no multiple of 4.
    pub fn fill(&mut self, dst: GpuVa, value: u32, bytes: u64) -> Result<u64, ChannelError> {
        self.needs(Engine::Copy)?;
        let v = self.next_value()?;
        if bytes == 0 {
            ce::memset(dst, value, 0, None)?;
        }
        for (at, n) in lines(bytes, MAX_MEMSET) {
            ce::memset(offset(dst, at)?, value, n, None)?;
        }
        let last = last_line(bytes, MAX_MEMSET);
        for (at, n) in lines(last, MAX_MEMSET) {
            self.push(&ce::memset(offset(dst, at)?, value, n, None)?)?;
        }
        let words = ce::memset(
            offset(dst, last)?,
            value,
            bytes - last,
            Some(self.semaphore(v)),
        )?;
        self.push_released(&words, v)
    }

    /// The arena's GPU address, if the channel has one (256-byte aligned).
    pub fn arena_va(&self) -> Option<GpuVa> {
        self.arena_va
    }

    /// The arena's size in bytes (0: none).
    pub fn arena_len(&self) -> u64 {
        self.arena_len
    }

    /// Writes `words` into the arena from byte `offset` (8-aligned), one volatile
    /// store each; the next [`Channel::submit`] orders them before the GPU is told of
    /// any command. The caller keeps the GPU from reading words it is rewriting (a
    /// runtime reuses a descriptor only after the value behind it landed).
    ///
    /// # Errors
    /// [`ChannelError::Arena`] for words outside the arena or a misaligned offset.
    pub fn write_arena(&self, offset: u64, words: &[u64]) -> Result<(), ChannelError> {
        let fits = offset.is_multiple_of(8)
            && offset
                .checked_add(8 * words.len() as u64)
                .is_some_and(|end| end <= self.arena_len);
        if !fits {
            return Err(ChannelError::Arena {
                channel: self.id,
                offset,
                words: words.len(),
                len: self.arena_len,
            });
        }
        self.arena
            .write_u64s(&self.gpfifo, offset, words)
            .map_err(|e| e.into_channel(self.id, "its arena"))
    }

    /// Writes `bytes`, whole 8-byte words, into the arena from byte `offset`
    /// (8-aligned), as [`Channel::write_arena`] does: for words a caller keeps as
    /// bytes (a launch's parameters).
    ///
    /// # Errors
    /// [`ChannelError::Arena`] for bytes outside the arena, a misaligned offset or a
    /// length that is no multiple of 8.
    pub fn write_arena_bytes(&self, offset: u64, bytes: &[u8]) -> Result<(), ChannelError> {
        let fits = offset.is_multiple_of(8)
            && bytes.len().is_multiple_of(8)
            && offset
                .checked_add(bytes.len() as u64)
                .is_some_and(|end| end <= self.arena_len);
        if !fits {
            return Err(ChannelError::Arena {
                channel: self.id,
                offset,
                words: bytes.len() / 8,
                len: self.arena_len,
            });
        }
        self.arena
            .write_bytes(&self.gpfifo, offset, bytes)
            .map_err(|e| e.into_channel(self.id, "its arena"))
    }

    /// The width of the releases a caller of [`Channel::push_released`] must write.
    pub fn release_payload(&self) -> Payload {
        self.payload
    }
}

/// `base + at`, or the copy engine's refusal of an address past the end.
fn offset(base: GpuVa, at: u64) -> Result<GpuVa, ce::CopyError> {
    base.checked_add(at).ok_or(ce::CopyError::Address {
        what: "a line",
        addr: base.get(),
        align: 1,
    })
}

/// Where the last line of a transfer of `bytes` (above 0) starts.
fn last_line(bytes: u64, max: u64) -> u64 {
    bytes.saturating_sub(1) / max * max
}

/// `(offset, length)` of each line of a transfer of `bytes` in lines of at most `max`
/// bytes (a multiple of 4 for memsets: `MAX_MEMSET` is one).
fn lines(bytes: u64, max: u64) -> impl Iterator<Item = (u64, u64)> + Clone {
    (0..bytes.div_ceil(max)).map(move |i| {
        let at = i * max;
        (at, (bytes - at).min(max))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_at_the_limit_and_cover_every_byte() {
        let v: Vec<_> = lines(10, 4).collect();
        assert_eq!(v, [(0, 4), (4, 4), (8, 2)]);
        assert_eq!(lines(8, 4).collect::<Vec<_>>(), [(0, 4), (4, 4)]);
        assert_eq!(lines(0, 4).count(), 0);
        let big = 3 * MAX_COPY + 7;
        let v: Vec<_> = lines(big, MAX_COPY).collect();
        assert_eq!(v.len(), 4);
        assert_eq!(v.iter().map(|(_, n)| n).sum::<u64>(), big);
        assert!(v.iter().all(|&(_, n)| n <= MAX_COPY));
        assert_eq!(last_line(big, MAX_COPY), 3 * MAX_COPY);
        assert_eq!(last_line(MAX_COPY, MAX_COPY), 0);
        assert_eq!(last_line(MAX_COPY + 1, MAX_COPY), MAX_COPY);
        assert_eq!(last_line(1, MAX_COPY), 0);
    }
}
