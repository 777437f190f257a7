//! rigd: takes PCI GPUs from their kernel drivers and lends them to unprivileged
//! programs over gRPC on a Unix socket.
//!
//! A request moves down the stages; each calls only the one below it:
//! `service` (gRPC, auth, proto ↔ internal) → `rig` (owns devices, sequences work) →
//! `pci` (read-only discovery). `config` is read once at start. `sys` is the only
//! module with `unsafe`, one file per kernel interface.

#![deny(unsafe_code)]

pub mod config;
pub mod dma;
pub mod nvrm;
pub mod pci;
pub mod rig;
pub mod service;
#[allow(unsafe_code)]
pub mod sys;
pub mod take;
pub mod testing;
