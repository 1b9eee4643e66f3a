//! Persistent reservations (SPC-4 5.13): how clustered hosts share a LUN.
//!
//! Each I_T nexus (an initiator port, named by its iSCSI name and the
//! session's ISID, at this target's one port) may *register* a reservation
//! key with a LUN. A registered nexus may then *reserve* the LUN in one of
//! six types, which decide who may read and who may write: Write Exclusive
//! and Exclusive Access keep writes (and, for the latter, reads) to the
//! holder; their Registrants Only and All Registrants variants extend that
//! to every registered nexus. A registrant that finds a failed peer holding
//! the LUN *preempts* its key; CLEAR ends everything. The PRgeneration
//! counts changes of registration, so a host can tell whether what it read
//! is still current.
//!
//! [`Reservations`] is one LUN's state, shared by every session that sees
//! the LUN (the driver holds it under a lock); this module carries out
//! PERSISTENT RESERVE IN and OUT on it and tells, for a nexus, what the
//! reservation leaves it ([`Access`]), which [`crate::scsi::plan`] enforces
//! with RESERVATION CONFLICT. The state is not persisted through a power
//! loss (REPORT CAPABILITIES says PTPL_C = 0, and APTPL is refused); it
//! survives logouts and connection losses, as SPC asks. REGISTER AND MOVE
//! and SPEC_I_PT are not supported, and PREEMPT AND ABORT preempts without
//! aborting the preempted nexuses' tasks in flight.

use crate::scsi::Answer;
use crate::sense::{Sense, Status};

/// The most registrations one LUN holds.
pub const REGISTRATIONS_MAX: usize = 64;
/// Bytes of a PERSISTENT RESERVE OUT parameter list (no SPEC_I_PT).
pub const PARAMETER_LIST_BYTES: u32 = 24;

/// An I_T nexus: the initiator port (iSCSI name and ISID).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nexus {
    /// The initiator's iSCSI name.
    pub initiator: String,
    /// The session's initiator session id.
    pub isid: [u8; 6],
}

/// What a LUN's reservation leaves one nexus.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    /// Reads and writes.
    #[default]
    Full,
    /// Reads only: writes conflict.
    ReadOnly,
    /// Neither: reads and writes conflict.
    None,
}

/// A persistent reservation type (SPC-4 table 212).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// Write Exclusive.
    WriteExclusive = 1,
    /// Exclusive Access.
    ExclusiveAccess = 3,
    /// Write Exclusive, Registrants Only.
    WriteExclusiveRegistrantsOnly = 5,
    /// Exclusive Access, Registrants Only.
    ExclusiveAccessRegistrantsOnly = 6,
    /// Write Exclusive, All Registrants.
    WriteExclusiveAllRegistrants = 7,
    /// Exclusive Access, All Registrants.
    ExclusiveAccessAllRegistrants = 8,
}

impl Type {
    fn from_code(code: u8) -> Option<Type> {
        Some(match code {
            1 => Type::WriteExclusive,
            3 => Type::ExclusiveAccess,
            5 => Type::WriteExclusiveRegistrantsOnly,
            6 => Type::ExclusiveAccessRegistrantsOnly,
            7 => Type::WriteExclusiveAllRegistrants,
            8 => Type::ExclusiveAccessAllRegistrants,
            _ => return None,
        })
    }

    /// Whether every registrant holds it.
    fn all_registrants(self) -> bool {
        matches!(
            self,
            Type::WriteExclusiveAllRegistrants | Type::ExclusiveAccessAllRegistrants
        )
    }

    /// Whether registrants that do not hold it have the holder's access.
    fn registrants_share(self) -> bool {
        !matches!(self, Type::WriteExclusive | Type::ExclusiveAccess)
    }

    /// Whether those it excludes may still read.
    fn others_read(self) -> bool {
        matches!(
            self,
            Type::WriteExclusive
                | Type::WriteExclusiveRegistrantsOnly
                | Type::WriteExclusiveAllRegistrants
        )
    }
}

/// A reservation held.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    /// The holder (for an All Registrants type, whoever reserved).
    holder: Nexus,
    kind: Type,
}

/// One LUN's registrations and reservation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reservations {
    generation: u32,
    /// Registered nexuses and their keys, in registration order.
    registered: Vec<(Nexus, u64)>,
    held: Option<Held>,
}

