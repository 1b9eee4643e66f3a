//! The names of the files in a data directory that more than one layer
//! needs.
//!
//! The configuration's own module reads and writes the file, but the errors
//! the server reports name it too (a directory without it is not wafer's), and
//! errors sit below the configuration: so the name lives here, below both.

/// The configuration file's name in the data directory.
pub const CONFIG_FILE: &str = "wafer.toml";
