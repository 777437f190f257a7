//! PCI addresses: domain, bus, device, function.

use std::{fmt, str::FromStr};

/// A PCI function's address, as Linux names it in sysfs: `0000:03:00.0`.
///
/// # Invariants
/// `device < 32` and `function < 8`; the parser refuses anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    domain: u32,
    bus: u8,
    device: u8,
    function: u8,
}

/// Why a string is not a PCI address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a PCI address (expected DDDD:BB:DD.F or BB:DD.F): {reason}")]
pub struct BdfError {
    input: String,
    reason: &'static str,
}

impl Bdf {
    /// Builds an address from its parts.
    ///
    /// # Errors
    /// When `device >= 32` or `function >= 8`.
    pub fn new(domain: u32, bus: u8, device: u8, function: u8) -> Result<Self, BdfError> {
        let err = |reason| BdfError {
            input: format!("{domain:04x}:{bus:02x}:{device:02x}.{function}"),
            reason,
        };
        if device >= 32 {
            return Err(err("device number above 1f"));
        }
        if function >= 8 {
            return Err(err("function number above 7"));
        }
        Ok(Self {
            domain,
            bus,
            device,
            function,
        })
    }

    /// The PCI domain (segment).
    pub fn domain(self) -> u32 {
        self.domain
    }

    /// The bus number.
    pub fn bus(self) -> u8 {
        self.bus
    }

    /// The device (slot) number, below 32.
    pub fn device(self) -> u8 {
        self.device
    }

    /// The function number, below 8.
    pub fn function(self) -> u8 {
        self.function
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

fn hex<T: TryFrom<u32>>(s: &str, max_digits: usize) -> Option<T> {
    if s.is_empty() || s.len() > max_digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16)
        .ok()
        .and_then(|v| T::try_from(v).ok())
}

impl FromStr for Bdf {
    type Err = BdfError;

    /// Accepts `DDDD:BB:DD.F` (domain up to 8 hex digits, as Linux prints VMD domains)
    /// and `BB:DD.F` (domain 0), case-insensitive, with surrounding whitespace ignored.
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason| BdfError {
            input: input.to_owned(),
            reason,
        };
        let s = input.trim();
        let (rest, function) = s.rsplit_once('.').ok_or_else(|| err("no `.F` function"))?;
        let function: u8 = hex(function, 1).ok_or_else(|| err("function is not one hex digit"))?;
        let mut parts = rest.rsplitn(3, ':');
        let device = parts.next().ok_or_else(|| err("no device"))?;
        let bus = parts.next().ok_or_else(|| err("no bus"))?;
        let domain = parts.next();
        let device: u8 = hex(device, 2).ok_or_else(|| err("device is not 1-2 hex digits"))?;
        let bus: u8 = hex(bus, 2).ok_or_else(|| err("bus is not 1-2 hex digits"))?;
        let domain: u32 = match domain {
            None => 0,
            Some(d) => hex(d, 8).ok_or_else(|| err("domain is not 1-8 hex digits"))?,
        };
        Self::new(domain, bus, device, function).map_err(|e| err(e.reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_and_short_forms_parse_to_the_same_address() {
        let full: Bdf = "0000:03:00.0".parse().expect("valid");
        let short: Bdf = "03:00.0".parse().expect("valid");
        assert_eq!(full, short);
        assert_eq!(full.to_string(), "0000:03:00.0");
    }

    #[test]
    fn vmd_domains_above_ffff_round_trip() {
        let b: Bdf = "10000:e1:1f.7".parse().expect("valid");
        assert_eq!(b.domain(), 0x10000);
        assert_eq!(b.to_string(), "10000:e1:1f.7");
    }

    #[test]
    fn device_and_function_bounds_are_enforced() {
        "00:1f.7"
            .parse::<Bdf>()
            .expect("largest device and function");
        "00:20.0".parse::<Bdf>().expect_err("device 0x20");
        "00:00.8".parse::<Bdf>().expect_err("function 8");
    }

    #[test]
    fn malformed_addresses_get_one_line_errors() {
        for bad in [
            "",
            "0000:03:00",
            "03-00.0",
            "zz:00.0",
            "0000:003:00.0",
            "0000:03:00.0.1",
            ":00.0",
            "0000::00.0",
            "1:2:3:4.0",
            "123456789:00:00.0",
            "00:00.a",
        ] {
            let e = bad.parse::<Bdf>().expect_err(bad).to_string();
            assert!(e.contains("not a PCI address"), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }
}
