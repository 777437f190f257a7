//! Queues as rigd reports them: every queue it lends, with its owner, rings and the
//! positions the client last published (`Queues.Status`, [`crate::Client::queues`];
//! `rigctl queues` prints it). Part of the `--json` schema.
//!
//! Not here: a queue of this process's own (`lent`).

use rig_model::addr::Iova;
use rig_proto::v1 as pb;

/// One lent queue, as rigd lists it (`Queues.Status`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueueInfo {
    pub device: String,
    pub qid: u32,
    pub session: u64,
    pub uid: u32,
    pub pid: i32,
    pub depth: u32,
    pub entries: u32,
    /// Where the device reaches the rings: IOVAs (queues are lent in vfio mode only).
    pub sq_address: Iova,
    pub cq_address: Iova,
    pub sq_doorbell: u64,
    pub page_isolated: bool,
    pub stuck: bool,
    pub since_unix_s: u64,
    /// As the client last published them in its shadow page.
    pub sq_tail: u32,
    pub cq_head: u32,
    /// Whether an MSI-X vector is lent (not yet: lent queues are polled).
    pub interrupts: bool,
}

impl From<pb::QueueInfo> for QueueInfo {
    fn from(q: pb::QueueInfo) -> Self {
        Self {
            device: q.device,
            qid: q.qid,
            session: q.session,
            uid: q.uid,
            pid: q.pid,
            depth: q.depth,
            entries: q.entries,
            sq_address: Iova(q.sq_address),
            cq_address: Iova(q.cq_address),
            sq_doorbell: q.sq_doorbell,
            page_isolated: q.page_isolated,
            stuck: q.stuck,
            since_unix_s: q.since_unix_s,
            sq_tail: q.sq_tail,
            cq_head: q.cq_head,
            interrupts: q.interrupts,
        }
    }
}
