//! Where commands go in a channel's pushbuffer: a circular buffer of words that the
//! client writes and the GPU fetches, cut into segments, one ring entry each. Pure
//! positions; the words themselves are written by the caller.
//!
//! The rule (docs/hardware/nvidia-channels.md, "Segments do not wrap"): the GPU reads
//! a segment in address order and knows nothing of the buffer, so a segment that runs
//! past the buffer's end reads whatever lies beyond (on the RTX 5000 Ada that ended
//! both channels with PBDMA_ERROR). So a command never straddles the end: the open
//! segment is closed at the end, and the command starts a new segment at word 0. The
//! open segment is closed whenever the write position returns to the start, also when
//! the last command ended exactly at the end.
//!
//! Who owns which words: those from `tail` to `head` (circularly) are written or in
//! flight; the caller says when the GPU is done with them ([`Pushbuffer::retire`],
//! after a timeline value released behind them has landed); the rest are free.

use rig_model::addr::GpuVa;

use super::ring::{MAX_SEGMENT_WORDS, SEGMENT_VA_LIMIT};

/// A closed segment: what one ring entry fetches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// GPU virtual address of its first word.
    pub va: GpuVa,
    /// Its length in words.
    pub words: u32,
    /// The position just past it, for [`Pushbuffer::retire`].
    pub end: u64,
}

/// Where a command of the asked length may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    /// The word index in the buffer of the command's first word.
    pub at: u32,
    /// A segment this reservation closed first (at the buffer's end, or at the
    /// segment length limit): the caller puts it into the ring before the command's.
    pub closed: Option<Segment>,
}

/// What a pushbuffer refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushbufError {
    #[error(
        "A pushbuffer of {words} words at {va:#x}: it needs 1 to 2^31 words, 4-byte aligned, below 2^40"
    )]
    Layout { va: u64, words: u64 },
    #[error("A command of {words} words does not fit a pushbuffer of {size} words")]
    TooLarge { words: u32, size: u32 },
    #[error("{free} of {size} words are free, {needed} are needed: wait for the GPU")]
    Full { needed: u32, free: u32, size: u32 },
    #[error("Retiring up to position {end}, which is past what was written ({head})")]
    Retire { end: u64, head: u64 },
}

/// A pushbuffer's positions. Positions count words written since the start (so they
/// only grow); a word's index in the buffer is its position modulo the size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushbuffer {
    va: u64,
    size: u32,
    /// Words up to here are written (or skipped at a wrap).
    head: u64,
    /// Words before here are free again.
    tail: u64,
    /// The open segment starts here.
    open: u64,
}

impl Pushbuffer {
    /// A pushbuffer of `words` words at GPU VA `va`, all free.
    ///
    /// # Errors
    /// [`PushbufError::Layout`] for an empty or misaligned buffer, or one that reaches
    /// past 2^40 (where ring entries cannot point).
    pub fn new(va: GpuVa, words: u64) -> Result<Self, PushbufError> {
        let va = va.get();
        let end = words.checked_mul(4).and_then(|b| va.checked_add(b));
        let size = u32::try_from(words)
            .ok()
            .filter(|&w| w > 0 && w <= 1 << 31 && va.is_multiple_of(4))
            .filter(|_| end.is_some_and(|e| e <= SEGMENT_VA_LIMIT))
            .ok_or(PushbufError::Layout { va, words })?;
        Ok(Self {
            va,
            size,
            head: 0,
            tail: 0,
            open: 0,
        })
    }

    /// The size in words.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The position just past the last word written: a segment outside the buffer,
    /// queued now, retires everything before it when it is done.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Words not written or in flight.
    pub fn free(&self) -> u32 {
        u32::try_from(u64::from(self.size) - (self.head - self.tail))
            .expect("at most `size` words are in use")
    }

    fn index(&self, pos: u64) -> u32 {
        u32::try_from(pos % u64::from(self.size)).expect("an index is below the size")
    }

