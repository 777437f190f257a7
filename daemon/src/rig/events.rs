//! Events shared between DMA sessions on served GPUs (the books are `events`', the
//! GPU and the sessions' address spaces `channels::Served`'s): the ledger's note
//! ([`Kind::Events`], taken back after the channels and before GPU memory and the
//! address space), and the session's GPU found by its pool.

use super::{Kind, Rig, RigError};
use crate::{
    dma,
    events::{EventId, EventsHeld, ExportedEvent, ImportedEvent},
};

impl Rig {
    /// Exports a new event from `session`, mapped in its address space.
    ///
    /// # Errors
    /// [`RigError::Channel`] (`NotServed`), [`RigError::Event`].
    pub fn export_event(&self, session: dma::SessionId) -> Result<ExportedEvent, RigError> {
        let host = self.served_host(session)?;
        // Noted before the RM calls: a session's end then takes back whatever they made.
        self.ledger.note(session, Kind::Events);
        Ok(host.export_event(session)?)
    }

    /// Imports into `session` the event of its GPU that `token` names: of the same uid
    /// only.
    ///
    /// # Errors
    /// [`RigError::Channel`] (`NotServed`), [`RigError::Event`].
    pub fn import_event(
        &self,
        session: dma::SessionId,
        token: &[u8],
    ) -> Result<ImportedEvent, RigError> {
        let host = self.served_host(session)?;
        self.ledger.note(session, Kind::Events);
        Ok(host.import_event(session, token)?)
    }

    /// Closes one of `session`'s events.
    ///
    /// # Errors
    /// [`RigError::Channel`] (`NotServed`), [`RigError::Event`] (`UnknownEvent`).
    pub fn close_event(&self, session: dma::SessionId, id: EventId) -> Result<(), RigError> {
        Ok(self.served_host(session)?.close_event(session, id)?)
    }

    /// What each session holds of the shared events of every served GPU, by session.
    pub fn events_held(&self) -> Vec<EventsHeld> {
        let mut v: Vec<EventsHeld> = self.hosts().iter().flat_map(|h| h.events_held()).collect();
        v.sort_by_key(|e| e.session);
        v
    }

    /// Ends `session`'s events; returns how many. Its channels stopped before
    /// (`end_channels`).
    pub(super) fn end_events(&self, session: dma::SessionId) -> usize {
        match self.host_of(session) {
            Ok(Some(h)) => h.end_events(session),
            _ => 0,
        }
    }
}