/// PERSISTENT RESERVE OUT's parameter list.
/// ALL_TG_PT is taken and changes nothing: the target has one port, so
/// a registration for all its ports is one for this one.
struct Parameters {
    key: u64,
    action_key: u64,
}

impl Reservations {
    /// What the reservation leaves `nexus`.
    pub fn access(&self, nexus: &Nexus) -> Access {
        let Some(held) = &self.held else {
            return Access::Full;
        };
        let registered = self.key_of(nexus).is_some();
        if held.holder == *nexus || (registered && held.kind.registrants_share()) {
            return Access::Full;
        }
        match held.kind.others_read() {
            true => Access::ReadOnly,
            false => Access::None,
        }
    }

    fn key_of(&self, nexus: &Nexus) -> Option<u64> {
        self.registered
            .iter()
            .find(|(n, _)| n == nexus)
            .map(|(_, key)| *key)
    }

    fn is_holder(&self, nexus: &Nexus) -> bool {
        self.held.as_ref().is_some_and(|held| {
            held.holder == *nexus || (held.kind.all_registrants() && self.key_of(nexus).is_some())
        })
    }

    /// The key READ RESERVATION reports: 0 for an All Registrants type.
    fn holder_key(&self) -> u64 {
        match &self.held {
            Some(held) if !held.kind.all_registrants() => self.key_of(&held.holder).unwrap_or(0),
            _ => 0,
        }
    }

    /// PERSISTENT RESERVE IN: `cdb` from `nexus`.
    pub fn reserve_in(&self, cdb: &[u8; 16]) -> Answer {
        let allocation = usize::from(u16::from_be_bytes([cdb[7], cdb[8]]));
        let data = match cdb[1] & 0x1f {
            0 => self.read_keys(),
            1 => self.read_reservation(),
            2 => report_capabilities(),
            3 => self.read_full_status(),
            _ => return Answer::check(Sense::INVALID_FIELD_IN_CDB),
        };
        let mut data = data;
        data.truncate(allocation);
        Answer::good(data)
    }

    fn header(&self, additional: usize) -> Vec<u8> {
        let mut data = self.generation.to_be_bytes().to_vec();
        data.extend_from_slice(&(additional as u32).to_be_bytes());
        data
    }

    fn read_keys(&self) -> Vec<u8> {
        let mut data = self.header(8 * self.registered.len());
        for (_, key) in &self.registered {
            data.extend_from_slice(&key.to_be_bytes());
        }
        data
    }

    fn read_reservation(&self) -> Vec<u8> {
        let Some(held) = &self.held else {
            return self.header(0);
        };
        let mut data = self.header(16);
        data.extend_from_slice(&self.holder_key().to_be_bytes());
        data.extend_from_slice(&[0; 5]); // obsolete, reserved
        data.push(held.kind as u8); // scope 0: the logical unit
        data.extend_from_slice(&[0; 2]);
        data
    }

    fn read_full_status(&self) -> Vec<u8> {
        let mut descriptors = Vec::new();
        for (nexus, key) in &self.registered {
            let holder = self.is_holder(nexus);
            let transport = transport_id(nexus);
            descriptors.extend_from_slice(&key.to_be_bytes());
            descriptors.extend_from_slice(&[0; 4]);
            descriptors.push(u8::from(holder));
            let kind = self
                .held
                .as_ref()
                .filter(|_| holder)
                .map_or(0, |h| h.kind as u8);
            descriptors.push(kind);
            descriptors.extend_from_slice(&[0; 4]);
            descriptors.extend_from_slice(&1u16.to_be_bytes()); // relative target port 1
            descriptors.extend_from_slice(&(transport.len() as u32).to_be_bytes());
            descriptors.extend_from_slice(&transport);
        }
        let mut data = self.header(descriptors.len());
        data.extend_from_slice(&descriptors);
        data
    }

    /// PERSISTENT RESERVE OUT: `cdb` and its parameter list from `nexus`.
    pub fn reserve_out(&mut self, nexus: &Nexus, cdb: &[u8; 16], list: &[u8]) -> Answer {
        match self.reserve_out_checked(nexus, cdb, list) {
            Ok(()) => Answer::good(Vec::new()),
            Err(Refusal::Conflict) => Answer::status(Status::RESERVATION_CONFLICT),
            Err(Refusal::Check(sense)) => Answer::check(sense),
        }
    }

