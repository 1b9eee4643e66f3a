//! Uses `b` and, through the root's re-export, `reexport` and `tested`.
use crate::b::B;

pub struct A(pub B, pub crate::R, pub crate::tested::T);
