//! LUN masking: initiator groups (igroups) and LUN maps, as ONTAP has them.
//!
//! An igroup names a set of initiators of one protocol: iSCSI initiators by
//! their IQN (or EUI) name (`igroup create -i`), or NBD clients by the name
//! of their TLS certificate (`igroup create -n`, for NBD over TLS; plain NBD
//! clients have no identity and are not masked). A LUN map gives a LUN, or a
//! snapshot's image of one (`/vol/V/L@SNAP`, always read-only), a LUN ID in
//! one igroup. An initiator sees exactly the LUNs mapped to the igroups it
//! belongs to, at the IDs of those maps ([`San::visible`]); every other LUN
//! does not exist for it.
//!
//! The rules are ONTAP's: an igroup name and each initiator appear once per
//! igroup; a LUN ID is taken once per igroup, and also once per initiator
//! across all the igroups it is in (a host must never see two LUNs at one
//! ID), which `lun map` and `igroup add` both check; a LUN maps to an
//! igroup once; without a LUN ID, `lun map` takes the lowest free one. An
//! igroup with maps is not destroyed, nor are initiators removed from it,
//! unless forced (`-f`: destroy unmaps first). IDs run from 0 to 4095, as
//! in Data ONTAP 7-Mode.
//!
//! Maps name LUNs by path. The engine checks a path is a LUN when it maps
//! it, and unmaps a LUN it destroys; a map whose LUN is gone (a snapshot
//! deleted) simply shows nothing. The state is `wafer.toml`'s `[san]`
//! table, validated with the rest at start.
//!
//! The same table keeps the LUNs taken offline (`lun offline`), by path:
//! a LUN offline keeps its maps, but no host may read or write it until
//! `lun online`, across restarts. Destroying a LUN forgets it here too.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The highest LUN ID.
pub const LUN_ID_MAX: u16 = 4095;
/// The igroup a new data directory creates, with `/vol/vol0/lun0` mapped.
pub const DEFAULT_IGROUP: &str = "default";
/// The operating system types ONTAP's `igroup create -t` takes.
pub const OSTYPES: [&str; 13] = [
    "solaris",
    "windows",
    "hpux",
    "aix",
    "linux",
    "netware",
    "vmware",
    "windows_gpt",
    "windows_2008",
    "xen",
    "hyper_v",
    "solaris_efi",
    "openvms",
];
/// The longest igroup name ONTAP takes.
const IGROUP_NAME_BYTES_MAX: usize = 96;
/// The longest iSCSI name (RFC 7143: 223 bytes).
const ISCSI_NAME_BYTES_MAX: usize = 223;
/// The longest NBD certificate name taken.
const CERTIFICATE_NAME_BYTES_MAX: usize = 255;

/// The protocol an igroup's initiators use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// iSCSI initiators, by IQN or EUI name.
    Iscsi,
    /// NBD clients over TLS, by certificate name.
    Nbd,
}

impl Protocol {
    /// ONTAP's name for it in `igroup show` and `lun show -m`.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Iscsi => "iSCSI",
            Protocol::Nbd => "NBD",
        }
    }
}

/// Who asks to see LUNs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Initiator<'a> {
    /// An iSCSI initiator by its InitiatorName.
    Iscsi(&'a str),
    /// An NBD client by its TLS certificate's name.
    NbdCertificate(&'a str),
}

impl Initiator<'_> {
    fn protocol(self) -> Protocol {
        match self {
            Initiator::Iscsi(_) => Protocol::Iscsi,
            Initiator::NbdCertificate(_) => Protocol::Nbd,
        }
    }

    fn text(&self) -> &str {
        match self {
            Initiator::Iscsi(name) | Initiator::NbdCertificate(name) => name,
        }
    }
}

/// An initiator group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Igroup {
    /// Its name.
    pub name: String,
    /// Its initiators' protocol.
    pub protocol: Protocol,
    /// The hosts' operating system type (`-t`).
    pub ostype: String,
    /// Its initiators' names.
    #[serde(default)]
    pub initiators: Vec<String>,
}

/// A LUN mapped to an igroup at a LUN ID.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LunMap {
    /// `/vol/VOLUME/LUN`, or `/vol/VOLUME/LUN@SNAPSHOT`.
    pub path: String,
    /// The igroup.
    pub igroup: String,
    /// The LUN ID its initiators see it at.
    pub lun_id: u16,
}

