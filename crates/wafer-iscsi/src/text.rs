//! Text keys: the `key=value` pairs, each ended by a NUL, that login and
//! text requests carry.
//!
//! Keys are case-sensitive; a key may appear once per negotiation. The
//! parser bounds nothing itself: its input is one data segment (or the
//! segments of a continued request, which the connection bounds).

/// One `key=value` pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// Why a text segment is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// A pair without `=`.
    #[error("text pair {0:?} has no '='")]
    NoEquals(String),
    /// Bytes that are not UTF-8.
    #[error("text is not UTF-8")]
    NotUtf8,
    /// A key given twice.
    #[error("key {0} given twice")]
    Repeated(String),
}

/// Parses a data segment of NUL-ended pairs (a missing final NUL is
/// forgiven; empty entries, such as padding, are skipped).
pub fn parse(segment: &[u8]) -> Result<Vec<Pair>, TextError> {
    let mut pairs: Vec<Pair> = Vec::new();
    for entry in segment.split(|&byte| byte == 0) {
        if entry.is_empty() {
            continue;
        }
        let entry = std::str::from_utf8(entry).map_err(|_| TextError::NotUtf8)?;
        let (key, value) = entry
            .split_once('=')
            .ok_or_else(|| TextError::NoEquals(entry.to_string()))?;
        if pairs.iter().any(|p| p.key == key) {
            return Err(TextError::Repeated(key.to_string()));
        }
        pairs.push(Pair {
            key: key.to_string(),
            value: value.to_string(),
        });
    }
    Ok(pairs)
}

/// Appends `key=value` and its NUL.
pub fn push(out: &mut Vec<u8>, key: &str, value: &str) {
    out.extend_from_slice(key.as_bytes());
    out.push(b'=');
    out.extend_from_slice(value.as_bytes());
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip_and_bad_ones_are_named() {
        let mut segment = Vec::new();
        push(&mut segment, "InitiatorName", "iqn.x");
        push(&mut segment, "SessionType", "Normal");
        segment.extend_from_slice(&[0, 0]);
        let pairs = parse(&segment).expect("valid");
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[1].value, "Normal");
        assert_eq!(parse(b"a=1\0a=2\0"), Err(TextError::Repeated("a".into())));
        assert_eq!(
            parse(b"novalue\0"),
            Err(TextError::NoEquals("novalue".into()))
        );
        assert_eq!(parse(b"k=\xff\0"), Err(TextError::NotUtf8));
    }
}
