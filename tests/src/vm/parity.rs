//! Inputs for the inspection-parity comparison (scenario `inspect-parity`): per PCI
//! function, what `lspci -vvv -nn -D` printed, what `lspci -xxxx -D` dumped and what
//! `rigctl show BDF --json -x` answered, all captured inside the guest. These are the
//! invocations `tests/parity_host.rs` runs on the host, so `crate::parity` compares both.
//!
//! Files: `results/inspect-parity/files/<bdf>/{lspci-vvv.txt,lspci-xxxx.txt,rigctl-show.json}`.

use std::path::Path;

use super::outcome::Outcome;

/// One function's captured views, as text.
#[derive(Debug, Clone)]
pub struct ParityInput {
    pub bdf: String,
    /// `lspci -vvv -nn -D -s BDF`.
    pub lspci_vvv: String,
    /// `lspci -xxxx -D -s BDF`: the config space dump.
    pub lspci_xxxx: String,
    /// `rigctl show BDF --json -x`.
    pub rigctl_json: String,
}

/// Every function captured by the `inspect-parity` scenario of `outcome`, in bus order;
/// empty if that scenario did not run.
#[must_use]
pub fn inputs(outcome: &Outcome) -> Vec<ParityInput> {
    let Some(scenario) = outcome.scenario("inspect-parity") else {
        return Vec::new();
    };
    outcome
        .devices
        .iter()
        .map(|d| {
            let dir = scenario.files.join(&d.bdf);
            ParityInput {
                bdf: d.bdf.clone(),
                lspci_vvv: read(&dir.join("lspci-vvv.txt")),
                lspci_xxxx: read(&dir.join("lspci-xxxx.txt")),
                rigctl_json: read(&dir.join("rigctl-show.json")),
            }
        })
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