    /// Makes room for a command of `words` words and returns where to write it. The
    /// command is then part of the open segment.
    ///
    /// # Errors
    /// [`PushbufError::TooLarge`] for a command longer than the buffer or than one
    /// segment may be; [`PushbufError::Full`] when the free words (counting those a
    /// wrap skips) are too few: retire, then try again. Nothing changes on an error.
    pub fn reserve(&mut self, words: u32) -> Result<Reserved, PushbufError> {
        if words == 0 || words > self.size || words > MAX_SEGMENT_WORDS {
            return Err(PushbufError::TooLarge {
                words,
                size: self.size,
            });
        }
        let at = self.index(self.head);
        // Words from here to the end stay unused when the command does not fit before it.
        let skip = if u64::from(at) + u64::from(words) > u64::from(self.size) {
            self.size - at
        } else {
            0
        };
        let needed = skip + words;
        if needed > self.free() {
            return Err(PushbufError::Full {
                needed,
                free: self.free(),
                size: self.size,
            });
        }
        let too_long = self.head - self.open + u64::from(words) > u64::from(MAX_SEGMENT_WORDS);
        let closed = if skip > 0 || too_long {
            self.close()
        } else {
            None
        };
        if skip > 0 {
            // The skipped words belong to no segment; the next one opens at word 0.
            self.head += u64::from(skip);
            self.open = self.head;
        }
        let at = self.index(self.head);
        self.head += u64::from(words);
        Ok(Reserved { at, closed })
    }

    /// Closes the open segment into what one ring entry fetches; `None` when it is
    /// empty. Call after writing a reservation whose end reached the buffer's end
    /// ([`Pushbuffer::must_close`]) and at every submission.
    pub fn close(&mut self) -> Option<Segment> {
        if self.head == self.open {
            return None;
        }
        let words = u32::try_from(self.head - self.open).expect("a segment is below 2^21 words");
        let va = GpuVa(self.va + 4 * u64::from(self.index(self.open)));
        self.open = self.head;
        Some(Segment {
            va,
            words,
            end: self.head,
        })
    }

    /// Whether nothing was written since the last [`Pushbuffer::close`].
    pub fn open_is_empty(&self) -> bool {
        self.head == self.open
    }

    /// Whether the open segment ends at the buffer's end, so it must be closed before
    /// anything else is written (the next word is at index 0).
    pub fn must_close(&self) -> bool {
        self.head != self.open && self.index(self.head) == 0
    }

