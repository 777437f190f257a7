//! A served GPU's shared events (`events`), in each session's own address space:
//! `Served` finds the session's space and owner and hands the bookkeeping to its
//! [`Sharer`](crate::events::Sharer), and wakes the importers of an event whose
//! exporter went (their waits re-read the page and find it gone). The order of a
//! session's end is the ledger's: its channels stop (`ChannelHost::end`), then its
//! events go ([`EventHost::end_events`]), then its GPU memory and its leases.

use std::sync::Arc;

use super::{Served, lock_client};
use crate::{
    dma::SessionId,
    events::{Ended, EventError, EventHost, EventId, EventsHeld, ExportedEvent, ImportedEvent},
    nvrm::{AddressSpace, Rm},
};
use rig_sys::scm::PeerCred;

impl<R: Rm> Served<R> {
    fn space_of(&self, session: SessionId) -> Result<(PeerCred, Arc<AddressSpace<R>>), EventError> {
        let shared = self.client(session).ok_or_else(|| EventError::NoSpace {
            session,
            gpu: self.name.clone(),
        })?;
        let c = lock_client(&shared);
        Ok((c.peer, Arc::clone(&c.space)))
    }

    fn wake_importers(&self, ended: &Ended) {
        if let Some(w) = &self.wakers {
            for &s in &ended.importers {
                w.signal_session(s);
            }
        }
    }
}

impl<R: Rm + 'static> EventHost for Served<R> {
    fn export_event(&self, session: SessionId) -> Result<ExportedEvent, EventError> {
        let (peer, space) = self.space_of(session)?;
        self.events.export(session, peer, &space)
    }

    fn import_event(&self, session: SessionId, token: &[u8]) -> Result<ImportedEvent, EventError> {
        let (peer, space) = self.space_of(session)?;
        let imported = self.events.import(session, peer, &space, token)?;
        // Its waits are for the exporter's interrupts, which its own channels' wake
        // words do not announce.
        if let Some(w) = &self.wakers {
            w.unfilter(session);
        }
        Ok(imported)
    }

    fn close_event(&self, session: SessionId, id: EventId) -> Result<(), EventError> {
        let ended = self.events.close(session, id)?;
        self.wake_importers(&ended);
        Ok(())
    }

    fn end_events(&self, session: SessionId) -> usize {
        let ended = self.events.end(session);
        self.wake_importers(&ended);
        ended.events
    }

    fn events_held(&self) -> Vec<EventsHeld> {
        self.events.held()
    }
}