/// A LUN an initiator sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Visible {
    /// The LUN's path (a snapshot's with `@SNAPSHOT`).
    pub path: String,
    /// Its LUN ID for this initiator.
    pub lun_id: u16,
    /// Whether writes are refused (a snapshot's image).
    pub read_only: bool,
}

/// Every igroup and map of the node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct San {
    /// The igroups, in creation order.
    #[serde(default)]
    pub igroups: Vec<Igroup>,
    /// The maps, in creation order.
    #[serde(default)]
    pub maps: Vec<LunMap>,
    /// The LUNs taken offline, by path.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub offline: BTreeSet<String>,
}

/// Why an igroup or map command is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MaskingError {
    /// Bad syntax or a value out of range.
    #[error("{0}")]
    Invalid(String),
    /// The igroup, initiator or map named does not exist.
    #[error("{0}")]
    NotFound(String),
    /// It exists already, or the LUN ID is taken.
    #[error("{0}")]
    Exists(String),
}

fn invalid(message: String) -> MaskingError {
    MaskingError::Invalid(message)
}

impl San {
    /// A new data directory's: igroup `default` (iSCSI, linux) with no
    /// initiators, and `/vol/vol0/lun0` mapped to it at LUN ID 0; so no
    /// initiator sees anything until one is added (`igroup add default IQN`).
    pub fn new_directory() -> San {
        San::default_for(&[("/vol/vol0/lun0".to_string(), 0)])
    }

    /// A data directory's from before masking: igroup `default`, empty,
    /// with every LUN of `luns` (path, LUN ID) that has an ID up to
    /// [`LUN_ID_MAX`] mapped at that ID, so each keeps its number.
    pub fn default_for(luns: &[(String, u32)]) -> San {
        let maps = luns
            .iter()
            .filter_map(|(path, id)| {
                let lun_id = u16::try_from(*id).ok().filter(|&id| id <= LUN_ID_MAX)?;
                Some(LunMap {
                    path: path.clone(),
                    igroup: DEFAULT_IGROUP.into(),
                    lun_id,
                })
            })
            .collect();
        San {
            igroups: vec![Igroup {
                name: DEFAULT_IGROUP.into(),
                protocol: Protocol::Iscsi,
                ostype: "linux".into(),
                initiators: Vec::new(),
            }],
            maps,
            offline: BTreeSet::new(),
        }
    }

    /// The LUNs `initiator` sees, by LUN ID.
    pub fn visible(&self, initiator: Initiator<'_>) -> Vec<Visible> {
        let groups: BTreeSet<&str> = self
            .igroups
            .iter()
            .filter(|g| g.protocol == initiator.protocol())
            .filter(|g| g.initiators.iter().any(|i| i == initiator.text()))
            .map(|g| g.name.as_str())
            .collect();
        let mut seen: Vec<Visible> = Vec::new();
        for map in self
            .maps
            .iter()
            .filter(|m| groups.contains(m.igroup.as_str()))
        {
            if seen.iter().any(|v| v.lun_id == map.lun_id) {
                continue; // refused by the checks; never shown twice
            }
            seen.push(Visible {
                path: map.path.clone(),
                lun_id: map.lun_id,
                read_only: map.path.contains('@'),
            });
        }
        seen.sort_by_key(|v| v.lun_id);
        seen
    }

    /// Whether any map names `path`.
    pub fn is_mapped(&self, path: &str) -> bool {
        self.maps.iter().any(|m| m.path == path)
    }

    fn igroup(&self, name: &str) -> Result<&Igroup, MaskingError> {
        self.igroups
            .iter()
            .find(|g| g.name == name)
            .ok_or_else(|| MaskingError::NotFound(format!("initiator group {name} does not exist")))
    }

    fn igroup_mut(&mut self, name: &str) -> Result<&mut Igroup, MaskingError> {
        self.igroups
            .iter_mut()
            .find(|g| g.name == name)
            .ok_or_else(|| MaskingError::NotFound(format!("initiator group {name} does not exist")))
    }

    /// `igroup create`.
    pub fn create(
        &mut self,
        name: &str,
        protocol: Protocol,
        ostype: &str,
        initiators: &[String],
    ) -> Result<(), MaskingError> {
        check_igroup_name(name)?;
        if !OSTYPES.contains(&ostype) {
            return Err(invalid(format!(
                "igroup create: {ostype} is not a valid ostype (one of {})",
                OSTYPES.join(", ")
            )));
        }
        if self.igroup(name).is_ok() {
            return Err(MaskingError::Exists(format!(
                "igroup create: initiator group {name} already exists"
            )));
        }
        let mut group = Igroup {
            name: name.into(),
            protocol,
            ostype: ostype.into(),
            initiators: Vec::new(),
        };
        for initiator in initiators {
            check_initiator(protocol, initiator)?;
            if group.initiators.contains(initiator) {
                return Err(MaskingError::Exists(format!(
                    "igroup create: {initiator} is given twice"
                )));
            }
            group.initiators.push(initiator.clone());
        }
        self.igroups.push(group);
        Ok(())
    }

