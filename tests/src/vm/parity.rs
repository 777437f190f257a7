//! Inputs for the inspection-parity comparison (scenario `inspect-parity`): per PCI
//! function, what `lspci -vvv` printed, the config space `lspci -xxxx` dumped, and what
//! `rigctl show --json` answered, all captured in the guest.
//!
//! The comparator itself (lspci text vs rigctl JSON) lives elsewhere; this module only
//! turns the files of a run into values.

use std::path::Path;

use super::outcome::Outcome;

/// One function's captured views.
#[derive(Debug, Clone)]
pub struct ParityInput {
    pub bdf: String,
    /// `lspci -vvv -s BDF` output.
    pub lspci_vvv: String,
    /// Config space from `lspci -xxxx -s BDF` (4096 bytes for PCIe, 256 otherwise).
    pub config: Vec<u8>,
    /// `rigctl show BDF --json` output (`None` if it was not valid JSON).
    pub rigctl: Option<serde_json::Value>,
}

/// Every function captured by the `inspect-parity` scenario of `outcome`, in bus order.
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
                config: parse_lspci_hex(&read(&dir.join("lspci-xxxx.txt"))),
                rigctl: serde_json::from_str(&read(&dir.join("rigctl-show.json"))).ok(),
            }
        })
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The bytes of an `lspci -x`/`-xxx`/`-xxxx` hex dump (`"0a0: 12 34 …"` lines after the
/// device's title line). Lines that are not dump lines are skipped; a dump line with a
/// bad byte ends the parse there.
#[must_use]
pub fn parse_lspci_hex(text: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    for line in text.lines() {
        let Some((offset, rest)) = line.split_once(": ") else {
            continue;
        };
        let Ok(offset) = usize::from_str_radix(offset, 16) else {
            continue;
        };
        if offset != bytes.len() {
            continue;
        }
        for byte in rest.split_ascii_whitespace() {
            match u8::from_str_radix(byte, 16) {
                Ok(b) => bytes.push(b),
                Err(_) => return bytes,
            }
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_dump_lines_become_bytes() {
        let text = "00:06.0 Unclassified device [00ff]: Device 1234:11e8 (rev 10)\n\
                    00: 34 12 e8 11 03 01 10 00 10 00 ff 00 00 00 00 00\n\
                    10: 00 00 a0 fe 00 00 00 00 00 00 00 00 00 00 00 00\n\n";

        let bytes = parse_lspci_hex(text);

        assert_eq!(bytes.len(), 32);
        assert_eq!(&bytes[..4], &[0x34, 0x12, 0xe8, 0x11]);
        assert_eq!(bytes[0x13], 0xfe);
    }

    #[test]
    fn an_out_of_order_line_is_skipped() {
        let text = "10: 01 02\n00: aa bb\n";

        assert_eq!(parse_lspci_hex(text), vec![0xaa, 0xbb]);
    }

    #[test]
    fn an_empty_dump_gives_no_bytes() {
        assert!(parse_lspci_hex("").is_empty());
    }
}
