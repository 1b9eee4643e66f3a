//! Uses nothing of the crate.
pub struct C;
