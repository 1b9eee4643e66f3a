//! iSCSI CHAP settings, per initiator and by default, in the data
//! directory's `iscsi_security.toml`: ONTAP's `iscsi security add | default
//! | show | delete`.
//!
//! The file holds secrets, so it is the owner's only (mode 0600, whatever
//! the umask), replaced atomically (a synced temporary file renamed over
//! it, then the directory synced), and nothing reads its secrets back out:
//! `iscsi security show` gives the user names. A missing file means no
//! initiator needs CHAP. An entry's method is `chap` (with an inbound user
//! name and secret, and optionally an outbound pair for mutual CHAP),
//! `none`, or `deny`; the entry for `default` applies to every initiator
//! without one of its own. What the iSCSI target logs initiators in with is
//! [`Entries::security`], published to the connections with every change.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use wafer_iscsi::{Credentials, Policy, Security};

/// The file's name in the data directory.
pub const SECURITY_FILE: &str = "iscsi_security.toml";
/// The initiator name that stands for every initiator without an entry.
pub const DEFAULT_INITIATOR: &str = "default";
/// The shortest secret taken (RFC 7143 asks for 12 bytes or more of
/// randomness; ONTAP refuses shorter passwords too).
const SECRET_BYTES_MIN: usize = 12;
/// The longest secret or user name taken.
const FIELD_BYTES_MAX: usize = 255;

/// An entry's authentication method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// CHAP, one-way or mutual.
    Chap,
    /// No authentication.
    None,
    /// Logins refused.
    Deny,
}

/// One initiator's (or the default's) settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The initiator's name, or `default`.
    pub initiator: String,
    /// How it authenticates.
    pub method: Method,
    /// CHAP: the user name the initiator sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbound_user: Option<String>,
    /// CHAP: its secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbound_secret: Option<String>,
    /// Mutual CHAP: the user name the target answers with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbound_user: Option<String>,
    /// Mutual CHAP: the target's secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbound_secret: Option<String>,
}

/// Every entry, as the file holds them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entries {
    /// In the order added.
    #[serde(default)]
    pub entries: Vec<Entry>,
}

/// Why a security change or the file is refused.
#[derive(Debug, thiserror::Error)]
pub enum ChapError {
    /// The entry is malformed.
    #[error("{0}")]
    Invalid(String),
    /// No entry for that initiator.
    #[error("{0}")]
    NotFound(String),
    /// The file could not be read, parsed or written.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

impl Entry {
    /// Checks the entry's fields fit its method.
    pub fn validate(&self) -> Result<(), ChapError> {
        let refuse = |m: String| Err(ChapError::Invalid(format!("iscsi security: {m}")));
        let name_ok =
            self.initiator == DEFAULT_INITIATOR || crate::masking::is_iscsi_name(&self.initiator);
        if !name_ok {
            return refuse(format!(
                "{:?} is neither an iSCSI initiator name nor 'default'",
                self.initiator
            ));
        }
        let inbound = (&self.inbound_user, &self.inbound_secret);
        let outbound = (&self.outbound_user, &self.outbound_secret);
        match self.method {
            Method::Chap => {
                let (Some(user), Some(secret)) = inbound else {
                    return refuse("CHAP needs an inbound user name (-n) and secret (-p)".into());
                };
                check_field("inbound user name", user, 1)?;
                check_field("inbound secret", secret, SECRET_BYTES_MIN)?;
                match outbound {
                    (None, None) => {}
                    (Some(user), Some(secret)) => {
                        check_field("outbound user name", user, 1)?;
                        check_field("outbound secret", secret, SECRET_BYTES_MIN)?;
                        if secret == self.inbound_secret.as_ref().expect("checked") {
                            return refuse(
                                "the outbound secret must differ from the inbound one".into(),
                            );
                        }
                    }
                    _ => return refuse("mutual CHAP needs both -o and -m".into()),
                }
            }
            Method::None | Method::Deny => {
                if inbound != (&None, &None) || outbound != (&None, &None) {
                    return refuse("user names and secrets go with CHAP only".into());
                }
            }
        }
        Ok(())
    }