    fn reserve_out_checked(
        &mut self,
        nexus: &Nexus,
        cdb: &[u8; 16],
        list: &[u8],
    ) -> Result<(), Refusal> {
        let action = cdb[1] & 0x1f;
        let scope = cdb[2] >> 4;
        let kind = Type::from_code(cdb[2] & 0x0f);
        let parameters = parse_parameters(list)?;
        if scope != 0 && matches!(action, 1 | 2 | 4 | 5) {
            return Err(Refusal::Check(Sense::INVALID_FIELD_IN_CDB));
        }
        let typed = |kind: Option<Type>| kind.ok_or(Refusal::Check(Sense::INVALID_FIELD_IN_CDB));
        match action {
            0 => self.register(nexus, &parameters, false),
            6 => self.register(nexus, &parameters, true),
            1 => self.reserve(nexus, &parameters, typed(kind)?),
            2 => self.release(nexus, &parameters, typed(kind)?),
            3 => self.clear(nexus, &parameters),
            4 | 5 => self.preempt(nexus, &parameters, typed(kind)?),
            _ => Err(Refusal::Check(Sense::INVALID_FIELD_IN_CDB)),
        }
    }

    /// Checks that `nexus` is registered with the key it names.
    fn check_registrant(&self, nexus: &Nexus, parameters: &Parameters) -> Result<(), Refusal> {
        match self.key_of(nexus) {
            Some(key) if key == parameters.key => Ok(()),
            _ => Err(Refusal::Conflict),
        }
    }

    fn register(
        &mut self,
        nexus: &Nexus,
        parameters: &Parameters,
        ignore_key: bool,
    ) -> Result<(), Refusal> {
        let current = self.key_of(nexus);
        if !ignore_key && current.unwrap_or(0) != parameters.key {
            return Err(Refusal::Conflict);
        }
        match (current, parameters.action_key) {
            (None, 0) => return Ok(()),
            (None, key) => {
                if self.registered.len() >= REGISTRATIONS_MAX {
                    return Err(Refusal::Check(Sense::INSUFFICIENT_REGISTRATION_RESOURCES));
                }
                self.registered.push((nexus.clone(), key));
            }
            (Some(_), 0) => self.unregister(nexus),
            (Some(_), key) => {
                for (n, k) in &mut self.registered {
                    if n == nexus {
                        *k = key;
                    }
                }
            }
        }
        self.generation = self.generation.wrapping_add(1);
        Ok(())
    }

    /// Removes `nexus`'s registration; a holder's reservation goes with it,
    /// unless it is an All Registrants one that others still hold.
    fn unregister(&mut self, nexus: &Nexus) {
        self.registered.retain(|(n, _)| n != nexus);
        let Some(held) = &mut self.held else {
            return;
        };
        if held.kind.all_registrants() {
            match self.registered.first() {
                Some((next, _)) => held.holder = next.clone(),
                None => self.held = None,
            }
        } else if held.holder == *nexus {
            self.held = None;
        }
    }

    fn reserve(
        &mut self,
        nexus: &Nexus,
        parameters: &Parameters,
        kind: Type,
    ) -> Result<(), Refusal> {
        self.check_registrant(nexus, parameters)?;
        match &self.held {
            None => {
                self.take_reservation(nexus, kind);
                Ok(())
            }
            Some(held) if self.is_holder(nexus) && held.kind == kind => Ok(()),
            Some(_) => Err(Refusal::Conflict),
        }
    }

    fn release(
        &mut self,
        nexus: &Nexus,
        parameters: &Parameters,
        kind: Type,
    ) -> Result<(), Refusal> {
        self.check_registrant(nexus, parameters)?;
        match &self.held {
            Some(held) if self.is_holder(nexus) => {
                if held.kind != kind {
                    return Err(Refusal::Check(Sense::INVALID_RELEASE));
                }
                self.held = None;
                Ok(())
            }
            // Nothing held, or held by another: nothing to release.
            _ => Ok(()),
        }
    }

    fn clear(&mut self, nexus: &Nexus, parameters: &Parameters) -> Result<(), Refusal> {
        self.check_registrant(nexus, parameters)?;
        self.registered.clear();
        self.held = None;
        self.generation = self.generation.wrapping_add(1);
        Ok(())
    }

