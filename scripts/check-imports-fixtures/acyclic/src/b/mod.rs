//! Uses its child `c` (a path through `self`).
mod c;

pub struct B(pub self::c::C);
