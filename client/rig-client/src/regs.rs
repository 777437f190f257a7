//! Registers of a held device: where one lives ([`RegAddr`], `bar0:0x80`). The calls
//! that read and write them and set bus mastering (root or the admin group) are
//! `client/regs.rs`'s. For people bringing up a device by hand and for tests that drive
//! one; a runtime's own fast path will not go through rigd.

use serde::Serialize;

/// Where a register lives: a BAR and a byte offset in it, written `bar0:0x80`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RegAddr {
    pub bar: u32,
    pub offset: u64,
}

impl std::str::FromStr for RegAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("`{s}` is not a register address like bar0:0x80");
        let (bar, offset) = s.split_once(':').ok_or_else(bad)?;
        let bar = bar
            .strip_prefix("bar")
            .or_else(|| bar.strip_prefix("BAR"))
            .unwrap_or(bar)
            .parse::<u32>()
            .map_err(|_| bad())?;
        if bar > 5 {
            return Err(format!("BAR{bar} does not exist (0 to 5)"));
        }
        let offset = parse_u64(offset).ok_or_else(bad)?;
        Ok(Self { bar, offset })
    }
}

impl std::fmt::Display for RegAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bar{}:{:#x}", self.bar, self.offset)
    }
}

/// A number in decimal or `0x` hexadecimal.
pub fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => s.replace('_', "").parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_addresses_read_bar_and_offset_in_hex_or_decimal() {
        assert_eq!(
            "bar0:0x80".parse(),
            Ok(RegAddr {
                bar: 0,
                offset: 0x80
            })
        );
        assert_eq!(
            "2:4096".parse(),
            Ok(RegAddr {
                bar: 2,
                offset: 4096
            })
        );
        assert_eq!(
            "BAR5:0x1_0000".parse(),
            Ok(RegAddr {
                bar: 5,
                offset: 0x1_0000
            })
        );
        assert_eq!(
            "bar6:0".parse::<RegAddr>(),
            Err("BAR6 does not exist (0 to 5)".into())
        );
        for bad in ["bar0", "bar0:zz", "barx:0", ":0x80"] {
            assert_eq!(
                bad.parse::<RegAddr>(),
                Err(format!("`{bad}` is not a register address like bar0:0x80"))
            );
        }
        assert_eq!(
            RegAddr {
                bar: 2,
                offset: 0x80
            }
            .to_string(),
            "bar2:0x80"
        );
    }
}