    fn preempt(
        &mut self,
        nexus: &Nexus,
        parameters: &Parameters,
        kind: Type,
    ) -> Result<(), Refusal> {
        self.check_registrant(nexus, parameters)?;
        let victim = parameters.action_key;
        let all_registrants = self.held.as_ref().is_some_and(|h| h.kind.all_registrants());
        let holds_victim = self.held.is_some() && !all_registrants && self.holder_key() == victim;
        if all_registrants && victim == 0 {
            // Every other registrant goes; the preempter holds the new one.
            self.registered.retain(|(n, _)| n == nexus);
            self.take_reservation(nexus, kind);
        } else if holds_victim {
            self.remove_key(nexus, victim);
            self.take_reservation(nexus, kind);
        } else {
            if victim == 0 {
                return Err(Refusal::Check(Sense::INVALID_FIELD_IN_PARAMETER_LIST));
            }
            if !self.registered.iter().any(|(_, k)| *k == victim) {
                return Err(Refusal::Conflict);
            }
            self.remove_key(nexus, victim);
        }
        self.generation = self.generation.wrapping_add(1);
        Ok(())
    }

    /// Removes every registration of `key` but the preempter's own.
    fn remove_key(&mut self, preempter: &Nexus, key: u64) {
        let preempted: Vec<Nexus> = self
            .registered
            .iter()
            .filter(|(n, k)| *k == key && n != preempter)
            .map(|(n, _)| n.clone())
            .collect();
        for nexus in &preempted {
            self.unregister(nexus);
        }
    }

    fn take_reservation(&mut self, nexus: &Nexus, kind: Type) {
        self.held = Some(Held {
            holder: nexus.clone(),
            kind,
        });
    }
}

/// Why a PERSISTENT RESERVE OUT is refused.
enum Refusal {
    Conflict,
    Check(Sense),
}

fn parse_parameters(list: &[u8]) -> Result<Parameters, Refusal> {
    if list.len() != PARAMETER_LIST_BYTES as usize {
        return Err(Refusal::Check(Sense::PARAMETER_LIST_LENGTH_ERROR));
    }
    let flags = list[20];
    // SPEC_I_PT and APTPL are not supported (REPORT CAPABILITIES says so).
    if flags & 0x08 != 0 || flags & 0x01 != 0 {
        return Err(Refusal::Check(Sense::INVALID_FIELD_IN_PARAMETER_LIST));
    }
    Ok(Parameters {
        key: u64::from_be_bytes(list[0..8].try_into().expect("eight bytes")),
        action_key: u64::from_be_bytes(list[8..16].try_into().expect("eight bytes")),
    })
}

