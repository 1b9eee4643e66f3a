//! SAN administration in ONTAP's words: `igroup create | add | remove |
//! destroy | show`, `lun map | unmap` and the maps of `lun show -m`, and
//! `iscsi security add | show | delete` (`docs/research/wafl.md` §12.5).
//!
//! The commands become admin requests; the layouts are pure functions of the
//! replies. `igroup create` takes ONTAP's protocol flags: `-i` iSCSI, `-n`
//! NBD (clients by TLS certificate name; wafer's own), and refuses `-f`
//! (FCP), which wafer does not serve. `iscsi security show` prints user
//! names, never secrets: the server does not send them.

use std::fmt::Write;

use clap::Subcommand;
use wafer_server::admin::{
    AdminError, AdminErrorKind, AdminReply, AdminRequest, IgroupStatus, LunMapStatus, Method,
    Protocol, SecurityEntry, SecurityStatus,
};

use super::{Answer, Asked, Output, done, formatted};

/// `wafer igroup`.
#[derive(Debug, Subcommand)]
pub enum IgroupCommand {
    /// Creates an initiator group: `igroup create -i|-n -t OSTYPE NAME
    /// [INITIATOR...]`; -i for iSCSI initiators (by IQN), -n for NBD
    /// clients (by TLS certificate name).
    #[command(
        override_usage = "wafer igroup create { -i | -n } -t <ostype> <initiator_group> [<node> ...]"
    )]
    Create {
        /// iSCSI initiators.
        #[arg(short = 'i', conflicts_with_all = ["nbd", "fcp"])]
        iscsi: bool,
        /// NBD clients over TLS, by certificate name.
        #[arg(short = 'n', conflicts_with = "fcp")]
        nbd: bool,
        /// FCP initiators (refused: wafer serves no Fibre Channel).
        #[arg(short = 'f')]
        fcp: bool,
        /// The hosts' operating system type (linux, windows, vmware, ...).
        #[arg(short = 't', value_name = "OSTYPE")]
        ostype: String,
        /// The group's name.
        name: String,
        /// Its first initiators.
        initiators: Vec<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Adds an initiator to a group.
    Add {
        /// The group.
        name: String,
        /// The initiator.
        initiator: String,
        #[command(flatten)]
        output: Output,
    },
    /// Removes an initiator from a group; refused while LUNs are mapped to
    /// it, unless -f.
    Remove {
        /// Even though LUNs are mapped to the group.
        #[arg(short = 'f')]
        force: bool,
        /// The group.
        name: String,
        /// The initiator.
        initiator: String,
        #[command(flatten)]
        output: Output,
    },
    /// Destroys a group; refused while LUNs are mapped to it, unless -f
    /// (which unmaps them).
    Destroy {
        /// Unmap its LUNs first.
        #[arg(short = 'f')]
        force: bool,
        /// The group.
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Every group (or NAME) with its initiators and whether each is
    /// logged in.
    Show {
        /// Only this group.
        name: Option<String>,
        #[command(flatten)]
        output: Output,
    },
}

impl IgroupCommand {
    /// Its output options.
    pub fn output(&self) -> &Output {
        match self {
            IgroupCommand::Create { output, .. }
            | IgroupCommand::Add { output, .. }
            | IgroupCommand::Remove { output, .. }
            | IgroupCommand::Destroy { output, .. }
            | IgroupCommand::Show { output, .. } => output,
        }
    }
}

/// `wafer iscsi`.
#[derive(Debug, Subcommand)]
pub enum IscsiCommand {
    /// Authentication of initiators.
    #[command(subcommand)]
    Security(SecurityCommand),
}

/// `wafer iscsi security`.
#[derive(Debug, Subcommand)]
pub enum SecurityCommand {
    /// Sets how an initiator (or, with `-i default`, every initiator
    /// without an entry) authenticates: `-s CHAP -p SECRET -n NAME [-o
    /// OUTSECRET -m OUTNAME]` (mutual with -o and -m), `-s none`, `-s
    /// deny`.
    #[command(
        override_usage = "wafer iscsi security add -i <initiator> -s CHAP -p <inpassword> -n <inname> [-o <outpassword> -m <outname>]\n       wafer iscsi security add -i <initiator> -s { none | deny }"
    )]
    Add {
        /// The initiator's name, or `default`.
        #[arg(short = 'i')]
        initiator: String,
        /// CHAP, none or deny.
        #[arg(short = 's', value_name = "METHOD", ignore_case = true, value_parser = ["CHAP", "none", "deny"])]
        method: String,
        /// The initiator's CHAP secret.
        #[arg(short = 'p', value_name = "INPASSWORD")]
        inbound_secret: Option<String>,
        /// The initiator's CHAP user name.
        #[arg(short = 'n', value_name = "INNAME")]
        inbound_user: Option<String>,
        /// The target's secret, for mutual CHAP.
        #[arg(short = 'o', value_name = "OUTPASSWORD")]
        outbound_secret: Option<String>,
        /// The target's user name, for mutual CHAP.
        #[arg(short = 'm', value_name = "OUTNAME")]
        outbound_user: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Every entry: method and user names (never secrets).
    Show {
        #[command(flatten)]
        output: Output,
    },
    /// Deletes an initiator's entry (it then takes the default).
    Delete {
        /// The initiator's name, or `default`.
        #[arg(short = 'i')]
        initiator: String,
        #[command(flatten)]
        output: Output,
    },
}