    /// `igroup add NAME INITIATOR`.
    pub fn add(&mut self, name: &str, initiator: &str) -> Result<(), MaskingError> {
        let group = self.igroup(name)?;
        check_initiator(group.protocol, initiator)?;
        if group.initiators.iter().any(|i| i == initiator) {
            return Err(MaskingError::Exists(format!(
                "igroup add: {initiator} is already in initiator group {name}"
            )));
        }
        let mut trial = self.clone();
        trial.igroup_mut(name)?.initiators.push(initiator.into());
        trial.check_ids_of(initiator).map_err(|id| {
            MaskingError::Exists(format!(
                "igroup add: {initiator} would see two LUNs at LUN ID {id} (its other \
                 initiator groups map one there)"
            ))
        })?;
        *self = trial;
        Ok(())
    }

    /// `igroup remove [-f] NAME INITIATOR`.
    pub fn remove(&mut self, name: &str, initiator: &str, force: bool) -> Result<(), MaskingError> {
        let mapped = self.maps.iter().any(|m| m.igroup == name);
        let group = self.igroup_mut(name)?;
        let Some(at) = group.initiators.iter().position(|i| i == initiator) else {
            return Err(MaskingError::NotFound(format!(
                "igroup remove: {initiator} is not in initiator group {name}"
            )));
        };
        if mapped && !force {
            return Err(MaskingError::Invalid(format!(
                "igroup remove: {initiator}: lun maps for this initiator group exist (use -f)"
            )));
        }
        group.initiators.remove(at);
        Ok(())
    }

    /// `igroup destroy [-f] NAME`: with `force`, its maps go first.
    pub fn destroy(&mut self, name: &str, force: bool) -> Result<(), MaskingError> {
        self.igroup(name)?;
        if self.maps.iter().any(|m| m.igroup == name) && !force {
            return Err(MaskingError::Invalid(format!(
                "igroup destroy: {name}: LUNs are mapped to this initiator group (unmap them, \
                 or use -f)"
            )));
        }
        self.maps.retain(|m| m.igroup != name);
        self.igroups.retain(|g| g.name != name);
        Ok(())
    }

    /// `lun map PATH IGROUP [LUN_ID]` of a LUN the caller has found: returns
    /// the LUN ID it got.
    pub fn map(
        &mut self,
        path: &str,
        igroup: &str,
        lun_id: Option<u16>,
    ) -> Result<u16, MaskingError> {
        let group = self.igroup(igroup)?.clone();
        if let Some(id) = lun_id.filter(|&id| id > LUN_ID_MAX) {
            return Err(invalid(format!(
                "lun map: LUN ID {id} is out of range (0 to {LUN_ID_MAX})"
            )));
        }
        if let Some(map) = self
            .maps
            .iter()
            .find(|m| m.path == path && m.igroup == igroup)
        {
            return Err(MaskingError::Exists(format!(
                "lun map: LUN {path} is already mapped to initiator group {igroup} at LUN ID {}",
                map.lun_id
            )));
        }
        let taken = self.ids_taken_for(&group);
        let id = match lun_id {
            Some(id) if taken.contains(&id) => {
                return Err(MaskingError::Exists(format!(
                    "lun map: LUN ID {id} is already in use by initiator group {igroup} or by \
                     another group of its initiators"
                )));
            }
            Some(id) => id,
            None => (0..=LUN_ID_MAX)
                .find(|id| !taken.contains(id))
                .ok_or_else(|| {
                    invalid(format!(
                        "lun map: initiator group {igroup} has no free LUN ID"
                    ))
                })?,
        };
        self.maps.push(LunMap {
            path: path.into(),
            igroup: igroup.into(),
            lun_id: id,
        });
        Ok(id)
    }

    /// `lun unmap PATH IGROUP`.
    pub fn unmap(&mut self, path: &str, igroup: &str) -> Result<u16, MaskingError> {
        self.igroup(igroup)?;
        let at = self
            .maps
            .iter()
            .position(|m| m.path == path && m.igroup == igroup)
            .ok_or_else(|| {
                MaskingError::NotFound(format!(
                    "lun unmap: LUN {path} is not mapped to initiator group {igroup}"
                ))
            })?;
        Ok(self.maps.remove(at).lun_id)
    }

