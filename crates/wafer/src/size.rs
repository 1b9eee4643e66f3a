//! Capacities on the command line: a number with an optional binary suffix
//! (`k`, `m`, `g`, `t`: KiB, MiB, GiB, TiB), as ONTAP's commands accept them, and
//! their display in the largest binary unit that keeps them readable.
//!
//! Every command that takes a size parses it here, with [`Size`]'s `FromStr`.
//! A size has no sign: `+256m` is not 256 MiB. Only `lun resize` takes a
//! sign, as ONTAP does (`+SIZE` grows by SIZE, `-SIZE` shrinks by it), and
//! [`size_change`] reads the sign and hands the rest to the same parser.

use std::fmt;
use std::str::FromStr;

use wafer_server::admin::SizeChange;

/// A capacity in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

impl FromStr for Size {
    type Err = String;

    fn from_str(text: &str) -> Result<Size, String> {
        let text = text.trim();
        if text.starts_with(['+', '-']) {
            return Err(format!(
                "'{text}' is not a size: a size has no sign (only lun resize takes +SIZE to grow \
                 and -SIZE to shrink)"
            ));
        }
        let (digits, shift) = match text.char_indices().last() {
            Some((at, suffix)) if suffix.is_ascii_alphabetic() => {
                let shift = match suffix.to_ascii_lowercase() {
                    'k' => 10,
                    'm' => 20,
                    'g' => 30,
                    't' => 40,
                    other => {
                        return Err(format!("unknown size suffix '{other}' (use k, m, g or t)"));
                    }
                };
                (&text[..at], shift)
            }
            _ => (text, 0),
        };
        let number: u64 = digits
            .parse()
            .map_err(|_| format!("'{text}' is not a size (examples: 4096, 512m, 2g)"))?;
        number
            .checked_mul(1 << shift)
            .map(Size)
            .ok_or_else(|| format!("'{text}' is too large"))
    }
}

/// `lun resize`'s size: `SIZE` (the new size), `+SIZE` (grow by it) or
/// `-SIZE` (shrink by it).
pub fn size_change(text: &str) -> Result<SizeChange, String> {
    let text = text.trim();
    if let Some(by) = text.strip_prefix('+') {
        return by.parse::<Size>().map(|s| SizeChange::Grow(s.0));
    }
    if let Some(by) = text.strip_prefix('-') {
        return by.parse::<Size>().map(|s| SizeChange::Shrink(s.0));
    }
    text.parse::<Size>().map(|s| SizeChange::To(s.0))
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit < UNITS.len() - 1 {
            value /= 1024.0;
            unit += 1;
        }
        match unit {
            0 => write!(f, "{} B", self.0),
            _ => write!(f, "{value:.1} {}", UNITS[unit]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_suffixed_sizes() {
        assert_eq!("4096".parse(), Ok(Size(4096)));
        assert_eq!("4k".parse(), Ok(Size(4096)));
        assert_eq!("512M".parse(), Ok(Size(512 << 20)));
        assert_eq!("2g".parse(), Ok(Size(2 << 30)));
        assert_eq!("1t".parse(), Ok(Size(1 << 40)));
    }

    #[test]
    fn refuses_garbage_with_a_reason() {
        for bad in [
            "",
            "g",
            "12x",
            "-1",
            "+1",
            "+256m",
            "1.5g",
            "99999999999999t",
        ] {
            let error = bad.parse::<Size>().expect_err(bad);
            assert!(!error.is_empty(), "{bad}");
        }
    }

    #[test]
    fn a_size_change_is_absolute_or_relative_by_its_sign() {
        assert_eq!(size_change("256m"), Ok(SizeChange::To(256 << 20)));
        assert_eq!(size_change("+256m"), Ok(SizeChange::Grow(256 << 20)));
        assert_eq!(size_change("-1g"), Ok(SizeChange::Shrink(1 << 30)));
        for bad in ["+", "-", "++1m", "+-1m", "--1m", "+x"] {
            assert!(size_change(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn displays_in_binary_units() {
        assert_eq!(Size(512).to_string(), "512 B");
        assert_eq!(Size(3 << 29).to_string(), "1.5 GiB");
    }
}
