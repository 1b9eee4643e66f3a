//! Uses the root's constant; the root only passes `R` on.
pub struct R([u8; crate::K as usize]);