    /// Forgets every map of `path` (its LUN destroyed) and of its
    /// snapshots' images, and that it was offline; returns whether there
    /// was anything to forget.
    pub fn forget(&mut self, path: &str) -> bool {
        let before = self.maps.len();
        let image = format!("{path}@");
        self.maps
            .retain(|m| m.path != path && !m.path.starts_with(&image));
        let was_offline = self.offline.remove(path);
        self.maps.len() != before || was_offline
    }

    /// Takes LUN `path` offline (`online` false) or brings it back;
    /// returns whether that changed anything.
    pub fn set_online(&mut self, path: &str, online: bool) -> bool {
        match online {
            true => self.offline.remove(path),
            false => self.offline.insert(path.to_string()),
        }
    }

    /// Whether the LUN that `path` names, or whose snapshot image it
    /// names (`/vol/V/L@SNAP`), is offline.
    pub fn is_offline(&self, path: &str) -> bool {
        let lun = path.split_once('@').map_or(path, |(lun, _)| lun);
        !self.offline.is_empty() && self.offline.contains(lun)
    }

    /// The LUN IDs `group`'s initiators already see, through it or their
    /// other groups.
    fn ids_taken_for(&self, group: &Igroup) -> BTreeSet<u16> {
        let related: BTreeSet<&str> = self
            .igroups
            .iter()
            .filter(|g| {
                g.name == group.name
                    || (g.protocol == group.protocol
                        && g.initiators.iter().any(|i| group.initiators.contains(i)))
            })
            .map(|g| g.name.as_str())
            .collect();
        self.maps
            .iter()
            .filter(|m| related.contains(m.igroup.as_str()))
            .map(|m| m.lun_id)
            .collect()
    }

    /// `Err(id)` if `initiator` would see two LUNs at `id`.
    fn check_ids_of(&self, initiator: &str) -> Result<(), u16> {
        let groups: BTreeSet<&str> = self
            .igroups
            .iter()
            .filter(|g| g.initiators.iter().any(|i| i == initiator))
            .map(|g| g.name.as_str())
            .collect();
        let mut ids = BTreeSet::new();
        for map in self
            .maps
            .iter()
            .filter(|m| groups.contains(m.igroup.as_str()))
        {
            if !ids.insert(map.lun_id) {
                return Err(map.lun_id);
            }
        }
        Ok(())
    }

    /// Checks a configuration read from disk: names valid and unique, maps
    /// to existing igroups, IDs in range and unique per initiator.
    pub fn validate(&self) -> Result<(), String> {
        let mut names = BTreeSet::new();
        for group in &self.igroups {
            check_igroup_name(&group.name).map_err(|e| e.to_string())?;
            if !names.insert(group.name.as_str()) {
                return Err(format!("igroup {} is configured twice", group.name));
            }
            let unique: BTreeSet<&String> = group.initiators.iter().collect();
            if unique.len() != group.initiators.len() {
                return Err(format!("igroup {} names an initiator twice", group.name));
            }
            for initiator in &group.initiators {
                check_initiator(group.protocol, initiator).map_err(|e| e.to_string())?;
            }
        }
        for map in &self.maps {
            if !names.contains(map.igroup.as_str()) {
                return Err(format!(
                    "LUN {} is mapped to igroup {}, which does not exist",
                    map.path, map.igroup
                ));
            }
            if map.lun_id > LUN_ID_MAX {
                return Err(format!(
                    "LUN {} has LUN ID {} (at most {LUN_ID_MAX})",
                    map.path, map.lun_id
                ));
            }
        }
        let initiators: BTreeSet<&String> =
            self.igroups.iter().flat_map(|g| &g.initiators).collect();
        for initiator in initiators {
            self.check_ids_of(initiator)
                .map_err(|id| format!("initiator {initiator} sees two LUNs at LUN ID {id}"))?;
        }
        let mut pairs = BTreeSet::new();
        for map in &self.maps {
            if !pairs.insert((&map.path, &map.igroup)) {
                return Err(format!(
                    "LUN {} is mapped to igroup {} twice",
                    map.path, map.igroup
                ));
            }
        }
        Ok(())
    }
}