    fn policy(&self) -> Policy {
        let pair = |user: &Option<String>, secret: &Option<String>| match (user, secret) {
            (Some(name), Some(secret)) => Some(Credentials {
                name: name.clone(),
                secret: secret.as_bytes().to_vec(),
            }),
            _ => None,
        };
        match self.method {
            Method::None => Policy::None,
            Method::Deny => Policy::Deny,
            Method::Chap => match pair(&self.inbound_user, &self.inbound_secret) {
                Some(inbound) => Policy::Chap {
                    inbound,
                    outbound: pair(&self.outbound_user, &self.outbound_secret),
                },
                None => Policy::Deny,
            },
        }
    }
}

fn check_field(what: &str, value: &str, min: usize) -> Result<(), ChapError> {
    let printable = value.chars().all(|c| c.is_ascii_graphic());
    if value.len() < min || value.len() > FIELD_BYTES_MAX || !printable {
        return Err(ChapError::Invalid(format!(
            "iscsi security: the {what} must be {min} to {FIELD_BYTES_MAX} printable characters \
             without spaces"
        )));
    }
    Ok(())
}

impl Entries {
    /// Reads `dir`'s file; none means no entries.
    pub fn load(dir: &Path) -> Result<Entries, ChapError> {
        let path = dir.join(SECURITY_FILE);
        let refuse = |reason: String| ChapError::File {
            path: path.display().to_string(),
            reason,
        };
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Entries::default()),
            Err(e) => return Err(refuse(format!("cannot read: {e}"))),
        };
        let entries: Entries =
            toml::from_str(&text).map_err(|e| refuse(format!("malformed: {e}")))?;
        for entry in &entries.entries {
            entry.validate().map_err(|e| refuse(e.to_string()))?;
        }
        Ok(entries)
    }

    /// Writes the file atomically, mode 0600.
    pub fn save(&self, dir: &Path) -> Result<(), ChapError> {
        let path = dir.join(SECURITY_FILE);
        let refuse = |e: io::Error| ChapError::File {
            path: path.display().to_string(),
            reason: format!("cannot write: {e}"),
        };
        let text = toml::to_string(self).map_err(|e| refuse(io::Error::other(e)))?;
        let temporary = dir.join(format!("{SECURITY_FILE}.new"));
        let written = write_owner_only(&temporary, text.as_bytes())
            .and_then(|()| fs::rename(&temporary, &path))
            .and_then(|()| fs::File::open(dir)?.sync_all());
        if let Err(error) = written {
            let _ = fs::remove_file(&temporary);
            return Err(refuse(error));
        }
        Ok(())
    }

    /// `iscsi security add` (or `default`): replaces the initiator's entry.
    pub fn add(&mut self, entry: Entry) -> Result<(), ChapError> {
        entry.validate()?;
        match self
            .entries
            .iter_mut()
            .find(|e| e.initiator == entry.initiator)
        {
            Some(old) => *old = entry,
            None => self.entries.push(entry),
        }
        Ok(())
    }

    /// `iscsi security delete -i INITIATOR`.
    pub fn delete(&mut self, initiator: &str) -> Result<(), ChapError> {
        let before = self.entries.len();
        self.entries.retain(|e| e.initiator != initiator);
        if self.entries.len() == before {
            return Err(ChapError::NotFound(format!(
                "iscsi security delete: no entry for {initiator}"
            )));
        }
        Ok(())
    }

    /// What the iSCSI target logs initiators in with.
    pub fn security(&self) -> Security {
        let mut security = Security::default();
        for entry in &self.entries {
            match entry.initiator.as_str() {
                DEFAULT_INITIATOR => security.default = entry.policy(),
                name => {
                    security.initiators.insert(name.to_string(), entry.policy());
                }
            }
        }
        security
    }
}

fn write_owner_only(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chap(initiator: &str, outbound: bool) -> Entry {
        Entry {
            initiator: initiator.into(),
            method: Method::Chap,
            inbound_user: Some("alice".into()),
            inbound_secret: Some("alice-secret-1".into()),
            outbound_user: outbound.then(|| "target".into()),
            outbound_secret: outbound.then(|| "target-secret-1".into()),
        }
    }

    #[test]
    fn entries_are_saved_owner_only_and_read_back() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let mut entries = Entries::default();
        entries
            .add(chap("iqn.2026-01.org.example:a", true))
            .expect("valid");
        entries.save(dir.path()).expect("saved");
        let mode = fs::metadata(dir.path().join(SECURITY_FILE))
            .expect("written")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Entries::load(dir.path()).expect("read"), entries);
        let security = entries.security();
        assert!(matches!(
            security.policy_for("iqn.2026-01.org.example:a"),
            Policy::Chap {
                outbound: Some(_),
                ..
            }
        ));
        assert_eq!(
            security.policy_for("iqn.2026-01.org.example:b"),
            &Policy::None
        );
    }

    #[test]
    fn malformed_entries_are_refused() {
        let mut entries = Entries::default();
        let mut short = chap("default", false);
        short.inbound_secret = Some("short".into());
        let mut half = chap("default", true);
        half.outbound_user = None;
        let mut same = chap("default", true);
        same.outbound_secret = same.inbound_secret.clone();
        let mut none_with_secret = chap("default", false);
        none_with_secret.method = Method::None;
        for bad in [chap("iqn.bad", false), short, half, same, none_with_secret] {
            assert!(entries.add(bad.clone()).is_err(), "{bad:?}");
        }
        assert!(entries.entries.is_empty());
        assert!(matches!(
            entries.delete("default"),
            Err(ChapError::NotFound(_))
        ));
    }
}
