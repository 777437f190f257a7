//! The GPU's clock boost, held while any session on it has a channel: without it the
//! H200 stays at idle clocks and kernels and copies run at a third of CUDA's speed;
//! CUDA itself asks for the same boost (docs/hardware/nvidia-compute.md, "Clocks").
//! Set with the first channel lent on the GPU, cleared with the last one closed, and
//! when rigd lets the GPU go.
//!
//! State: the count of channels lent on the GPU and whether the boost is on, under one
//! mutex that is held across the RM call, so a set and a clear never cross. A boost the
//! RM refuses is logged once (the channels run, slower) and asked for again with the
//! next channel.

use std::sync::{Mutex, PoisonError};

use crate::nvrm::{Gpu, Rm};

#[derive(Debug, Default)]
struct State {
    channels: usize,
    on: bool,
    warned: bool,
}

/// One GPU's boost.
#[derive(Debug, Default)]
pub(super) struct Boost {
    state: Mutex<State>,
}

impl Boost {
    /// A channel was lent on `gpu`: boosts it if it is not boosted yet.
    pub(super) fn opened<R: Rm>(&self, gpu: &Gpu<R>) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.channels += 1;
        if st.on {
            return;
        }
        match gpu.perf_boost(true) {
            Ok(()) => {
                st.on = true;
                tracing::debug!(gpu = %gpu.card().bdf, "clocks boosted while channels are lent");
            }
            Err(e) if !st.warned => {
                st.warned = true;
                tracing::warn!(gpu = %gpu.card().bdf, error = &e as &dyn std::error::Error, "the GPU stays at its idle clocks");
            }
            Err(_) => {}
        }
    }

    /// `n` channels on `gpu` were closed: clears the boost when none is left.
    pub(super) fn closed<R: Rm>(&self, gpu: &Gpu<R>, n: usize) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.channels = st.channels.saturating_sub(n);
        if st.channels == 0 {
            Self::clear_locked(&mut st, gpu);
        }
    }

    /// Clears the boost whatever is lent (rigd lets the GPU go).
    pub(super) fn clear<R: Rm>(&self, gpu: &Gpu<R>) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        Self::clear_locked(&mut st, gpu);
    }

    fn clear_locked<R: Rm>(st: &mut State, gpu: &Gpu<R>) {
        if !st.on {
            return;
        }
        st.on = false;
        match gpu.perf_boost(false) {
            Ok(()) => tracing::debug!(gpu = %gpu.card().bdf, "clock boost cleared"),
            // The RM drops a client's boost with the client, at rigd's exit at the latest.
            Err(e) => {
                tracing::warn!(gpu = %gpu.card().bdf, error = &e as &dyn std::error::Error, "clearing the clock boost");
            }
        }
    }

    /// Whether the boost is on now.
    pub(super) fn is_on(&self) -> bool {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).on
    }
}
