//! Whole-device lease requests on the DMA side socket: `DeviceLease` of a claimed
//! session, answered `DeviceLeased` with the device's descriptors attached (the VFIO
//! device fd, or one `resourceN` file per BAR), `DeviceGiveBack` answered
//! `DeviceGivenBack`, or `DeviceLeaseRefused` with a code and one line. The work
//! (journal writes, config writes, a reset) runs on a blocking thread.

use std::{os::fd::OwnedFd, sync::Arc};

use rig_proto::v1::{self as pb, session_reply::Body as Reply};
use rig_sys::scm::PeerCred;

use super::reply;
use crate::{
    audit::{Actor, Outcome, Pending},
    dma::SessionId,
    error::Classify,
    rig::{Rig, RigError},
    service::status::{self, error_line},
};

pub(super) async fn lease(
    rig: &Arc<Rig>,
    id: SessionId,
    peer: PeerCred,
    d: pb::DeviceLease,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let audit = begin(rig, "side.lease_device", peer, &d.device);
    let rig = Arc::clone(rig);
    let done = crate::service::watchdog::off_runtime(
        "side.lease_device",
        crate::service::watchdog::RECLAIM_LIMIT,
        move || rig.lease_device(id, peer, &d.device),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    audit.finish(outcome(done.as_ref().err()));
    match done {
        Ok(lent) => {
            let leased = pb::DeviceLeased {
                device: lent.bdf.to_string(),
                mode: pb::DeviceLeaseMode::from(lent.mode).into(),
                regions: lent
                    .regions
                    .iter()
                    .map(|r| pb::DeviceRegion {
                        index: r.index,
                        size: r.size,
                        offset: r.offset,
                        flags: r.flags,
                        fd: r.fd,
                    })
                    .collect(),
                fds: u32::try_from(lent.fds.len()).unwrap_or(u32::MAX),
            };
            (reply(Reply::DeviceLeased(leased)), lent.fds)
        }
        Err(e) => (refused(&e), Vec::new()),
    }
}

pub(super) async fn give_back(
    rig: &Arc<Rig>,
    id: SessionId,
    peer: PeerCred,
    d: pb::DeviceGiveBack,
) -> (pb::SessionReply, Vec<OwnedFd>) {
    let audit = begin(rig, "side.give_back_device", peer, &d.device);
    let rig = Arc::clone(rig);
    let device = d.device.clone();
    let done = crate::service::watchdog::off_runtime(
        "side.give_back_device",
        crate::service::watchdog::RECLAIM_LIMIT,
        move || rig.give_back_device(id, &d.device),
    )
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    audit.finish(outcome(done.as_ref().err().map(|e| e as &RigError)));
    match done {
        Ok(report) => (
            reply(Reply::DeviceGivenBack(pb::DeviceGivenBack {
                device,
                reset: report.reset.unwrap_or_default(),
                warnings: report.warnings.iter().map(|w| error_line(w)).collect(),
            })),
            Vec::new(),
        ),
        Err(e) => (refused(&e), Vec::new()),
    }
}

/// Opens the audit line of a whole-device lease or its give-back.
fn begin(rig: &Rig, action: &str, peer: PeerCred, device: &str) -> Pending {
    let role = rig.policy().role_of(peer).map(crate::policy::Role::as_str);
    let p = rig.audit().begin(action, Actor { cred: peer, role });
    match device.parse::<crate::pci::Bdf>() {
        Ok(b) => p.device(b),
        Err(_) => p.device(device),
    }
    p
}

fn outcome(e: Option<&RigError>) -> Outcome {
    let Some(e) = e else {
        return Outcome::Ok;
    };
    let reason = e.class().reason;
    let (reason_word, message) = (reason.as_str().to_owned(), error_line(e));
    if status::code(reason) == tonic::Code::PermissionDenied {
        Outcome::Denied {
            reason: reason_word,
            message,
        }
    } else {
        Outcome::Failed {
            reason: reason_word,
            message,
        }
    }
}

fn refused(e: &RigError) -> pb::SessionReply {
    let reason = e.class().reason;
    crate::service::metrics::global().error(reason.as_str());
    reply(Reply::DeviceLeaseRefused(pb::DeviceLeaseRefused {
        code: status::lease_code(reason).into(),
        message: error_line(e),
    }))
}