impl IscsiCommand {
    /// Its output options.
    pub fn output(&self) -> &Output {
        match self {
            IscsiCommand::Security(
                SecurityCommand::Add { output, .. }
                | SecurityCommand::Show { output }
                | SecurityCommand::Delete { output, .. },
            ) => output,
        }
    }
}

/// Runs an `igroup` command.
pub fn igroup(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    command: IgroupCommand,
) -> anyhow::Result<Answer> {
    Ok(match command {
        IgroupCommand::Create { fcp: true, .. } => Err(invalid(
            "igroup create: FCP is not supported: wafer serves iSCSI (-i) and NBD (-n)",
        )),
        IgroupCommand::Create {
            iscsi: false,
            nbd: false,
            ..
        } => Err(invalid(
            "igroup create: give the protocol: -i (iSCSI) or -n (NBD)",
        )),
        IgroupCommand::Create {
            nbd,
            ostype,
            name,
            initiators,
            ..
        } => {
            let protocol = if nbd { Protocol::Nbd } else { Protocol::Iscsi };
            silent(ask(AdminRequest::IgroupCreate {
                name,
                protocol,
                ostype,
                initiators,
            })?)
        }
        IgroupCommand::Add {
            name, initiator, ..
        } => silent(ask(AdminRequest::IgroupAdd { name, initiator })?),
        IgroupCommand::Remove {
            force,
            name,
            initiator,
            ..
        } => silent(ask(AdminRequest::IgroupRemove {
            name,
            initiator,
            force,
        })?),
        IgroupCommand::Destroy { force, name, .. } => {
            silent(ask(AdminRequest::IgroupDestroy { name, force })?)
        }
        IgroupCommand::Show { name, .. } => formatted(
            named_igroup(ask(AdminRequest::IgroupShow)?, name.as_deref()),
            igroup_show,
        ),
    })
}

/// Runs an `iscsi` command.
pub fn iscsi(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    command: IscsiCommand,
) -> anyhow::Result<Answer> {
    let IscsiCommand::Security(command) = command;
    Ok(match command {
        SecurityCommand::Add {
            initiator,
            method,
            inbound_secret,
            inbound_user,
            outbound_secret,
            outbound_user,
            ..
        } => {
            let method = match method.to_lowercase().as_str() {
                "chap" => Method::Chap,
                "deny" => Method::Deny,
                _ => Method::None,
            };
            let entry = SecurityEntry {
                initiator,
                method,
                inbound_user,
                inbound_secret,
                outbound_user,
                outbound_secret,
            };
            silent(ask(AdminRequest::IscsiSecurityAdd { entry })?)
        }
        SecurityCommand::Show { .. } => {
            formatted(ask(AdminRequest::IscsiSecurityShow)?, security_show)
        }
        SecurityCommand::Delete { initiator, .. } => {
            silent(ask(AdminRequest::IscsiSecurityDelete { initiator })?)
        }
    })
}

/// `lun map PATH IGROUP [LUN_ID]`: ONTAP's console line, `LUN … was mapped
/// to initiator group …=ID`.
pub fn lun_map(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    path: String,
    igroup: String,
    lun_id: Option<u16>,
) -> anyhow::Result<Answer> {
    Ok(done(ask(AdminRequest::LunMap {
        path,
        igroup,
        lun_id,
    })?))
}

/// `lun unmap PATH IGROUP`.
pub fn lun_unmap(
    ask: &mut impl FnMut(AdminRequest) -> anyhow::Result<Asked>,
    path: String,
    igroup: String,
) -> anyhow::Result<Answer> {
    Ok(silent(ask(AdminRequest::LunUnmap { path, igroup })?))
}

fn silent(reply: Asked) -> Answer {
    formatted(reply, |_| String::new())
}

fn invalid(message: &str) -> AdminError {
    AdminError {
        kind: AdminErrorKind::Invalid,
        message: message.into(),
    }
}

