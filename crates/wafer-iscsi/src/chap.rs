//! CHAP, the Challenge-Handshake Authentication Protocol (RFC 1994), as
//! iSCSI's security stage carries it (RFC 7143 12.1.3): one-way (the target
//! checks the initiator) or mutual (the initiator checks the target too).
//!
//! The target offers `CHAP_A=5` (MD5), a one-byte identifier `CHAP_I` and a
//! challenge `CHAP_C`; the initiator answers with its name `CHAP_N` and
//! `CHAP_R = MD5(CHAP_I || secret || CHAP_C)`. For mutual CHAP the
//! initiator sends its own `CHAP_I` and `CHAP_C` beside its answer, and the
//! target answers with its name and response over the outbound secret.
//!
//! Which initiator must do what is the driver's [`Security`]: a policy per
//! initiator name and a default for the rest. This module is pure: the
//! identifier and challenge bytes come from the driver ([`Challenge`]),
//! which draws them from a random source; nothing here reads one.

use std::collections::BTreeMap;

use md5::{Digest, Md5};

/// Bytes of the challenge the target sends: RFC 7143 asks for at least as
/// many as the response (16 for MD5), and at most 1024.
pub const CHALLENGE_BYTES: usize = 16;
/// The CHAP algorithm number of MD5 (RFC 1994), the only one offered.
pub const ALGORITHM_MD5: &str = "5";
/// The longest challenge an initiator may send for mutual CHAP (RFC 7143:
/// 1024 bytes).
const INITIATOR_CHALLENGE_BYTES_MAX: usize = 1024;

/// A name and secret, one direction of CHAP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The user name sent as `CHAP_N`.
    pub name: String,
    /// The shared secret.
    pub secret: Vec<u8>,
}

/// What an initiator must do to log in.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// No authentication (`AuthMethod=None`).
    #[default]
    None,
    /// CHAP with `inbound` (the initiator's name and secret); with
    /// `outbound`, the target proves itself too when the initiator asks.
    Chap {
        /// What the initiator must answer with.
        inbound: Credentials,
        /// What the target answers mutual CHAP with.
        outbound: Option<Credentials>,
    },
    /// Every login refused.
    Deny,
}

/// The policies of a target: one per initiator name, and a default.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Security {
    /// Policies by initiator name.
    pub initiators: BTreeMap<String, Policy>,
    /// The policy of every initiator not named.
    pub default: Policy,
}

impl Security {
    /// The policy `initiator` logs in under.
    pub fn policy_for(&self, initiator: &str) -> &Policy {
        self.initiators.get(initiator).unwrap_or(&self.default)
    }
}

/// The target's identifier and challenge for one login, drawn by the
/// driver from a random source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// `CHAP_I`.
    pub identifier: u8,
    /// `CHAP_C`.
    pub bytes: [u8; CHALLENGE_BYTES],
}

/// `MD5(identifier || secret || challenge)`: the CHAP response.
pub fn response(identifier: u8, secret: &[u8], challenge: &[u8]) -> [u8; 16] {
    let mut md5 = Md5::new();
    md5.update([identifier]);
    md5.update(secret);
    md5.update(challenge);
    md5.finalize().into()
}

/// Whether `given` is `expected`, compared in time that does not depend on
/// where they differ (so a wrong response teaches nothing about the right
/// one).
pub fn same_response(given: &[u8], expected: &[u8; 16]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// `bytes` as an iSCSI hex constant: `0x` and two lowercase digits each.
pub fn to_hex(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(2 + 2 * bytes.len());
    text.push_str("0x");
    for byte in bytes {
        text.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        text.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
    }
    text
}

/// An iSCSI hex constant (`0x` or `0X`, then an even number of hex digits,
/// at most 1024 bytes' worth) as bytes; `None` for anything else (base64
/// constants included: no initiator this target knows sends them).
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))?;
    if digits.is_empty()
        || digits.len() % 2 != 0
        || digits.len() > 2 * INITIATOR_CHALLENGE_BYTES_MAX
    {
        return None;
    }
    digits
        .as_bytes()
        .chunks(2)
        .map(|pair| {
            let high = char::from(pair[0]).to_digit(16)?;
            let low = char::from(pair[1]).to_digit(16)?;
            u8::try_from(high * 16 + low).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_response_is_md5_of_identifier_secret_and_challenge() {
        // RFC 1321's test vector: MD5("abc"), split as identifier 'a',
        // secret "b", challenge "c".
        let digest = response(b'a', b"b", b"c");
        assert_eq!(to_hex(&digest), "0x900150983cd24fb0d6963f7d28e17f72");
        // And MD5("") is not what an empty secret gives: the identifier is
        // always hashed.
        assert_ne!(
            to_hex(&response(0, b"", b"")),
            "0xd41d8cd98f00b204e9800998ecf8427e"
        );
    }

    #[test]
    fn responses_compare_whole() {
        let expected = response(1, b"secret", b"challenge");
        assert!(same_response(&expected, &expected));
        let mut wrong = expected;
        wrong[15] ^= 1;
        assert!(!same_response(&wrong, &expected));
        assert!(!same_response(&expected[..15], &expected));
    }

    #[test]
    fn hex_constants_round_trip_and_bad_ones_are_refused() {
        let bytes = [0x00, 0x7f, 0xff, 0x10];
        assert_eq!(from_hex(&to_hex(&bytes)), Some(bytes.to_vec()));
        assert_eq!(from_hex("0XABcd"), Some(vec![0xab, 0xcd]));
        for bad in ["", "0x", "abcd", "0xabc", "0xzz", "0b3q==", "0x+1"] {
            assert_eq!(from_hex(bad), None, "{bad:?}");
        }
        assert_eq!(from_hex(&format!("0x{}", "00".repeat(1025))), None);
    }

    #[test]
    fn initiators_without_a_policy_take_the_default() {
        let mut security = Security {
            default: Policy::Deny,
            ..Security::default()
        };
        security.initiators.insert("iqn.a".into(), Policy::None);
        assert_eq!(security.policy_for("iqn.a"), &Policy::None);
        assert_eq!(security.policy_for("iqn.b"), &Policy::Deny);
    }
}
