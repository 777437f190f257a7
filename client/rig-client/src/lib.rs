//! rig-client: the supported way to talk to rigd, and the library a program that
//! drives lent hardware (a GPU runtime, a driver in user space) embeds. It carries no
//! CLI, table renderer, firmware reader or gRPC server: `rigctl` and
//! `rig-device-plugin` are crates beside it, and reach rigd only through it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rig_client::ClientError> {
//! let mut rig = rig_client::Client::connect(rig_client::DEFAULT_SOCKET).await?;
//! for d in rig.list_devices(true).await?.devices {
//!     println!("{} {:?}", d.bdf, d.names.device);
//! }
//! # Ok(()) }
//! ```
//!
//! Two ways in, one per socket:
//! - [`Client`]: unary and streamed gRPC calls on rigd's socket, every one of them in
//!   `client/`, one file per concern: devices and topology (the types in `model`,
//!   decoded by `convert`), take-over (the types in `take`), registers (`regs`), and
//!   rigd's reports of what it lends (`dma::DmaStatus`, `channel::ChannelInfo`,
//!   `queue::QueueInfo`).
//! - [`session::Session`], the floor of everything lent: opened over gRPC, then one
//!   connection on the side socket (`<socket>.fd`) carries its requests and the
//!   descriptors rigd sends back; it holds the session's credentials and the ledger of
//!   the memory it leases ([`session::Session::alloc`] → [`session::Buffer`]). rigd
//!   reclaims everything when that connection closes.
//!
//! Above the session, as peers that each take a `&Session` and import none of the
//! others: `channel` (NVIDIA channels on RM-served GPUs: [`channel::Channel::open`],
//! the pushbuffer words per class, ring, timeline), `queue` (the generic queue, NVMe
//! commands, [`queue::LentQueue::open`]), `lease` (a device lent whole:
//! [`lease::DeviceLease::open`]), `gpumem` (GPU memory on RM-served GPUs, carved into
//! buffers: [`gpumem::GpuMemory::alloc`]), `event` (events shared between sessions of
//! one uid: [`event::ExportedEvent::export`]), `dma` (pools as rigd reports them). A new
//! kind of lent resource is one more peer: it speaks its requests through
//! [`session::Session::call`], keeps what it needs beside the session
//! ([`session::Session::local`]) and edits none of these. One layer above the peers,
//! `space` answers which lease holds an address ([`space::find_region`]), reading the
//! session's ledger and gpumem's, so every check that memory is the session's asks it
//! the same way.
//!
//! Methods return this crate's own types, never wire types (the side socket's request
//! and reply bodies, which `Session::call` passes through for peers, excepted), and
//! errors that say what went wrong for a person: no daemon at that path, permission
//! denied on the socket (and which group grants access), a daemon too old for this
//! client. Each module's error is its own (`ClientError`, `SessionError`,
//! `ChannelError`, `QueueError`, `LeaseError`), the session's wrapped by the peers'.

#![deny(unsafe_code)]

pub mod channel;
mod client;
mod convert;
pub mod dma;
pub mod event;
pub mod gpumem;
pub mod lease;
pub mod model;
pub mod queue;
pub mod regs;
pub mod session;
pub mod space;
pub mod take;

pub use client::{Client, ClientError, DEFAULT_SOCKET, ERROR_DOMAIN, ErrorInfo, error_line};
pub use model::*;
pub use regs::RegAddr;
pub use take::{
    ArgError, BarSize, DetachRequest, HeldDevice, HeldState, LeaseHolder, Mode, Outcome,
    ResetMethod, ResizeOutcome, ServedGpu, Status, Step, StuckUnbind,
};
