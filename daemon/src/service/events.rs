//! Shared events on the wire: the side socket's export, import and close requests
//! (proto/rig/v1/event.proto); each reply that lends a page carries its file. The
//! books are `events`'; the side socket's framing is `dma::side`'s; the codes of the
//! errors are `status`'s.

use std::{os::fd::OwnedFd, sync::Arc};

use rig_proto::v1::{self as pb, session_reply::Body as Reply};

use super::status::{self, error_line};
use crate::{
    dma::SessionId,
    error::Classify,
    events::EventId,
    rig::{Rig, RigError},
};

fn failure(e: &RigError) -> (pb::SessionReply, Vec<OwnedFd>) {
    let body = Reply::Error(pb::SessionError {
        code: status::dma_code(e.class().reason).into(),
        message: error_line(e),
    });
    (pb::SessionReply { body: Some(body) }, Vec::new())
}

fn reply(body: Reply, fds: Vec<OwnedFd>) -> (pb::SessionReply, Vec<OwnedFd>) {
    (pb::SessionReply { body: Some(body) }, fds)
}

/// Makes an event's page and maps it into the session's space (RM calls, in place on
/// this worker: `watchdog::in_place`).
pub async fn export(rig: &Arc<Rig>, session: SessionId) -> (pb::SessionReply, Vec<OwnedFd>) {
    let rig = Arc::clone(rig);
    let made = super::watchdog::in_place(
        "side.event_export",
        super::watchdog::SIDE_LIMIT,
        move || rig.export_event(session),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    match made {
        Ok(e) => reply(
            Reply::EventExported(pb::EventExported {
                event: e.id.0,
                token: e.token.to_vec(),
                gpu_va: e.gpu_va,
                bytes: e.bytes,
            }),
            vec![e.file],
        ),
        Err(e) => failure(&e),
    }
}

/// Maps the event a token names, read-only, into the session's space.
pub async fn import(
    rig: &Arc<Rig>,
    session: SessionId,
    req: pb::EventImport,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let rig = Arc::clone(rig);
    let mapped = super::watchdog::in_place(
        "side.event_import",
        super::watchdog::SIDE_LIMIT,
        move || rig.import_event(session, &req.token),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    match mapped {
        Ok(e) => reply(
            Reply::EventImported(pb::EventImported {
                event: e.id.0,
                gpu_va: e.gpu_va,
                bytes: e.bytes,
                exporter: e.exporter.0,
            }),
            vec![e.file],
        ),
        Err(e) => failure(&e),
    }
}

/// Unmaps one of the session's events; the exporter's close ends it for its importers.
pub async fn close(
    rig: &Arc<Rig>,
    session: SessionId,
    req: pb::EventClose,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let rig = Arc::clone(rig);
    let closed =
        super::watchdog::in_place("side.event_close", super::watchdog::SIDE_LIMIT, move || {
            rig.close_event(session, EventId(req.event))
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    match closed {
        Ok(()) => reply(
            Reply::EventClosed(pb::EventClosed { event: req.event }),
            Vec::new(),
        ),
        Err(e) => failure(&e),
    }
}
