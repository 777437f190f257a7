//! The devices rigd sees: the listing, one function's full decode, and the host's peer
//! topology (`rigctl list`, `rigctl show`, `rigctl topo`).

use rig_proto::v1 as pb;

use super::{Client, ClientError};
use crate::{Device, Listing, convert, topo};

impl Client {
    /// Every PCI function the daemon sees (GPUs and accelerators first), or only GPUs.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with the daemon's reason.
    pub async fn list_devices(&mut self, gpus_only: bool) -> Result<Listing, ClientError> {
        let r = self
            .inner
            .list_devices(pb::ListDevicesRequest { gpus_only })
            .await;
        let reply = self.reply(r).await?;
        Ok(Listing {
            devices: reply
                .devices
                .into_iter()
                .map(convert::device)
                .collect::<Result<_, _>>()?,
            problems: reply.problems,
        })
    }

    /// The full decode of one function: `0000:03:00.0` or `03:00.0`.
    ///
    /// # Errors
    /// [`ClientError::Rpc`]: `InvalidArgument` for a malformed address, `NotFound` for
    /// a function that does not exist.
    pub async fn device(&mut self, bdf: &str) -> Result<Device, ClientError> {
        let r = self
            .inner
            .get_device(pb::GetDeviceRequest {
                bdf: bdf.to_owned(),
            })
            .await;
        let reply = self.reply(r).await?;
        convert::device(reply)
    }

    /// The host's peer topology: every GPU, its NVLink links, and for every ordered
    /// pair the PCIe path and the P2P capabilities the RM reports (`rigctl topo`).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with the daemon's reason; [`ClientError::Reply`].
    pub async fn topology(&mut self) -> Result<topo::Topology, ClientError> {
        let r = self.topo.get(pb::TopologyRequest {}).await;
        let reply = self.reply(r).await?;
        Ok(topo::Topology::try_from(reply)?)
    }
}
