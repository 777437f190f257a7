//! Register calls on a held device: BAR reads and writes, bus mastering (`rigctl regs`);
//! the address type is `crate::regs`'s.

use rig_proto::v1 as pb;

use super::{Client, ClientError};
use crate::regs::RegAddr;

impl Client {
    /// Reads `count` consecutive registers of `width_bits` (8, 16, 32 or 64) from `at`.
    ///
    /// # Errors
    /// [`ClientError::Rpc`]: `PermissionDenied` for a caller who may not,
    /// `FailedPrecondition` for a device rig does not hold or a BAR it has not mapped,
    /// `InvalidArgument` for an access outside the BAR, misaligned, or too many.
    pub async fn read_bar(
        &mut self,
        bdf: &str,
        at: RegAddr,
        width_bits: u32,
        count: u32,
    ) -> Result<Vec<u64>, ClientError> {
        let req = pb::ReadBarRequest {
            bdf: bdf.to_owned(),
            bar: at.bar,
            offset: at.offset,
            width_bits,
            count,
        };
        let r = self.inner.read_bar(req).await;
        Ok(self.reply(r).await?.values)
    }

    /// Writes one register of `width_bits` at `at`.
    ///
    /// # Errors
    /// As [`Client::read_bar`], and a value wider than the access.
    pub async fn write_bar(
        &mut self,
        bdf: &str,
        at: RegAddr,
        width_bits: u32,
        value: u64,
    ) -> Result<(), ClientError> {
        let req = pb::WriteBarRequest {
            bdf: bdf.to_owned(),
            bar: at.bar,
            offset: at.offset,
            width_bits,
            value,
        };
        let r = self.inner.write_bar(req).await;
        self.reply(r).await?;
        Ok(())
    }

    /// Turns a held device's bus mastering on or off; returns whether it was on.
    ///
    /// # Errors
    /// [`ClientError::Rpc`]: `PermissionDenied`, or `FailedPrecondition` for a device
    /// rig does not hold.
    pub async fn set_bus_master(&mut self, bdf: &str, on: bool) -> Result<bool, ClientError> {
        let req = pb::SetBusMasterRequest {
            bdf: bdf.to_owned(),
            on,
        };
        let r = self.inner.set_bus_master(req).await;
        Ok(self.reply(r).await?.was_on)
    }
}
