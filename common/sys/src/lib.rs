//! rig-sys: the kernel interfaces that rigd and rig-client both speak, and the only
//! `unsafe` either needs for them.
//!
//! Flow: rigd makes DMA blocks as sealed memfds ([`memfd`]), maps them ([`mman`]) and
//! sends their descriptors to a client over a `SOCK_SEQPACKET` side socket
//! ([`scm`]); the client receives them there, checks their seals ([`memfd`]) and maps
//! them ([`mman`]). Channels' blocked waits sleep on a [`wake`] descriptor rigd
//! signals when the GPU raised an interrupt. Each module is one kernel interface, each call a small safe
//! wrapper of one syscall whose `// SAFETY:` says why it holds (rust-vmm's layering:
//! bindings → this → callers that never see `unsafe`).
//!
//! Invariants: a [`mman::Mapping`] is only ever made of a [`memfd::SealedMemfd`], a
//! file that can neither shrink nor grow, so no access inside a mapping can fault with
//! SIGBUS; no `&`/`&mut` into a mapping ever exists (device-visible memory).
//!
//! References: memfd_create(2), fcntl(2) "File Sealing", mmap(2), unix(7)
//! `SCM_RIGHTS`/`SO_PEERCRED`. Not here: what only rigd does — hugetlb allocation and
//! hole punching, pagemap, MMIO, VFIO, sysfs — lives in `rigd::sys`; the policy of which
//! mapping is locked lives in `rigd::dma`.

#![deny(unsafe_code)]

pub mod memfd;
#[expect(
    unsafe_code,
    reason = "mmap(2)/munmap(2) and volatile access to the mapping"
)]
pub mod mman;
#[expect(
    unsafe_code,
    reason = "owning descriptors the kernel installs (SCM_RIGHTS), registering with tokio"
)]
pub mod scm;
pub mod wake;
