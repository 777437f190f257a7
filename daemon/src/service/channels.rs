//! Channels on the wire: the side socket's open and close requests (their replies
//! carry the ring, notifier and usermode descriptors, and the wake descriptor where
//! rigd watches the GPU's interrupts), `Dma.Channels` for `rigctl
//! channels`, and the error-notifier watch's task. The bookkeeping is `channels`'; the
//! side socket's framing is `dma::side`'s; the codes of channel errors are
//! `status`'s; engines, rings and faults are `rig_model::nv`'s, converted by
//! `rig-proto`.

use std::{os::fd::OwnedFd, sync::Arc, time::UNIX_EPOCH};

use rig_proto::{
    convert::WireEnum,
    v1::{self as pb, session_reply::Body as Reply},
};

use super::{
    status::{self, error_line},
    until_true,
};
use crate::{
    channels::{ChannelId, ChannelRequest, ChannelView, DOORBELL_OFFSET, Rings},
    dma::SessionId,
    error::Classify,
    nvrm::Engine,
    rig::{Rig, RigError},
};

/// How often rigd reads its channels' error notifiers (a few loads per channel).
pub const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

fn failure(e: &RigError) -> (pb::SessionReply, Vec<OwnedFd>) {
    let body = Reply::Error(pb::SessionError {
        code: status::dma_code(e.class().reason).into(),
        message: error_line(e),
    });
    (pb::SessionReply { body: Some(body) }, Vec::new())
}

/// Opens a channel (tens of RM calls: on a blocking thread).
pub async fn open(
    rig: &Arc<Rig>,
    session: SessionId,
    req: pb::ChannelOpen,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let protocol = |message: &str| {
        let body = Reply::Error(pb::SessionError {
            code: pb::SessionErrorCode::Protocol.into(),
            message: message.into(),
        });
        (pb::SessionReply { body: Some(body) }, Vec::new())
    };
    let Some(engine) = Engine::from_wire(req.engine) else {
        return protocol("a channel needs an engine: copy or compute");
    };
    let Some(rings) = Rings::from_wire(req.rings) else {
        return protocol("a channel's rings live in host or GPU memory: no other place");
    };
    let ask = ChannelRequest {
        engine,
        entries: req.entries,
        rings,
        pushbuffer: req.pushbuffer_bytes,
    };
    let rig = Arc::clone(rig);
    let opened = super::watchdog::off_runtime(
        "side.channel_open",
        super::watchdog::SIDE_LIMIT,
        move || rig.open_channel(session, ask),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    match opened {
        Ok(o) => {
            let body = Reply::ChannelOpened(pb::ChannelOpened {
                channel: o.id.0,
                engine: o.engine.wire().into(),
                entries: o.entries,
                token: o.token,
                ring_gpu_va: o.ring_gpu_va,
                userd_offset: o.userd_offset,
                ring_bytes: o.ring_bytes,
                notifier_bytes: o.notifier_bytes,
                usermode_bytes: o.usermode_bytes,
                doorbell_offset: DOORBELL_OFFSET,
                rings: o.rings.wire().into(),
                pushbuffer_offset: o.pushbuffer_offset,
                pushbuffer_gpu_va: o.pushbuffer_gpu_va,
                pushbuffer_bytes: o.pushbuffer_bytes,
                wake: o.wake.is_some(),
                wake_offset: o.wake_offset,
            });
            tracing::debug!(
                session = session.0,
                channel = o.id.0,
                entries = o.entries,
                rings = ?o.rings,
                "channel opened"
            );
            let mut fds = vec![o.ring, o.notifier, o.usermode];
            fds.extend(o.wake);
            (pb::SessionReply { body: Some(body) }, fds)
        }
        Err(e) => failure(&e),
    }
}

/// Closes a channel (deschedule, drain, free: on a blocking thread).
pub async fn close(
    rig: &Arc<Rig>,
    session: SessionId,
    req: pb::ChannelClose,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let rig = Arc::clone(rig);
    let id = ChannelId(req.channel);
    let closed = super::watchdog::off_runtime(
        "side.channel_close",
        super::watchdog::SIDE_LIMIT,
        move || rig.close_channel(session, id),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    match closed {
        Ok(()) => (
            pb::SessionReply {
                body: Some(Reply::ChannelClosed(pb::ChannelClosed {
                    channel: req.channel,
                })),
            },
            Vec::new(),
        ),
        Err(e) => failure(&e),
    }
}

/// `Dma.Channels`'s reply.
pub fn status_reply(views: Vec<ChannelView>) -> pb::DmaChannelsReply {
    pb::DmaChannelsReply {
        channels: views
            .into_iter()
            .map(|v| pb::DmaChannel {
                channel: v.id.0,
                gpu: v.gpu,
                session: v.session.0,
                uid: v.uid,
                pid: v.pid,
                engine: v.engine.wire().into(),
                entries: v.entries,
                rings: v.rings.wire().into(),
                gp_get: v.gp_get,
                gp_put: v.gp_put,
                fault: v.fault.as_ref().map(pb::DmaChannelFault::from),
                opened_unix_ms: v
                    .opened
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            })
            .collect(),
    }
}

/// How often rigd reads each served GPU's recovery action (one kernel-side RM control).
pub const HEALTH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads every channel's notifier every [`WATCH_EVERY`] until `stopping`; a session
/// with a new fault is contained on a blocking thread (tens of RM calls), and every
/// [`HEALTH_EVERY`] each served GPU's health is read there too, one read at a time.
pub async fn watch(rig: Arc<Rig>, mut stopping: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(WATCH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut health = tokio::time::interval(HEALTH_EVERY);
    health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let reading = Arc::new(std::sync::atomic::AtomicBool::new(false));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                for session in rig.watch_channels() {
                    let rig = Arc::clone(&rig);
                    tokio::task::spawn_blocking(move || rig.contain_channels(session));
                }
            }
            _ = health.tick() => {
                // A read still waiting on the RM (behind a stuck call) is not doubled.
                if !reading.swap(true, std::sync::atomic::Ordering::AcqRel) {
                    let (rig, reading) = (Arc::clone(&rig), Arc::clone(&reading));
                    tokio::task::spawn_blocking(move || {
                        rig.check_gpu_health();
                        reading.store(false, std::sync::atomic::Ordering::Release);
                    });
                }
            }
            () = until_true(&mut stopping) => break,
        }
    }
}
