//! Typed reads of one TOML table, each error naming the field by its path
//! (`array[1].stripe_unit_kib`), and a refusal of any key nobody read.
//!
//! Sizes are written with their unit in the key, as the project names
//! quantities: `lun_gib = 500` or `lun_bytes = 536870912000`. A size field
//! is read by its stem (`lun`) and accepts exactly one of the suffixes in
//! [`SIZE_UNITS`]; binary (KiB, MiB, GiB, TiB) and SI (kB, MB, GB, TB)
//! units are both spelled out, so no size is ambiguous.

use std::collections::{BTreeMap, BTreeSet};

use toml::{Table, Value};
use wafer_core::units::Duration;

use super::ScenarioError;

/// The unit suffixes of a size field and their bytes.
pub const SIZE_UNITS: [(&str, u64); 9] = [
    ("bytes", 1),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
];

/// A table being read, and the keys read so far.
pub struct Fields<'a> {
    table: &'a Table,
    path: String,
    read: BTreeSet<String>,
    /// The key each size stem was given under.
    size_keys: BTreeMap<String, String>,
}

impl<'a> Fields<'a> {
    /// Reads `table`, whose fields are named `path.key` (or `key` at the
    /// top).
    pub fn new(table: &'a Table, path: &str) -> Fields<'a> {
        Fields {
            table,
            path: path.to_string(),
            read: BTreeSet::new(),
            size_keys: BTreeMap::new(),
        }
    }

    /// The full name of `key`.
    pub fn name(&self, key: &str) -> String {
        match self.path.is_empty() {
            true => key.to_string(),
            false => format!("{}.{key}", self.path),
        }
    }

    /// The key a size stem was given under (`lun` → `lun_gib`), or `key`
    /// itself if it is no size read so far.
    pub fn key_for(&self, key: &str) -> String {
        self.size_keys
            .get(key)
            .cloned()
            .unwrap_or_else(|| key.to_string())
    }

    /// An error about `key`.
    pub fn invalid(&self, key: &str, reason: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid {
            field: self.name(&self.key_for(key)),
            reason: reason.into(),
        }
    }

    fn missing(&self, key: &str) -> ScenarioError {
        ScenarioError::Missing {
            field: self.name(key),
        }
    }

    fn value(&mut self, key: &str) -> Option<&'a Value> {
        self.read.insert(key.to_string());
        self.table.get(key)
    }

    /// A string.
    pub fn string(&mut self, key: &str) -> Result<Option<&'a str>, ScenarioError> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(self.invalid(
                key,
                format!("expected a string, found {}", other.type_str()),
            )),
        }
    }

    /// A string that must be there.
    pub fn required_string(&mut self, key: &str) -> Result<&'a str, ScenarioError> {
        self.string(key)?.ok_or_else(|| self.missing(key))
    }

    /// A whole number of at least zero.
    pub fn integer(&mut self, key: &str) -> Result<Option<u64>, ScenarioError> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Integer(number)) => u64::try_from(*number)
                .map(Some)
                .map_err(|_| self.invalid(key, format!("{number} is negative"))),
            Some(other) => Err(self.invalid(
                key,
                format!("expected a whole number, found {}", other.type_str()),
            )),
        }
    }

    /// A whole number in `u32`.
    pub fn count(&mut self, key: &str) -> Result<Option<u32>, ScenarioError> {
        match self.integer(key)? {
            None => Ok(None),
            Some(number) => u32::try_from(number)
                .map(Some)
                .map_err(|_| self.invalid(key, format!("{number} is too large"))),
        }
    }

    /// A count that must be there.
    pub fn required_count(&mut self, key: &str) -> Result<u32, ScenarioError> {
        self.count(key)?.ok_or_else(|| self.missing(key))
    }

    /// A true or false.
    pub fn boolean(&mut self, key: &str) -> Result<Option<bool>, ScenarioError> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Boolean(flag)) => Ok(Some(*flag)),
            Some(other) => Err(self.invalid(
                key,
                format!("expected true or false, found {}", other.type_str()),
            )),
        }
    }

    /// Whole seconds (keys end in `_s`).
    pub fn seconds(&mut self, key: &str) -> Result<Option<Duration>, ScenarioError> {
        let Some(seconds) = self.integer(key)? else {
            return Ok(None);
        };
        seconds
            .checked_mul(1_000_000_000)
            .map(|ns| Some(Duration(ns)))
            .ok_or_else(|| self.invalid(key, format!("{seconds} s is too long")))
    }

    /// Whole microseconds (keys end in `_us`).
    pub fn microseconds(&mut self, key: &str) -> Result<Option<Duration>, ScenarioError> {
        let Some(microseconds) = self.integer(key)? else {
            return Ok(None);
        };
        microseconds
            .checked_mul(1_000)
            .map(|ns| Some(Duration(ns)))
            .ok_or_else(|| self.invalid(key, format!("{microseconds} µs is too long")))
    }

    /// A size given as `stem_<unit>`, in bytes.
    pub fn size(&mut self, stem: &str) -> Result<Option<u64>, ScenarioError> {
        let mut found: Option<(String, u64)> = None;
        for (suffix, unit) in SIZE_UNITS {
            let key = format!("{stem}_{suffix}");
            let Some(number) = self.integer(&key)? else {
                continue;
            };
            if let Some((earlier, _)) = &found {
                return Err(self.invalid(&key, format!("the size is already given as `{earlier}`")));
            }
            let bytes = number
                .checked_mul(unit)
                .ok_or_else(|| self.invalid(&key, format!("{number} {suffix} is too large")))?;
            found = Some((key, bytes));
        }
        let Some((key, bytes)) = found else {
            return Ok(None);
        };
        self.size_keys.insert(stem.to_string(), key);
        Ok(Some(bytes))
    }

    /// A size that must be there.
    pub fn required_size(&mut self, stem: &str) -> Result<u64, ScenarioError> {
        self.size(stem)?.ok_or_else(|| ScenarioError::Missing {
            field: self.name(&format!("{stem}_gib")),
        })
    }

    /// Whether the table has `key`, read or not.
    pub fn has(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    /// A sub-table.
    pub fn table(&mut self, key: &str) -> Result<Option<&'a Table>, ScenarioError> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Table(table)) => Ok(Some(table)),
            Some(other) => {
                Err(self.invalid(key, format!("expected a table, found {}", other.type_str())))
            }
        }
    }

    /// An array of values of any kind.
    pub fn list(&mut self, key: &str) -> Result<Option<&'a [Value]>, ScenarioError> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => Err(self.invalid(
                key,
                format!("expected an array, found {}", other.type_str()),
            )),
        }
    }

    /// An array of tables.
    pub fn tables(&mut self, key: &str) -> Result<Vec<&'a Table>, ScenarioError> {
        let Some(value) = self.value(key) else {
            return Ok(Vec::new());
        };
        let not_tables = || self.invalid(key, "expected an array of tables");
        let Value::Array(items) = value else {
            return Err(not_tables());
        };
        items
            .iter()
            .map(|item| item.as_table().ok_or_else(not_tables))
            .collect()
    }

    /// Refuses the keys no one read.
    pub fn finish(self) -> Result<(), ScenarioError> {
        match self.table.keys().find(|key| !self.read.contains(*key)) {
            Some(key) => Err(ScenarioError::Unknown {
                field: self.name(key),
            }),
            None => Ok(()),
        }
    }
}
