//! NVIDIA channel mechanics that a client runs on its own, with no call to rigd: the
//! GPFIFO ring (`ring`), where commands go in the pushbuffer (`pushbuf`), and the
//! 64-bit timeline (`timeline`). The words themselves (methods, ring entries, USERD
//! offsets) are rig-nv's; this module is the transport that writes them.
//!
//! Flow: a client's submission is `pushbuf::Pushbuffer::reserve` → `rig_nv::method` words
//! written into the reserved words → `Pushbuffer::close` → `ring::entry` written at
//! `ring::Ring::push`'s slot → store fence → GP_PUT in USERD → the doorbell (the work
//! submit token at `rig_nv::gpfifo::USERMODE_NOTIFY_CHANNEL_PENDING` of the usermode page)
//! (docs/hardware/nvidia-channels.md, "Before a doorbell"; host-memory rings need no
//! read-back). Every piece here is pure arithmetic with those rules as checks, so
//! each is tested without a GPU; the memory they describe is leased from rigd
//! (the session's ledger, `crate::session`). [`Channel`] (`lent`) ties them to a real
//! ring, USERD, notifier and doorbell that rigd lends on an RM-served GPU
//! ([`Channel::open`] on a [`crate::session::Session`]: `open`), with its memory
//! (`mem`) and the work whose completion the engine releases (`work`: copies,
//! engine-aware releases, the words of a launch a runtime pushes, the runtime's
//! arena); `fence` lets one channel wait on the GPU for another's value; `sleep` lets
//! a wait sleep until the GPU's interrupt, as its [`WaitPolicy`] says;
//! `status` reads rigd's list of every lent channel.
//!
//! References: docs/hardware/nvidia-channels.md (the formats and rules) and
//! docs/hardware/nvidia-rm.md ("The object sequence"); the words' own sources are
//! rig-nv's headers.

mod fence;
mod lent;
mod mem;
mod open;
pub mod pushbuf;
pub mod ring;
mod sleep;
mod status;
pub mod timeline;
mod work;

pub use fence::Fence;
pub use lent::{
    Channel, ChannelError, DEFAULT_PUSHBUFFER, EMPTY_RELEASE, Engine, FAULT_CHECK_SPINS, Fault,
    GENERATION, REKICK_AFTER, REKICK_MAX, YIELD_AFTER,
};
pub use mem::Rings;
pub use open::{ARENA_ALIGN, Options};
pub use pushbuf::{PushbufError, Pushbuffer, Reserved, Segment};
pub use rig_nv::method::{MethodError, Subchannel};
pub use ring::{Ring, RingError};
pub(crate) use sleep::Phase;
pub use sleep::{BLOCK_SLICE, MISSES_BEFORE_YIELD, SPIN_BEFORE_BLOCK, WAKE_GRACE, WaitPolicy};
pub use status::{ChannelFaultInfo, ChannelInfo};
pub use timeline::{Payload, Timeline, TimelineError};
