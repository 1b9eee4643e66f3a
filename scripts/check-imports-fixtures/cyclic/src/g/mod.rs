//! Passes on everything of its child: a facade, not a user of `inner`.
mod inner;

pub use inner::*;
