//! What driving an NVMe controller fails with: one variant per kind of failure, each
//! naming the controller and the step; register and memory causes are `#[source]`s,
//! printed once at the edge (`service::status`).

use std::time::Duration;

use super::cmd::Status;
use crate::{
    dma::DmaError,
    error::{Class, Classify, Reason},
    pci::Bdf,
    sys::mmio::MmioError,
};

/// A step of driving an NVMe controller that failed.
#[derive(Debug, thiserror::Error)]
pub enum NvmeError {
    #[error("Failed to {step} on NVMe controller {bdf}: a register access was refused")]
    Register {
        bdf: Bdf,
        step: &'static str,
        #[source]
        source: MmioError,
    },
    #[error("Failed to {step} on NVMe controller {bdf}: its DMA memory could not be reached")]
    Memory {
        bdf: Bdf,
        step: &'static str,
        #[source]
        source: DmaError,
    },
    #[error(
        "Failed to {step} on NVMe controller {bdf}: CSTS.RDY did not become {} within {} ms (CAP.TO)",
        u8::from(*.want), .waited.as_millis()
    )]
    ReadyTimeout {
        bdf: Bdf,
        step: &'static str,
        want: bool,
        waited: Duration,
    },
    #[error(
        "Failed to {step} on NVMe controller {bdf}: the controller reports a fatal status (CSTS.CFS)"
    )]
    Fatal { bdf: Bdf, step: &'static str },
    #[error("Failed to {step} on NVMe controller {bdf}: {status}")]
    Command {
        bdf: Bdf,
        step: &'static str,
        status: Status,
    },
    #[error(
        "Failed to {step} on NVMe controller {bdf}: no completion within {} ms; the admin queue is unusable until the controller is reset",
        .waited.as_millis()
    )]
    CommandTimeout {
        bdf: Bdf,
        step: &'static str,
        waited: Duration,
    },
    #[error(
        "Failed to {step} on NVMe controller {bdf}: completion {got:?} does not answer command {want} (sq head {sq_head})"
    )]
    StrayCompletion {
        bdf: Bdf,
        step: &'static str,
        want: u16,
        got: (u16, u16),
        sq_head: u16,
    },
    #[error(
        "Failed to {step} on NVMe controller {bdf}: an earlier admin command was lost; reset the controller first"
    )]
    Wedged { bdf: Bdf, step: &'static str },
    #[error("Failed to {step} on NVMe controller {bdf}: the controller is not enabled")]
    NotEnabled { bdf: Bdf, step: &'static str },
    #[error("NVMe controller {bdf} is not usable by rig: {why}")]
    Unsupported { bdf: Bdf, why: String },
    #[error("Failed to {step} on NVMe controller {bdf}: queue {qid} {why}")]
    BadQueue {
        bdf: Bdf,
        step: &'static str,
        qid: u16,
        why: String,
    },
}

impl Classify for NvmeError {
    /// A controller rigd cannot drive, or any other failure of its admin queue.
    fn class(&self) -> Class {
        match self {
            Self::Unsupported { .. } => Reason::NvmeUnsupported.into(),
            _ => Reason::NvmeAdminFailed.into(),
        }
    }
}

impl NvmeError {
    /// The NVMe status a command completed with, when that is what failed.
    pub fn status(&self) -> Option<Status> {
        match self {
            Self::Command { status, .. } => Some(*status),
            _ => None,
        }
    }
}
