//! Queue requests on the DMA side socket: `QueueOpen` and `QueueClose` of a claimed
//! session, answered `QueueOpened` with the kick eventfd attached, `QueueClosed`, or
//! `QueueRefused` with a code and one line. The work (admin commands that poll, VFIO
//! ioctls) runs on a blocking thread. Errors a client causes are logged at debug by
//! the connection, like the DMA ones.

use std::{os::fd::OwnedFd, sync::Arc};

use rig_proto::v1::{self as pb, session_reply::Body as Reply};
use rig_sys::scm::PeerCred;

use super::reply;
use crate::{
    dma::{LeaseId, SessionId},
    error::Classify,
    queue::Owner,
    rig::{Rig, RigError},
    service::status::{self, error_line},
};

pub(super) async fn open(
    rig: &Arc<Rig>,
    id: SessionId,
    peer: PeerCred,
    q: pb::QueueOpen,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let rig = Arc::clone(rig);
    let owner = Owner {
        session: id,
        uid: peer.uid,
        pid: peer.pid,
    };
    let done = crate::service::watchdog::off_runtime(
        "side.open_queue",
        crate::service::watchdog::SIDE_LIMIT,
        move || rig.open_queue(id, owner, q.depth, LeaseId(q.lease), q.offset),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    match done {
        Ok(lent) => {
            let opened = pb::QueueOpened {
                qid: lent.qid.into(),
                entries: lent.entries,
                sq_offset: lent.sq_offset,
                cq_offset: lent.cq_offset,
                shadow_offset: lent.shadow_offset,
                shadow_slot: lent.shadow_slot,
                nsid: lent.namespace.nsid,
                interrupts: lent.irq.is_some(),
                lba_shift: lent.namespace.lba_shift,
                blocks: lent.namespace.blocks,
            };
            let mut fds = vec![crate::sys::vfio::eventfd_into_owned(lent.kick)];
            fds.extend(lent.irq.map(crate::sys::vfio::eventfd_into_owned));
            (reply(Reply::QueueOpened(opened)), fds)
        }
        Err(e) => (refused(&e), Vec::new()),
    }
}

pub(super) async fn close(
    rig: &Arc<Rig>,
    id: SessionId,
    q: pb::QueueClose,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let rig = Arc::clone(rig);
    let Ok(qid) = u16::try_from(q.qid) else {
        return (
            refused_with(pb::QueueErrorCode::NotYours, format!("No queue {}", q.qid)),
            Vec::new(),
        );
    };
    let done = crate::service::watchdog::off_runtime(
        "side.close_queue",
        crate::service::watchdog::SIDE_LIMIT,
        move || rig.close_queue(id, qid),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    match done {
        Ok(()) => (
            reply(Reply::QueueClosed(pb::QueueClosed { qid: q.qid })),
            Vec::new(),
        ),
        Err(e) => (refused(&e), Vec::new()),
    }
}

fn refused_with(code: pb::QueueErrorCode, message: String) -> pb::SessionReply {
    reply(Reply::QueueRefused(pb::QueueRefused {
        code: code.into(),
        message,
    }))
}

fn refused(e: &RigError) -> pb::SessionReply {
    refused_with(status::queue_code(e.class().reason), error_line(e))
}
