//! Fixture crate root: declares the modules, re-exports one item.
mod a;
mod b;
mod reexport;
mod tested;

pub use reexport::R;

/// Defined at the root, used by `reexport.rs`.
pub const K: u32 = 1;