/// `igroup show NAME`: that group only, or not found.
fn named_igroup(reply: Asked, name: Option<&str>) -> Asked {
    match (reply?, name) {
        (AdminReply::Igroups(groups), Some(name)) => {
            let kept: Vec<IgroupStatus> = groups.into_iter().filter(|g| g.name == name).collect();
            if kept.is_empty() {
                return Err(AdminError {
                    kind: AdminErrorKind::NotFound,
                    message: format!("igroup show: initiator group {name} does not exist"),
                });
            }
            Ok(AdminReply::Igroups(kept))
        }
        (reply, _) => Ok(reply),
    }
}

/// `igroup show`, ONTAP's layout.
pub fn igroup_show(reply: &AdminReply) -> String {
    let AdminReply::Igroups(groups) = reply else {
        return format!("unexpected reply from the server: {reply:?}\n");
    };
    let mut out = String::new();
    for group in groups {
        let _ = writeln!(
            out,
            "    {} ({}) (ostype: {}):",
            group.name,
            group.protocol.label(),
            group.ostype
        );
        for initiator in &group.initiators {
            let state = match initiator.logged_in {
                true => "logged in on: iSCSI",
                false => "not logged in",
            };
            let _ = writeln!(out, "        {} ({state})", initiator.name);
        }
    }
    out
}

/// The rows `lun show -m` adds for maps, in its columns.
pub fn map_rows(maps: &[LunMapStatus], path: Option<&str>) -> String {
    let mut out = String::new();
    for map in maps.iter().filter(|m| path.is_none_or(|p| m.path == p)) {
        let _ = writeln!(
            out,
            "{:<35} {:<18} {:>6}       {}",
            map.path,
            map.igroup,
            map.lun_id,
            map.protocol.label()
        );
    }
    out
}

/// `iscsi security show`, 7-Mode's layout; secrets are stars.
pub fn security_show(reply: &AdminReply) -> String {
    let AdminReply::IscsiSecurity(entries) = reply else {
        return format!("unexpected reply from the server: {reply:?}\n");
    };
    let default = entries.iter().find(|e| e.initiator == "default");
    let mut out = match default {
        Some(entry) => format!("Default sec is {}\n", describe(entry)),
        None => "Default sec is None\n".to_string(),
    };
    for entry in entries.iter().filter(|e| e.initiator != "default") {
        let _ = writeln!(out, "init: {} auth: {}", entry.initiator, describe(entry));
    }
    out
}

fn describe(entry: &SecurityStatus) -> String {
    match entry.method {
        Method::None => "None".into(),
        Method::Deny => "Deny".into(),
        Method::Chap => {
            let mut text = format!(
                "CHAP Inbound password: **** Inbound username: {}",
                entry.inbound_user.as_deref().unwrap_or("")
            );
            if let Some(user) = &entry.outbound_user {
                let _ = write!(text, " Outbound password: **** Outbound username: {user}");
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wafer_server::admin::InitiatorStatus;

    #[test]
    fn igroup_show_is_ontaps_sample() {
        let reply = AdminReply::Igroups(vec![IgroupStatus {
            name: "esxi5".into(),
            protocol: Protocol::Iscsi,
            ostype: "vmware".into(),
            initiators: vec![InitiatorStatus {
                name: "iqn.1998-01.com.vmware:esxi06-70d75e37".into(),
                logged_in: false,
            }],
        }]);
        assert_eq!(
            igroup_show(&reply),
            "    esxi5 (iSCSI) (ostype: vmware):\n        \
             iqn.1998-01.com.vmware:esxi06-70d75e37 (not logged in)\n"
        );
    }

    #[test]
    fn map_rows_line_up_with_lun_show_m() {
        let maps = [LunMapStatus {
            path: "/vol/karim_vol/my_lun".into(),
            igroup: "esx_hosts".into(),
            lun_id: 0,
            protocol: Protocol::Iscsi,
        }];
        assert_eq!(
            map_rows(&maps, None),
            "/vol/karim_vol/my_lun               esx_hosts               0       iSCSI\n"
        );
    }

    #[test]
    fn security_show_never_prints_a_secret() {
        let reply = AdminReply::IscsiSecurity(vec![SecurityStatus {
            initiator: "iqn.2026-01.org.example:a".into(),
            method: Method::Chap,
            inbound_user: Some("alice".into()),
            outbound_user: Some("filer".into()),
        }]);
        assert_eq!(
            security_show(&reply),
            "Default sec is None\ninit: iqn.2026-01.org.example:a auth: CHAP Inbound password: \
             **** Inbound username: alice Outbound password: **** Outbound username: filer\n"
        );
    }
}