/// REPORT CAPABILITIES: ATP_C (one port, so all ports is this one), TMV
/// with every type, and no persistence through power loss.
fn report_capabilities() -> Vec<u8> {
    let mut data = vec![0u8; 8];
    data[1] = 8;
    data[2] = 0x04; // ATP_C
    data[3] = 0x80; // TMV: the type mask is valid
    data[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02; // WR_EX_AR, EX_AC_RO, WR_EX_RO, EX_AC, WR_EX
    data[5] = 0x01; // EX_AC_AR
    data
}

/// An iSCSI TransportID with the ISID (SPC-4 7.6.4.6, format 01b): the
/// initiator port's name `NAME,i,0xISID`, NUL-terminated, padded to four.
fn transport_id(nexus: &Nexus) -> Vec<u8> {
    let isid: String = nexus.isid.iter().map(|b| format!("{b:02x}")).collect();
    let mut name = format!("{},i,0x{isid}", nexus.initiator).into_bytes();
    name.push(0);
    name.resize(name.len().div_ceil(4) * 4, 0);
    let mut id = vec![0x40 | 0x05, 0]; // format 01b, protocol iSCSI
    id.extend_from_slice(&(name.len() as u16).to_be_bytes());
    id.extend_from_slice(&name);
    id
}

/// The SPC-4 commands a reservation never blocks: those that describe the
/// LUN or the reservation itself.
pub fn always_allowed(opcode: u8) -> bool {
    matches!(
        opcode,
        0x00 // TEST UNIT READY
            | 0x03 // REQUEST SENSE
            | 0x12 // INQUIRY
            | 0x1a | 0x5a // MODE SENSE
            | 0x25 // READ CAPACITY 10
            | 0x5e | 0x5f // PERSISTENT RESERVE IN and OUT
            | 0xa0 // REPORT LUNS
            | 0xa3 // REPORT SUPPORTED OPERATION CODES
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nexus(n: u8) -> Nexus {
        Nexus {
            initiator: format!("iqn.2026-11.test:{n}"),
            isid: [0x80, 0, 0, 0, 0, n],
        }
    }

    fn out(action: u8, kind: u8, key: u64, action_key: u64) -> ([u8; 16], Vec<u8>) {
        let mut cdb = [0u8; 16];
        cdb[0] = 0x5f;
        cdb[1] = action;
        cdb[2] = kind;
        cdb[8] = 24;
        let mut list = vec![0u8; 24];
        list[..8].copy_from_slice(&key.to_be_bytes());
        list[8..16].copy_from_slice(&action_key.to_be_bytes());
        (cdb, list)
    }

    fn run(r: &mut Reservations, who: u8, action: u8, kind: u8, key: u64, sark: u64) -> Status {
        let (cdb, list) = out(action, kind, key, sark);
        r.reserve_out(&nexus(who), &cdb, &list).status
    }

    fn keys(r: &Reservations) -> Vec<u64> {
        let mut cdb = [0u8; 16];
        cdb[0] = 0x5e;
        cdb[8] = 0xff;
        let data = r.reserve_in(&cdb).data;
        data[8..]
            .chunks(8)
            .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
            .collect()
    }

    const GOOD: Status = Status::GOOD;
    const CONFLICT: Status = Status::RESERVATION_CONFLICT;

    #[test]
    fn register_counts_generations_and_checks_keys() {
        let mut r = Reservations::default();
        assert_eq!(
            run(&mut r, 1, 0, 0, 5, 0xa),
            CONFLICT,
            "unregistered with a key"
        );
        assert_eq!(run(&mut r, 1, 0, 0, 0, 0xa), GOOD);
        assert_eq!(run(&mut r, 1, 0, 0, 0xb, 0xc), CONFLICT, "the wrong key");
        assert_eq!(run(&mut r, 1, 0, 0, 0xa, 0xc), GOOD);
        assert_eq!(run(&mut r, 2, 6, 0, 0x99, 0xd), GOOD, "ignoring its key");
        assert_eq!(keys(&r), vec![0xc, 0xd]);
        assert_eq!(r.generation, 3);
        assert_eq!(run(&mut r, 1, 0, 0, 0xc, 0), GOOD, "unregisters");
        assert_eq!(keys(&r), vec![0xd]);
    }

    #[test]
    fn write_exclusive_leaves_others_reading() {
        let mut r = Reservations::default();
        run(&mut r, 1, 6, 0, 0, 0xa);
        run(&mut r, 2, 6, 0, 0, 0xb);
        assert_eq!(run(&mut r, 3, 1, 1, 0, 0), CONFLICT, "unregistered reserve");
        assert_eq!(run(&mut r, 1, 1, 1, 0xa, 0), GOOD);
        assert_eq!(run(&mut r, 2, 1, 1, 0xb, 0), CONFLICT, "held by another");
        assert_eq!(run(&mut r, 1, 1, 3, 0xa, 0), CONFLICT, "another type");
        assert_eq!(r.access(&nexus(1)), Access::Full);
        assert_eq!(r.access(&nexus(2)), Access::ReadOnly);
        assert_eq!(r.access(&nexus(3)), Access::ReadOnly);
        assert_eq!(
            run(&mut r, 1, 2, 3, 0xa, 0),
            Status::CHECK_CONDITION,
            "wrong type"
        );
        assert_eq!(run(&mut r, 2, 2, 1, 0xb, 0), GOOD, "a non-holder's release");
        assert_eq!(r.access(&nexus(2)), Access::ReadOnly, "changes nothing");
        assert_eq!(run(&mut r, 1, 2, 1, 0xa, 0), GOOD);
        assert_eq!(r.access(&nexus(2)), Access::Full);
    }

    #[test]
    fn registrants_only_types_share_with_registrants() {
        for (kind, others) in [(5, Access::ReadOnly), (6, Access::None), (8, Access::None)] {
            let mut r = Reservations::default();
            run(&mut r, 1, 6, 0, 0, 0xa);
            run(&mut r, 2, 6, 0, 0, 0xb);
            assert_eq!(run(&mut r, 1, 1, kind, 0xa, 0), GOOD);
            assert_eq!(r.access(&nexus(2)), Access::Full, "type {kind}");
            assert_eq!(r.access(&nexus(3)), others, "type {kind}");
            run(&mut r, 2, 0, 0, 0xb, 0);
            assert_eq!(r.access(&nexus(2)), others, "type {kind}, unregistered");
        }
    }

    #[test]
    fn preempt_takes_the_reservation_and_the_victims_keys() {
        let mut r = Reservations::default();
        run(&mut r, 1, 6, 0, 0, 0xa);
        run(&mut r, 2, 6, 0, 0, 0xb);
        run(&mut r, 1, 1, 3, 0xa, 0);
        assert_eq!(r.access(&nexus(2)), Access::None);
        assert_eq!(run(&mut r, 2, 4, 3, 0xb, 0x77), CONFLICT, "no such key");
        assert_eq!(run(&mut r, 2, 4, 1, 0xb, 0xa), GOOD);
        assert_eq!(keys(&r), vec![0xb]);
        assert_eq!(r.access(&nexus(2)), Access::Full);
        assert_eq!(
            r.access(&nexus(1)),
            Access::ReadOnly,
            "now type 1, held by 2"
        );
        assert_eq!(run(&mut r, 2, 4, 1, 0xb, 0), Status::CHECK_CONDITION);
    }

    #[test]
    fn clear_forgets_everything_and_the_holder_leaving_releases() {
        let mut r = Reservations::default();
        run(&mut r, 1, 6, 0, 0, 0xa);
        run(&mut r, 1, 1, 1, 0xa, 0);
        run(&mut r, 1, 0, 0, 0xa, 0);
        assert_eq!(r.access(&nexus(2)), Access::Full, "unregistering released");
        run(&mut r, 1, 6, 0, 0, 0xa);
        run(&mut r, 2, 6, 0, 0, 0xb);
        run(&mut r, 2, 1, 3, 0xb, 0);
        assert_eq!(run(&mut r, 3, 3, 0, 0, 0), CONFLICT, "unregistered clear");
        let generation = r.generation;
        assert_eq!(run(&mut r, 1, 3, 0, 0xa, 0), GOOD);
        assert!(keys(&r).is_empty());
        assert_eq!(r.access(&nexus(3)), Access::Full);
        assert_eq!(r.generation, generation + 1);
    }

    #[test]
    fn bad_parameter_lists_are_refused() {
        let mut r = Reservations::default();
        let (cdb, mut list) = out(6, 0, 0, 0xa);
        assert_eq!(
            r.reserve_out(&nexus(1), &cdb, &list[..20]).sense,
            Some(Sense::PARAMETER_LIST_LENGTH_ERROR)
        );
        list[20] = 0x01; // APTPL
        assert_eq!(
            r.reserve_out(&nexus(1), &cdb, &list).sense,
            Some(Sense::INVALID_FIELD_IN_PARAMETER_LIST)
        );
        assert!(keys(&r).is_empty());
    }

    #[test]
    fn registrations_are_bounded() {
        let mut r = Reservations::default();
        for n in 0..REGISTRATIONS_MAX {
            let who = Nexus {
                initiator: format!("iqn.test:{n}"),
                isid: [0; 6],
            };
            let (cdb, list) = out(6, 0, 0, 1);
            assert_eq!(r.reserve_out(&who, &cdb, &list).status, GOOD);
        }
        let (cdb, list) = out(6, 0, 0, 1);
        let refused = r.reserve_out(&nexus(200), &cdb, &list);
        assert_eq!(
            refused.sense,
            Some(Sense::INSUFFICIENT_REGISTRATION_RESOURCES)
        );
    }

    #[test]
    fn read_reservation_and_full_status_describe_the_holder() {
        let mut r = Reservations::default();
        run(&mut r, 1, 6, 0, 0, 0xa);
        run(&mut r, 1, 1, 1, 0xa, 0);
        let mut cdb = [0u8; 16];
        cdb[0] = 0x5e;
        cdb[1] = 1;
        cdb[8] = 0xff;
        let data = r.reserve_in(&cdb).data;
        assert_eq!(data.len(), 24);
        assert_eq!(&data[8..16], &0xau64.to_be_bytes());
        assert_eq!(data[21], 1);
        cdb[1] = 3;
        let data = r.reserve_in(&cdb).data;
        assert_eq!(data[8 + 12], 1, "R_HOLDER");
        let name = String::from_utf8_lossy(&data[8 + 24 + 4..]);
        assert!(
            name.starts_with("iqn.2026-11.test:1,i,0x800000000001"),
            "{name}"
        );
        cdb[8] = 4;
        assert_eq!(r.reserve_in(&cdb).data.len(), 4, "cut to the allocation");
    }
}
