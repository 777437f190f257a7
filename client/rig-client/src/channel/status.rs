//! Channels as rigd reports them: every channel lent on its RM-served GPUs, with its
//! owner, ring positions and any error the RM posted (`Dma.Channels`,
//! [`crate::Client::channels`]; `rigctl channels` prints it). Part of the `--json` schema.
//!
//! Not here: a channel of this process's own (`lent`).

use rig_proto::{convert::WireEnum, v1 as pb};
use serde::{Deserialize, Serialize};

use super::{Engine, Rings};

/// One channel lent on an RM-served GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelInfo {
    pub channel: u64,
    pub gpu: String,
    pub session: u64,
    pub uid: u32,
    pub pid: i32,
    /// "copy" or "compute"; `null` for an engine this rigctl does not know.
    pub engine: Option<Engine>,
    pub entries: u32,
    /// Where ring, USERD and pushbuffer live: "host" or "gpu"; `null` for a place
    /// this rigctl does not know.
    #[serde(default)]
    pub rings: Option<Rings>,
    pub gp_get: u32,
    pub gp_put: u32,
    /// The error the RM posted, if any.
    pub fault: Option<ChannelFaultInfo>,
    /// When it was opened, ms since the Unix epoch.
    pub opened_unix_ms: u64,
}

/// What the RM wrote into a channel's error notifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelFaultInfo {
    /// ROBUST_CHANNEL_* (`nverror.h`): 31 MMU fault, 32 PBDMA error.
    pub info32: u32,
    pub info16: u32,
    pub status: u32,
    pub time_ns: u64,
    pub reason: String,
}

impl ChannelInfo {
    pub(crate) fn from_wire(c: pb::DmaChannel) -> Self {
        Self {
            channel: c.channel,
            gpu: c.gpu,
            session: c.session,
            uid: c.uid,
            pid: c.pid,
            engine: Engine::from_wire(c.engine),
            entries: c.entries,
            rings: Rings::from_wire(c.rings),
            gp_get: c.gp_get,
            gp_put: c.gp_put,
            fault: c.fault.map(|f| ChannelFaultInfo {
                info32: f.info32,
                info16: f.info16,
                status: f.status,
                time_ns: f.time_ns,
                reason: f.reason,
            }),
            opened_unix_ms: c.opened_unix_ms,
        }
    }
}