/// ONTAP's igroup names: letters, digits, `_`, `-`, `.` and `:`, not
/// starting with `-`, at most 96 bytes.
fn check_igroup_name(name: &str) -> Result<(), MaskingError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-.:".contains(c);
    if name.is_empty()
        || name.len() > IGROUP_NAME_BYTES_MAX
        || name.starts_with('-')
        || !name.chars().all(allowed)
    {
        return Err(invalid(format!(
            "{name:?} is not a valid initiator group name (1 to {IGROUP_NAME_BYTES_MAX} letters, \
             digits, '_', '-', '.' or ':', not starting with '-')"
        )));
    }
    Ok(())
}

/// An initiator name of `protocol`.
fn check_initiator(protocol: Protocol, name: &str) -> Result<(), MaskingError> {
    let ok = match protocol {
        Protocol::Iscsi => is_iscsi_name(name),
        Protocol::Nbd => {
            !name.is_empty()
                && name.len() <= CERTIFICATE_NAME_BYTES_MAX
                && name.chars().all(|c| c.is_ascii_graphic() || c == ' ')
        }
    };
    if ok {
        return Ok(());
    }
    Err(invalid(match protocol {
        Protocol::Iscsi => format!(
            "{name:?} is not a valid iSCSI initiator name: iqn.YYYY-MM.reversed.domain[:anything] \
             (lowercase) or eui. and 16 hex digits"
        ),
        Protocol::Nbd => format!(
            "{name:?} is not a valid certificate name: 1 to {CERTIFICATE_NAME_BYTES_MAX} \
             printable characters"
        ),
    }))
}

