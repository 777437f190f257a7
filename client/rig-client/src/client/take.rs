//! Take-over calls: detach a device from its driver, give it back, reset it, resize a
//! BAR, and what rigd holds (`rigctl detach`, `attach`, `reset`, `resize`, `status`).
//! The requests, outcomes and steps are `crate::take`'s.

use rig_proto::v1 as pb;

use super::{Client, ClientError};
use crate::take::{
    BarSize, DetachRequest, Outcome, ResetMethod, ServedGpu, Status, Step, StuckUnbind, follow,
    held,
};

impl Client {
    /// Takes a device from its driver (root or the admin group).
    ///
    /// # Errors
    /// [`ClientError::Rpc`]: `PermissionDenied` for a caller who may not,
    /// `FailedPrecondition` with the holders when refused, `DeadlineExceeded` when the
    /// unbind did not return.
    pub async fn detach(
        &mut self,
        r: &DetachRequest,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::DetachRequest {
            bdf: r.bdf.clone(),
            mode: pb::TakeMode::from(r.mode).into(),
            bar_size: r.bar_size.map(pb::BarSize::from),
            entire_group: r.entire_group,
            force: r.force,
            timeout_s: r.timeout_s.unwrap_or(0),
        };
        let r = self.inner.detach(req).await;
        let s = self.reply(r).await?;
        follow(s, on_step).await
    }

    /// Gives a device back to its original driver.
    ///
    /// # Errors
    /// As [`Client::detach`].
    pub async fn attach(
        &mut self,
        bdf: &str,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::AttachRequest {
            bdf: bdf.to_owned(),
        };
        let r = self.inner.attach(req).await;
        let s = self.reply(r).await?;
        follow(s, on_step).await
    }

    /// Resets a held device.
    ///
    /// # Errors
    /// As [`Client::detach`].
    pub async fn reset(
        &mut self,
        bdf: &str,
        method: ResetMethod,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::ResetRequest {
            bdf: bdf.to_owned(),
            method: pb::ResetMethod::from(method).into(),
        };
        let r = self.inner.reset(req).await;
        let s = self.reply(r).await?;
        follow(s, on_step).await
    }

    /// Resizes BAR `bar` of a held device to `size` (max, or bytes).
    ///
    /// # Errors
    /// As [`Client::detach`]; `InvalidArgument` for [`BarSize::Keep`].
    pub async fn resize(
        &mut self,
        bdf: &str,
        bar: u8,
        size: BarSize,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::ResizeRequest {
            bdf: bdf.to_owned(),
            bar: bar.into(),
            size: Some(pb::BarSize::from(size)),
        };
        let r = self.inner.resize(req).await;
        let s = self.reply(r).await?;
        follow(s, on_step).await
    }

    /// What rigd holds.
    ///
    /// # Errors
    /// [`ClientError::Rpc`].
    pub async fn status(&mut self) -> Result<Status, ClientError> {
        let r = self.inner.status(pb::StatusRequest {}).await;
        let r = self.reply(r).await?;
        Ok(Status {
            devices: r.devices.into_iter().map(held).collect::<Result<_, _>>()?,
            recovered: r.recovered,
            stuck_unbinds: r
                .stuck_unbinds
                .into_iter()
                .map(|s| StuckUnbind {
                    bdf: s.bdf,
                    driver: s.driver,
                    seconds: s.seconds,
                })
                .collect(),
            served: r
                .served
                .into_iter()
                .map(|g| ServedGpu {
                    health: match pb::GpuHealth::try_from(g.health) {
                        Ok(pb::GpuHealth::Serving) => "serving",
                        Ok(pb::GpuHealth::Stalled) => "stalled",
                        Ok(pb::GpuHealth::Lost) => "lost",
                        _ => "unknown",
                    }
                    .to_owned(),
                    bdf: g.bdf,
                    reason: g.reason,
                    since_unix_ms: g.since_unix_ms,
                    geometry: g.geometry.map(Into::into),
                    copy_engines: g.copy_engines,
                    interrupts: g.interrupts,
                    wakes_given: g.wakes_given,
                    wakes_passed: g.wakes_passed,
                })
                .collect(),
        })
    }
}
