//! `NonStall`: the RM's word that one GPU raised a non-stall interrupt — an OS event
//! (NV01_EVENT_OS_EVENT) on the subdevice for the host's notifier with
//! NV01_EVENT_NONSTALL_INTR, posted without event data to a file of rigd's own.
//!
//! What raises it: NON_STALL_INTERRUPT (host method 0x20) in any channel of the GPU,
//! any process's; on Hopper the RM also fires the host's notifier for every
//! host-driven engine's non-stall interrupt. So an edge says only that something on
//! the GPU may have landed: whoever wakes re-reads its own semaphore. Nothing is
//! queued per interrupt (WITHOUT_EVENT_DATA): the file is marked readable, and the
//! poll that reports it clears the mark, so interrupts between two polls are one edge
//! and none is lost (docs/hardware/nvidia-rm.md, "Non-stall interrupts and OS
//! events").
//!
//! State: the event file (`Rm::open_events`, registered under the root client before
//! the object names its key) and the event object under the subdevice; dropped in
//! reverse. Not here: who is woken (`channels::wake`), the words a channel pushes
//! (rig-client's wait).

use std::{os::fd::BorrowedFd, sync::Arc};

use zerocopy::IntoBytes;

use super::{
    Gpu, NvrmError,
    calls::{EventFile, Rm},
    error::{Step, at},
    layout::r580,
};
use crate::sys::nvrm::NvHandle;

/// NV0005's `notifyIndex`: the host's notifier, as a non-stall event without data.
pub const NONSTALL_NOTIFY_INDEX: u32 = r580::NV2080_NOTIFIERS_FIFO_EVENT_MTHD
    | r580::NV01_EVENT_NONSTALL_INTR
    | r580::NV01_EVENT_WITHOUT_EVENT_DATA;

/// One GPU's non-stall interrupts, as a pollable file.
#[derive(Debug)]
pub struct NonStall<R: Rm> {
    // Field order: the object is freed (Drop) before the file closes.
    gpu: Arc<Gpu<R>>,
    h_event: NvHandle,
    file: R::Events,
}

impl<R: Rm> NonStall<R> {
    /// Opens an event file, registers it, and allocates the event on `gpu`'s
    /// subdevice naming it; then asks for it on every interrupt, as NVIDIA's own
    /// in-kernel clients do (a refusal of that is logged: the non-stall path does not
    /// read it).
    ///
    /// # Errors
    /// [`NvrmError::Call`] at [`Step::OpenEvents`] or [`Step::AllocEvent`]; what was
    /// made is freed.
    pub fn open(gpu: &Arc<Gpu<R>>) -> Result<Self, NvrmError> {
        let rm = gpu.rm();
        let file = rm.open_events().map_err(at(Step::OpenEvents))?;
        let mut p = r580::Nv0005AllocParameters {
            h_parent_client: rm.client(),
            h_src_resource: gpu.subdevice(),
            h_class: r580::NV01_EVENT_OS_EVENT,
            notify_index: NONSTALL_NOTIFY_INDEX,
            data: u64::from(file.key()),
        };
        let h_event = rm
            .alloc(
                gpu.subdevice(),
                r580::NV01_EVENT_OS_EVENT,
                Some(p.as_mut_bytes()),
            )
            .map_err(at(Step::AllocEvent))?;
        let events = Self {
            gpu: Arc::clone(gpu),
            h_event,
            file,
        };
        let mut n = r580::Nv2080CtrlEventSetNotificationParams {
            event: r580::NV2080_NOTIFIERS_FIFO_EVENT_MTHD,
            action: r580::NV2080_CTRL_EVENT_SET_NOTIFICATION_ACTION_REPEAT,
            ..Default::default()
        };
        if let Err(e) = rm
            .control(
                gpu.subdevice(),
                r580::NV2080_CTRL_CMD_EVENT_SET_NOTIFICATION,
                n.as_mut_bytes(),
            )
            .map_err(at(Step::EventNotification))
        {
            tracing::debug!(
                gpu = %gpu.card().bdf,
                error = &e as &dyn std::error::Error,
                "the RM refused REPEAT for the non-stall event (its non-stall path does not read it)"
            );
        }
        Ok(events)
    }

    /// The file to poll (POLLIN | POLLPRI).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.fd()
    }

    /// After a poll said readable: clears what poll itself did not.
    pub fn consume(&self) {
        self.file.consume();
    }

    /// The GPU's PCI address.
    pub fn gpu(&self) -> &str {
        &self.gpu.card().bdf
    }
}

impl<R: Rm> Drop for NonStall<R> {
    fn drop(&mut self) {
        if let Err(e) = self
            .gpu
            .rm()
            .free(self.gpu.subdevice(), self.h_event)
            .map_err(at(Step::Free))
        {
            tracing::warn!(
                gpu = %self.gpu.card().bdf,
                error = &e as &dyn std::error::Error,
                "freeing the non-stall event"
            );
        }
    }
}