    /// Frees the words before `end` (a [`Segment::end`] the GPU is done with).
    ///
    /// # Errors
    /// [`PushbufError::Retire`] for a position past what was written.
    pub fn retire(&mut self, end: u64) -> Result<(), PushbufError> {
        if end > self.head {
            return Err(PushbufError::Retire {
                end,
                head: self.head,
            });
        }
        self.tail = self.tail.max(end);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const VA: u64 = 0x10_0000;

    #[test]
    fn a_command_that_would_cross_the_end_closes_the_segment_and_starts_at_zero() {
        let mut p = Pushbuffer::new(GpuVa(VA), 16).expect("buffer");
        assert_eq!(
            p.reserve(6),
            Ok(Reserved {
                at: 0,
                closed: None
            })
        );
        assert_eq!(
            p.reserve(6),
            Ok(Reserved {
                at: 6,
                closed: None
            })
        );
        p.retire(6).expect("the first command is done");
        // 4 words left before the end: the command goes to word 0.
        let r = p.reserve(6).expect("fits after the wrap");
        assert_eq!(r.at, 0);
        assert_eq!(
            r.closed,
            Some(Segment {
                va: GpuVa(VA),
                words: 12,
                end: 12
            })
        );
        assert_eq!(
            p.close(),
            Some(Segment {
                va: GpuVa(VA),
                words: 6,
                end: 22
            })
        );
    }

    #[test]
    fn a_command_ending_exactly_at_the_end_closes_the_segment_there() {
        let mut p = Pushbuffer::new(GpuVa(VA), 12).expect("buffer");
        p.reserve(6).expect("first");
        p.reserve(6).expect("second ends at the end");
        assert!(p.must_close());
        assert_eq!(
            p.close(),
            Some(Segment {
                va: GpuVa(VA),
                words: 12,
                end: 12
            })
        );
        assert!(!p.must_close());
        p.retire(12).expect("done");
        assert_eq!(
            p.reserve(6),
            Ok(Reserved {
                at: 0,
                closed: None
            })
        );
    }

    #[test]
    fn a_full_buffer_refuses_and_changes_nothing() {
        let mut p = Pushbuffer::new(GpuVa(VA), 16).expect("buffer");
        p.reserve(10).expect("first");
        let before = p.clone();
        // 6 free at the end, 0 at the start: 6 skipped + 6 needed > 6.
        assert_eq!(
            p.reserve(7),
            Err(PushbufError::Full {
                needed: 13,
                free: 6,
                size: 16
            })
        );
        assert_eq!(p, before);
        assert_eq!(p.reserve(6).map(|r| r.at), Ok(10), "fits before the end");
        assert_eq!(
            p.retire(17),
            Err(PushbufError::Retire { end: 17, head: 16 })
        );
    }

    #[test]
    fn layouts_and_sizes_are_checked() {
        let layout = |va: GpuVa, words| {
            Pushbuffer::new(va, words)
                == Err(PushbufError::Layout {
                    va: va.get(),
                    words,
                })
        };
        assert!(layout(GpuVa(VA), 0));
        assert!(layout(GpuVa(VA + 2), 16));
        assert!(layout(GpuVa(VA), (1 << 31) + 1));
        assert!(layout(GpuVa(SEGMENT_VA_LIMIT - 64), 17), "past 2^40");
        assert!(!layout(GpuVa(SEGMENT_VA_LIMIT - 64), 16), "up to 2^40");
        let mut p = Pushbuffer::new(GpuVa(VA), 8).expect("buffer");
        assert_eq!(
            p.reserve(9),
            Err(PushbufError::TooLarge { words: 9, size: 8 })
        );
        assert_eq!(
            p.reserve(0),
            Err(PushbufError::TooLarge { words: 0, size: 8 })
        );
    }

    proptest! {
        /// Random commands and retirements, against the rules: every segment lies
        /// inside the buffer, segments follow each other in order without a gap but
        /// for the skipped words at a wrap, a command never straddles the end, and no
        /// command overwrites a word that is not retired.
        #[test]
        fn segments_never_run_past_the_end_or_over_live_words(
            size in 1u32..64,
            ops in proptest::collection::vec((0u8..4, 1u32..20), 1..300),
        ) {
            let mut p = Pushbuffer::new(GpuVa(VA), u64::from(size)).expect("buffer");
            // Model: the live words by position, and the ends of closed segments.
            let mut live: std::collections::VecDeque<u64> = Default::default();
            let mut ends: Vec<u64> = Vec::new();
            let mut last_end = 0u64;
            let check = |s: &Segment, last_end: &mut u64| -> Result<(), TestCaseError> {
                let idx = (s.va.get() - VA) / 4;
                prop_assert!(idx + u64::from(s.words) <= u64::from(size), "{s:?} past the end");
                prop_assert!(s.end >= *last_end + u64::from(s.words));
                prop_assert!(s.end - u64::from(s.words) == *last_end
                    || (s.end - u64::from(s.words)).is_multiple_of(u64::from(size)), "a gap not at a wrap: {s:?}");
                *last_end = s.end;
                Ok(())
            };
            for (op, words) in ops {
                match op {
                    0 | 1 => match p.reserve(words) {
                        Ok(r) => {
                            if let Some(s) = r.closed {
                                check(&s, &mut last_end)?;
                                ends.push(s.end);
                            }
                            prop_assert!(r.at + words <= size, "straddles the end");
                            let start = p.head - u64::from(words);
                            for w in start..p.head {
                                // A live word at the same index lies a whole size back.
                                prop_assert!(
                                    live.front().is_none_or(|&l| l + u64::from(size) > w),
                                    "position {w} overwrites live position {:?}", live.front()
                                );
                                live.push_back(w);
                            }
                            if p.must_close() {
                                let s = p.close().expect("open");
                                check(&s, &mut last_end)?;
                                ends.push(s.end);
                            }
                        }
                        Err(PushbufError::Full { needed, free, .. }) => prop_assert!(needed > free),
                        Err(PushbufError::TooLarge { .. }) => prop_assert!(words > size),
                        Err(e) => prop_assert!(false, "{e}"),
                    },
                    2 => {
                        if let Some(s) = p.close() {
                            check(&s, &mut last_end)?;
                            ends.push(s.end);
                        }
                    }
                    _ => {
                        if !ends.is_empty() {
                            let end = ends.remove(0);
                            p.retire(end).expect("a closed segment's end");
                            while live.front().is_some_and(|&w| w < end) {
                                live.pop_front();
                            }
                        }
                    }
                }
                prop_assert!(p.head - p.tail <= u64::from(size));
            }
        }
    }
}
