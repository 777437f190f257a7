//! rigd's reports of what it lends: DMA pools and their use (`rigctl dma`), the channels
//! (`rigctl channels`) and the queues (`rigctl queues`). The report types are `dma`'s,
//! `channel`'s and `queue`'s.

use rig_proto::v1::{self as pb, dma_client::DmaClient, queues_client::QueuesClient};

use super::{Client, ClientError};
use crate::{channel::ChannelInfo, dma::DmaStatus, queue::QueueInfo};

impl Client {
    /// DMA pools and per-client use (every session for root, the caller's own
    /// otherwise).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with the daemon's reason, or [`ClientError::DaemonTooOld`].
    pub async fn dma_status(&mut self) -> Result<DmaStatus, ClientError> {
        let r = DmaClient::new(self.channel())
            .status(pb::DmaStatusRequest {})
            .await;
        Ok(self.reply(r).await?.into())
    }

    /// Every channel lent on rigd's RM-served GPUs (all for root, the caller's own
    /// otherwise), as `rigctl channels` shows them.
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with the daemon's reason, or [`ClientError::DaemonTooOld`].
    pub async fn channels(&mut self) -> Result<Vec<ChannelInfo>, ClientError> {
        let r = DmaClient::new(self.channel())
            .channels(pb::DmaChannelsRequest {})
            .await;
        Ok(self
            .reply(r)
            .await?
            .channels
            .into_iter()
            .map(ChannelInfo::from_wire)
            .collect())
    }

    /// Every queue rigd lends now (root sees all, others their own).
    ///
    /// # Errors
    /// [`ClientError::Rpc`] with the daemon's reason, or [`ClientError::DaemonTooOld`].
    pub async fn queues(&mut self) -> Result<Vec<QueueInfo>, ClientError> {
        let r = QueuesClient::new(self.channel())
            .status(pb::QueueStatusRequest {})
            .await;
        Ok(self
            .reply(r)
            .await?
            .queues
            .into_iter()
            .map(Into::into)
            .collect())
    }
}