/// RFC 7143's iSCSI names: `iqn.YYYY-MM.naming-authority[:unique]`, in
/// lowercase, or `eui.` and 16 hex digits; at most 223 bytes.
pub fn is_iscsi_name(name: &str) -> bool {
    if name.len() > ISCSI_NAME_BYTES_MAX {
        return false;
    }
    if let Some(hex) = name.strip_prefix("eui.") {
        return hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    let Some(rest) = name.strip_prefix("iqn.") else {
        return false;
    };
    let bytes = rest.as_bytes();
    let date = bytes.len() > 8
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[5..7].iter().all(u8::is_ascii_digit)
        && bytes[7] == b'.';
    if !date {
        return false;
    }
    let (authority, unique) = rest[8..].split_once(':').unwrap_or((&rest[8..], ""));
    let legal = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.:".contains(c);
    !authority.is_empty()
        && authority.chars().all(|c| legal(c) && c != ':')
        && unique.chars().all(legal)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST_A: &str = "iqn.2026-01.org.example:a";
    const HOST_B: &str = "iqn.2026-01.org.example:b";

    fn san() -> San {
        let mut san = San::default();
        san.create("hosts", Protocol::Iscsi, "linux", &[HOST_A.into()])
            .expect("created");
        san
    }

    #[test]
    fn an_initiator_sees_only_what_its_groups_map_at_their_ids() {
        let mut san = san();
        assert_eq!(san.map("/vol/v/a", "hosts", None), Ok(0));
        assert_eq!(san.map("/vol/v/b", "hosts", Some(7)), Ok(7));
        assert_eq!(san.map("/vol/v/c", "hosts", None), Ok(1), "lowest free");
        assert_eq!(san.map("/vol/v/a@s", "hosts", None), Ok(2));
        let seen = san.visible(Initiator::Iscsi(HOST_A));
        let ids: Vec<(u16, &str, bool)> = seen
            .iter()
            .map(|v| (v.lun_id, v.path.as_str(), v.read_only))
            .collect();
        assert_eq!(
            ids,
            [
                (0, "/vol/v/a", false),
                (1, "/vol/v/c", false),
                (2, "/vol/v/a@s", true),
                (7, "/vol/v/b", false)
            ]
        );
        assert!(san.visible(Initiator::Iscsi(HOST_B)).is_empty());
        assert!(
            san.visible(Initiator::NbdCertificate(HOST_A)).is_empty(),
            "by protocol"
        );
        assert_eq!(san.unmap("/vol/v/b", "hosts"), Ok(7));
        assert_eq!(san.visible(Initiator::Iscsi(HOST_A)).len(), 3);
    }

    #[test]
    fn ids_are_unique_per_group_and_per_initiator() {
        let mut san = san();
        san.map("/vol/v/a", "hosts", Some(3)).expect("mapped");
        assert!(matches!(
            san.map("/vol/v/b", "hosts", Some(3)),
            Err(MaskingError::Exists(_))
        ));
        assert!(matches!(
            san.map("/vol/v/a", "hosts", Some(4)),
            Err(MaskingError::Exists(_))
        ));
        assert!(matches!(
            san.map("/vol/v/b", "hosts", Some(4096)),
            Err(MaskingError::Invalid(_))
        ));
        // Another group of the same initiator cannot use ID 3 either.
        san.create("more", Protocol::Iscsi, "vmware", &[HOST_A.into()])
            .expect("created");
        assert!(matches!(
            san.map("/vol/v/b", "more", Some(3)),
            Err(MaskingError::Exists(_))
        ));
        assert_eq!(san.map("/vol/v/b", "more", None), Ok(0));
        // A group whose map collides cannot take in the initiator.
        san.create("other", Protocol::Iscsi, "linux", &[])
            .expect("created");
        san.map("/vol/v/c", "other", Some(3))
            .expect("no initiator yet");
        assert!(matches!(
            san.add("other", HOST_A),
            Err(MaskingError::Exists(_))
        ));
        assert_eq!(san.add("other", HOST_B), Ok(()));
        assert_eq!(san.validate(), Ok(()));
    }

    #[test]
    fn bad_input_is_refused_and_changes_nothing() {
        let mut san = san();
        let before = san.clone();
        for (name, protocol, ostype, initiators) in [
            ("hosts", Protocol::Iscsi, "linux", vec![]),
            ("-x", Protocol::Iscsi, "linux", vec![]),
            ("x y", Protocol::Iscsi, "linux", vec![]),
            ("g", Protocol::Iscsi, "beos", vec![]),
            ("g", Protocol::Iscsi, "linux", vec!["iqn.bad".to_string()]),
            (
                "g",
                Protocol::Iscsi,
                "linux",
                vec![HOST_B.into(), HOST_B.into()],
            ),
            ("g", Protocol::Nbd, "linux", vec![String::new()]),
        ] {
            assert!(
                san.create(name, protocol, ostype, &initiators).is_err(),
                "{name} {ostype} {initiators:?}"
            );
        }
        assert!(matches!(
            san.add("nope", HOST_B),
            Err(MaskingError::NotFound(_))
        ));
        assert!(matches!(
            san.add("hosts", HOST_A),
            Err(MaskingError::Exists(_))
        ));
        assert!(matches!(
            san.add("hosts", "iqn.2026-01.Org.Example"),
            Err(MaskingError::Invalid(_))
        ));
        assert!(matches!(
            san.remove("hosts", HOST_B, false),
            Err(MaskingError::NotFound(_))
        ));
        assert!(matches!(
            san.map("/vol/v/a", "nope", None),
            Err(MaskingError::NotFound(_))
        ));
        assert!(matches!(
            san.unmap("/vol/v/a", "hosts"),
            Err(MaskingError::NotFound(_))
        ));
        assert_eq!(san, before);
    }

    #[test]
    fn mapped_groups_are_kept_unless_forced() {
        let mut san = san();
        san.map("/vol/v/a", "hosts", None).expect("mapped");
        assert!(san.remove("hosts", HOST_A, false).is_err());
        assert!(san.destroy("hosts", false).is_err());
        assert_eq!(san.remove("hosts", HOST_A, true), Ok(()));
        assert_eq!(san.destroy("hosts", true), Ok(()));
        assert_eq!(san, San::default());
    }

    #[test]
    fn iscsi_names_follow_rfc_7143() {
        for good in [
            HOST_A,
            "iqn.1998-01.com.vmware:esxi06-70d75e37",
            "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-ls",
            "eui.02004567A425678D",
        ] {
            assert!(is_iscsi_name(good), "{good}");
        }
        for bad in [
            "",
            "iqn.",
            "iqn.2026-01",
            "iqn.2026-1.org.x",
            "iqn.2026-01.Org.x",
            "iqn.2026-01.org x",
            "eui.123",
            "naa.1234",
        ] {
            assert!(!is_iscsi_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_directory_from_before_masking_keeps_its_numbers_in_group_default() {
        let san = San::default_for(&[
            ("/vol/v/a".into(), 0),
            ("/vol/v/b".into(), 5),
            ("/vol/v/c".into(), 5000),
        ]);
        assert_eq!(san.validate(), Ok(()));
        assert_eq!(san.maps.len(), 2);
        assert_eq!(san.igroups[0].name, DEFAULT_IGROUP);
        assert!(
            san.igroups[0].initiators.is_empty(),
            "nobody sees anything yet"
        );
        let mut san = san;
        assert!(san.forget("/vol/v/b"));
        assert!(!san.forget("/vol/v/b"));
    }
}
