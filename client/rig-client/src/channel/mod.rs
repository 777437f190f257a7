//! NVIDIA channel mechanics that a client runs on its own, with no call to rigd: the
//! Hopper pushbuffer words (`method`), the GPFIFO ring and its entries (`ring`), where
//! commands go in the pushbuffer (`pushbuf`), and the 64-bit timeline (`timeline`).
//!
//! Flow: a client's submission is `pushbuf::Pushbuffer::reserve` → `method` words
//! written into the reserved words → `Pushbuffer::close` → `ring::entry` written at
//! `ring::Ring::push`'s slot → store fence → GP_PUT in USERD → the doorbell (the work
//! submit token at `ring::USERMODE_NOTIFY_CHANNEL_PENDING` of the usermode page)
//! (docs/hardware/nvidia-channels.md, "Before a doorbell"; host-memory rings need no
//! read-back). Every piece here is pure arithmetic with those rules as checks, so
//! each is tested without a GPU; the memory they describe is leased from rigd
//! (the session's ledger, `crate::session`). [`Channel`] (`lent`) ties them to a real
//! ring, USERD, notifier and doorbell that rigd lends on an RM-served GPU
//! ([`Channel::open`] on a [`crate::session::Session`]: `open`), with its memory
//! (`mem`) and the work whose completion the engine releases (`work`: copies,
//! engine-aware releases, the words of a launch a runtime pushes, the runtime's
//! arena); `status` reads rigd's list of every lent channel.
//!
//! References: open-gpu-kernel-modules 580.142 `src/common/sdk/nvidia/inc/class/`
//! clc56f.h, clc86f.h, clc8b5.h, clc361.h; docs/hardware/nvidia-channels.md (the
//! formats and rules) and docs/hardware/nvidia-rm.md ("The object sequence").

mod lent;
mod mem;
pub mod method;
mod open;
pub mod pushbuf;
pub mod ring;
mod status;
pub mod timeline;
mod work;

pub use lent::{
    Channel, ChannelError, DEFAULT_PUSHBUFFER, EMPTY_RELEASE, Engine, FAULT_CHECK_SPINS, Fault,
    REKICK_AFTER, REKICK_MAX,
};
pub use mem::Rings;
pub use method::{MethodError, Subchannel};
pub use open::{ARENA_ALIGN, Options};
pub use pushbuf::{PushbufError, Pushbuffer, Reserved, Segment};
pub use ring::{Ring, RingError};
pub use status::{ChannelFaultInfo, ChannelInfo};
pub use timeline::{Payload, Timeline, TimelineError};
