//! Login: the security and operational negotiation stages.
//!
//! A connection starts in login. The initiator sends login requests, each
//! naming its current stage (security 0, operational 1) and, with the
//! transit bit, the next (operational 1, full feature 3); each carries text
//! keys the target answers in its login response. In security the
//! initiator's [`Policy`] (from the driver's [`Security`], by its
//! `InitiatorName`) decides: `None` takes `AuthMethod=None`; CHAP takes
//! `AuthMethod=CHAP` and then the exchange of [`crate::chap`], and refuses an
//! initiator that offers only `None`, or leaves security without finishing
//! it (its transit is not granted while the exchange is under way); `Deny`
//! refuses every login. Every refusal is an authentication failure (status
//! 0x0201). Operational keys are settled by the
//! RFC 7143 rules, key by key: the lesser or greater of two numbers, the
//! OR or AND of two booleans, the first of the initiator's list the target
//! supports; a key the target does not know is answered `NotUnderstood`.
//! Keys the initiator does not send keep their defaults.
//!
//! [`Login`] holds what has been agreed; the connection drives it one
//! request at a time and reads the outcome from [`Step`].

use std::sync::Arc;

use crate::chap::{self, Challenge, Policy, Security};
use crate::text::{self, Pair};

/// Bytes the target accepts in one data segment, declared as its
/// `MaxRecvDataSegmentLength`.
pub const TARGET_RECV_DATA_SEGMENT_BYTES: u32 = 256 * 1024;
/// The largest burst the target agrees to (`MaxBurstLength`, and so the most
/// one R2T asks for).
pub const TARGET_BURST_BYTES_MAX: u32 = 1024 * 1024;
/// The most text one login or text exchange may accumulate over continued
/// PDUs.
pub const TEXT_BYTES_MAX: usize = 64 * 1024;

/// Settled session and connection parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    /// CRC32C over headers.
    pub header_digest: bool,
    /// CRC32C over data segments.
    pub data_digest: bool,
    /// The most data the initiator accepts in one PDU: Data-In segments are
    /// cut to it.
    pub initiator_recv_data_segment: u32,
    /// The most data in one solicited burst (one R2T) or Data-In sequence.
    pub max_burst: u32,
    /// The most unsolicited data (immediate and unsolicited Data-Out).
    pub first_burst: u32,
    /// Whether unsolicited Data-Out is forbidden.
    pub initial_r2t: bool,
    /// Whether a command may carry its first data.
    pub immediate_data: bool,
    /// R2Ts outstanding per task.
    pub max_outstanding_r2t: u32,
    /// Data PDUs in increasing buffer offset order.
    pub data_pdu_in_order: bool,
    /// Data sequences in increasing offset order.
    pub data_sequence_in_order: bool,
    /// Error recovery level (0: the only one supported).
    pub error_recovery_level: u32,
    /// Connections per session.
    pub max_connections: u32,
    /// Seconds to wait before reconnecting after a logout or drop.
    pub default_time2wait: u32,
    /// Seconds the target keeps tasks of a dropped connection.
    pub default_time2retain: u32,
}

impl Default for Params {
    /// The RFC 7143 defaults, before anything is negotiated.
    fn default() -> Params {
        Params {
            header_digest: false,
            data_digest: false,
            initiator_recv_data_segment: 8192,
            max_burst: 262_144,
            first_burst: 65_536,
            initial_r2t: true,
            immediate_data: true,
            max_outstanding_r2t: 1,
            data_pdu_in_order: true,
            data_sequence_in_order: true,
            error_recovery_level: 0,
            max_connections: 1,
            default_time2wait: 2,
            default_time2retain: 20,
        }
    }
}

/// A normal session reaches one target; a discovery session lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionType {
    /// SCSI commands to a target's LUNs.
    Normal,
    /// SendTargets only.
    Discovery,
}

/// Login status classes and details (RFC 7143 11.13.5), as one word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoginStatus(pub u16);

impl LoginStatus {
    /// Success.
    pub const SUCCESS: LoginStatus = LoginStatus(0x0000);
    /// Initiator error, no more detail.
    pub const INITIATOR_ERROR: LoginStatus = LoginStatus(0x0200);
    /// Authentication failed.
    pub const AUTHENTICATION_FAILURE: LoginStatus = LoginStatus(0x0201);
    /// The target named does not exist here.
    pub const NOT_FOUND: LoginStatus = LoginStatus(0x0203);
    /// No common protocol version.
    pub const UNSUPPORTED_VERSION: LoginStatus = LoginStatus(0x0205);
    /// A required key is missing.
    pub const MISSING_PARAMETER: LoginStatus = LoginStatus(0x0207);
    /// Connections cannot be added to a session.
    pub const CANNOT_INCLUDE_IN_SESSION: LoginStatus = LoginStatus(0x0208);
    /// The session named by TSIH does not exist.
    pub const SESSION_DOES_NOT_EXIST: LoginStatus = LoginStatus(0x020a);
    /// The request was malformed.
    pub const INVALID_REQUEST: LoginStatus = LoginStatus(0x020b);
}

/// What the connection needs to know of the target to log an initiator in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetIdentity {
    /// The target's IQN.
    pub name: String,
    /// Its alias (`TargetAlias`).
    pub alias: String,
    /// Its one portal group's tag.
    pub portal_group_tag: u16,
    /// Where initiators reach it: `host:port`, for SendTargets.
    pub address: String,
}

/// Stages of login, as the protocol numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Authentication.
    Security = 0,
    /// Operational parameters.
    Operational = 1,
    /// Done: the full feature phase.
    FullFeature = 3,
}

impl Stage {
    fn from_bits(bits: u8) -> Option<Stage> {
        match bits {
            0 => Some(Stage::Security),
            1 => Some(Stage::Operational),
            3 => Some(Stage::FullFeature),
            _ => None,
        }
    }
}

/// The outcome of one login request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The keys to answer with.
    pub answer: Vec<u8>,
    /// The status to answer with; anything but success ends the connection.
    pub status: LoginStatus,
    /// The stage the request was in.
    pub current: Stage,
    /// The stage the target moves to, if it grants the transit asked for.
    pub next: Option<Stage>,
}

/// Where authentication stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Auth {
    /// Nothing negotiated yet.
    Start,
    /// `AuthMethod=CHAP` agreed; `CHAP_A` awaited.
    ChapAgreed,
    /// The challenge sent; the initiator's response awaited.
    Challenged,
    /// Authenticated (or no authentication asked).
    Done,
}

/// The CHAP keys an initiator sent in one request.
#[derive(Debug, Default)]
struct ChapKeys<'a> {
    name: Option<&'a str>,
    response: Option<&'a str>,
    identifier: Option<&'a str>,
    challenge: Option<&'a str>,
}

/// A login in progress.
#[derive(Clone, Debug)]
pub struct Login {
    identity: TargetIdentity,
    security: Arc<Security>,
    challenge: Challenge,
    auth: Auth,
    /// Settled so far.
    pub params: Params,
    /// The initiator's IQN, once given.
    pub initiator_name: Option<String>,
    /// The session type, once given (Normal if never).
    pub session_type: SessionType,
    /// Whether the target has declared its portal group tag and limits.
    declared: bool,
    /// Continued text (the C bit) awaiting its final PDU.
    pending: Vec<u8>,
    stage: Stage,
    /// The session this login would add a connection to (its TSIH), if
    /// it names one.
    pub joining: Option<u16>,
}

/// The fields of a login request the negotiation reads.
#[derive(Clone, Copy, Debug)]
pub struct LoginRequest<'a> {
    /// Transit asked for.
    pub transit: bool,
    /// More text follows in the next request.
    pub continued: bool,
    /// Current stage bits.
    pub current: u8,
    /// Next stage bits.
    pub next: u8,
    /// Lowest and highest version the initiator speaks.
    pub versions: (u8, u8),
    /// The session handle the initiator names (0: a new session).
    pub tsih: u16,
    /// The text keys.
    pub data: &'a [u8],
}

impl Login {
    /// A login to `identity`, with no authentication asked of anyone.
    pub fn new(identity: TargetIdentity) -> Login {
        let challenge = Challenge {
            identifier: 0,
            bytes: [0; chap::CHALLENGE_BYTES],
        };
        Login::with_security(identity, Arc::new(Security::default()), challenge)
    }

    /// A login to `identity` under `security`, with `challenge` (random,
    /// from the driver) for initiators that must use CHAP.
    pub fn with_security(
        identity: TargetIdentity,
        security: Arc<Security>,
        challenge: Challenge,
    ) -> Login {
        Login {
            identity,
            security,
            challenge,
            auth: Auth::Start,
            params: Params::default(),
            initiator_name: None,
            session_type: SessionType::Normal,
            declared: false,
            pending: Vec::new(),
            stage: Stage::Security,
            joining: None,
        }
    }

    /// Handles one request; the response follows from the [`Step`].
    pub fn step(&mut self, request: &LoginRequest<'_>) -> Step {
        let Some(current) = Stage::from_bits(request.current) else {
            return self.refuse(Stage::Security, LoginStatus::INVALID_REQUEST);
        };
        if current == Stage::FullFeature || current < self.stage {
            return self.refuse(current, LoginStatus::INVALID_REQUEST);
        }
        self.stage = current;
        if request.versions.0 > 0 {
            return self.refuse(current, LoginStatus::UNSUPPORTED_VERSION);
        }
        if request.tsih != 0 {
            // A connection for an existing session: the driver says whether
            // it exists (`crate::Connection`), once the login is otherwise
            // ready. The TSIH may not change within one login.
            if self.joining.is_some_and(|tsih| tsih != request.tsih) {
                return self.refuse(current, LoginStatus::INVALID_REQUEST);
            }
            self.joining = Some(request.tsih);
        }
        if self.pending.len() + request.data.len() > TEXT_BYTES_MAX {
            return self.refuse(current, LoginStatus::INVALID_REQUEST);
        }
        self.pending.extend_from_slice(request.data);
        if request.continued {
            // Answer nothing until the text is whole.
            return Step {
                answer: Vec::new(),
                status: LoginStatus::SUCCESS,
                current,
                next: None,
            };
        }
        let segment = std::mem::take(&mut self.pending);
        let pairs = match text::parse(&segment) {
            Ok(pairs) => pairs,
            Err(_) => return self.refuse(current, LoginStatus::INITIATOR_ERROR),
        };
        let mut answer = Vec::new();
        if let Err(status) = self.negotiate(&pairs, &mut answer) {
            return self.refuse(current, status);
        }
        let mut next = match request.transit {
            true => Stage::from_bits(request.next).filter(|&next| next > current),
            false => None,
        };
        if request.transit && next.is_none() {
            return self.refuse(current, LoginStatus::INVALID_REQUEST);
        }
        if current == Stage::Operational || next.is_some() {
            match self.leave_security() {
                Ok(true) => {}
                // The exchange is under way: answer, and stay.
                Ok(false) => next = None,
                Err(status) => return self.refuse(current, status),
            }
        }
        if next == Some(Stage::FullFeature) {
            if let Err(status) = self.ready_for_full_feature(&mut answer) {
                return self.refuse(current, status);
            }
        }
        if let Some(next) = next {
            self.stage = next;
        }
        Step {
            answer,
            status: LoginStatus::SUCCESS,
            current,
            next,
        }
    }

    fn refuse(&self, current: Stage, status: LoginStatus) -> Step {
        Step {
            answer: Vec::new(),
            status,
            current,
            next: None,
        }
    }

    /// Checks what a session needs before it starts, and declares the
    /// target's own limits if it has not yet.
    fn ready_for_full_feature(&mut self, answer: &mut Vec<u8>) -> Result<(), LoginStatus> {
        if self.initiator_name.is_none() {
            return Err(LoginStatus::MISSING_PARAMETER);
        }
        self.declare(answer);
        Ok(())
    }

    /// The target's declarations, once per login.
    fn declare(&mut self, answer: &mut Vec<u8>) {
        if self.declared {
            return;
        }
        self.declared = true;
        if self.session_type == SessionType::Normal {
            let tag = self.identity.portal_group_tag.to_string();
            text::push(answer, "TargetPortalGroupTag", &tag);
        }
        let limit = TARGET_RECV_DATA_SEGMENT_BYTES.to_string();
        text::push(answer, "MaxRecvDataSegmentLength", &limit);
    }

    /// Whether the initiator may leave security: `Ok(true)` once
    /// authenticated (or never asked to), `Ok(false)` while CHAP is under
    /// way, an authentication failure if its policy was never met.
    fn leave_security(&mut self) -> Result<bool, LoginStatus> {
        match self.auth {
            Auth::Done => Ok(true),
            Auth::ChapAgreed | Auth::Challenged => Ok(false),
            Auth::Start => match self.policy()? {
                Policy::None => {
                    self.auth = Auth::Done;
                    Ok(true)
                }
                Policy::Chap { .. } | Policy::Deny => Err(LoginStatus::AUTHENTICATION_FAILURE),
            },
        }
    }

    /// The policy of the initiator, which must have given its name.
    fn policy(&self) -> Result<Policy, LoginStatus> {
        let name = self
            .initiator_name
            .as_deref()
            .ok_or(LoginStatus::MISSING_PARAMETER)?;
        Ok(self.security.policy_for(name).clone())
    }

    fn negotiate(&mut self, pairs: &[Pair], answer: &mut Vec<u8>) -> Result<(), LoginStatus> {
        // The name first: the policy it selects decides the rest.
        let (names, others): (Vec<&Pair>, Vec<&Pair>) =
            pairs.iter().partition(|p| p.key == "InitiatorName");
        let mut keys = ChapKeys::default();
        for pair in names.into_iter().chain(others) {
            match pair.key.as_str() {
                "CHAP_N" => keys.name = Some(&pair.value),
                "CHAP_R" => keys.response = Some(&pair.value),
                "CHAP_I" => keys.identifier = Some(&pair.value),
                "CHAP_C" => keys.challenge = Some(&pair.value),
                "AuthMethod" => self.auth_method(&pair.value, answer)?,
                "CHAP_A" => self.chap_algorithm(&pair.value, answer)?,
                _ => self.negotiate_key(pair, answer)?,
            }
        }
        if keys.name.is_some() || keys.response.is_some() {
            self.check_chap_response(&keys, answer)?;
        } else if keys.identifier.is_some() || keys.challenge.is_some() {
            return Err(LoginStatus::AUTHENTICATION_FAILURE);
        }
        Ok(())
    }

    /// `AuthMethod`: what the initiator's policy takes of what it offers.
    fn auth_method(&mut self, offered: &str, answer: &mut Vec<u8>) -> Result<(), LoginStatus> {
        let offers = |method: &str| offered.split(',').any(|m| m == method);
        let chosen = match self.policy()? {
            Policy::None if offers("None") => {
                self.auth = Auth::Done;
                "None"
            }
            Policy::Chap { .. } if offers("CHAP") && self.auth == Auth::Start => {
                self.auth = Auth::ChapAgreed;
                "CHAP"
            }
            _ => return Err(LoginStatus::AUTHENTICATION_FAILURE),
        };
        text::push(answer, "AuthMethod", chosen);
        Ok(())
    }

    /// `CHAP_A`: MD5 must be among the algorithms offered; the challenge
    /// goes back with it.
    fn chap_algorithm(&mut self, offered: &str, answer: &mut Vec<u8>) -> Result<(), LoginStatus> {
        if self.auth != Auth::ChapAgreed || !offered.split(',').any(|a| a == chap::ALGORITHM_MD5) {
            return Err(LoginStatus::AUTHENTICATION_FAILURE);
        }
        self.auth = Auth::Challenged;
        text::push(answer, "CHAP_A", chap::ALGORITHM_MD5);
        let identifier = self.challenge.identifier.to_string();
        text::push(answer, "CHAP_I", &identifier);
        text::push(answer, "CHAP_C", &chap::to_hex(&self.challenge.bytes));
        Ok(())
    }

    /// `CHAP_N` and `CHAP_R` (and, for mutual CHAP, `CHAP_I` and `CHAP_C`):
    /// the initiator's name and response must be its policy's; a mutual
    /// challenge is answered with the outbound credentials, which must
    /// exist, and must not be the target's own challenge sent back.
    fn check_chap_response(
        &mut self,
        keys: &ChapKeys<'_>,
        answer: &mut Vec<u8>,
    ) -> Result<(), LoginStatus> {
        let failure = LoginStatus::AUTHENTICATION_FAILURE;
        let Policy::Chap { inbound, outbound } = self.policy()? else {
            return Err(failure);
        };
        if self.auth != Auth::Challenged || keys.name != Some(inbound.name.as_str()) {
            return Err(failure);
        }
        let expected = chap::response(
            self.challenge.identifier,
            &inbound.secret,
            &self.challenge.bytes,
        );
        let given = keys.response.and_then(chap::from_hex).ok_or(failure)?;
        if !chap::same_response(&given, &expected) {
            return Err(failure);
        }
        match (keys.identifier, keys.challenge) {
            (None, None) => {}
            (Some(identifier), Some(challenge)) => {
                let outbound = outbound.ok_or(failure)?;
                let identifier = identifier.parse::<u8>().map_err(|_| failure)?;
                let challenge = chap::from_hex(challenge).ok_or(failure)?;
                if challenge == self.challenge.bytes {
                    return Err(failure);
                }
                let proof = chap::response(identifier, &outbound.secret, &challenge);
                text::push(answer, "CHAP_N", &outbound.name);
                text::push(answer, "CHAP_R", &chap::to_hex(&proof));
            }
            _ => return Err(failure),
        }
        self.auth = Auth::Done;
        Ok(())
    }

    fn negotiate_key(&mut self, pair: &Pair, answer: &mut Vec<u8>) -> Result<(), LoginStatus> {
        let value = pair.value.as_str();
        let params = &mut self.params;
        match pair.key.as_str() {
            "InitiatorName" => {
                if value.is_empty() || value.len() > 223 {
                    return Err(LoginStatus::INITIATOR_ERROR);
                }
                self.initiator_name = Some(value.to_string());
            }
            "InitiatorAlias" => {}
            "SessionType" => {
                self.session_type = match value {
                    "Normal" => SessionType::Normal,
                    "Discovery" => SessionType::Discovery,
                    _ => return Err(LoginStatus::INITIATOR_ERROR),
                };
            }
            "TargetName" => {
                if value != self.identity.name {
                    return Err(LoginStatus::NOT_FOUND);
                }
                let alias = self.identity.alias.clone();
                text::push(answer, "TargetAlias", &alias);
                self.declare(answer);
            }

            "HeaderDigest" => {
                params.header_digest = choose_digest(value)?;
                text::push(answer, &pair.key, digest_name(params.header_digest));
            }
            "DataDigest" => {
                params.data_digest = choose_digest(value)?;
                text::push(answer, &pair.key, digest_name(params.data_digest));
            }
            "MaxRecvDataSegmentLength" => {
                params.initiator_recv_data_segment = number(value, 512, (1 << 24) - 1)?;
                self.declare(answer);
            }
            "MaxBurstLength" => {
                params.max_burst = number(value, 512, (1 << 24) - 1)?.min(TARGET_BURST_BYTES_MAX);
                params.first_burst = params.first_burst.min(params.max_burst);
                text::push(answer, &pair.key, &params.max_burst.to_string());
            }
            "FirstBurstLength" => {
                let asked = number(value, 512, (1 << 24) - 1)?;
                params.first_burst = asked.min(TARGET_BURST_BYTES_MAX).min(params.max_burst);
                text::push(answer, &pair.key, &params.first_burst.to_string());
            }
            "InitialR2T" => {
                // OR: the target is content either way, so the initiator's
                // wish stands.
                params.initial_r2t = boolean(value)?;
                text::push(answer, &pair.key, yes_no(params.initial_r2t));
            }
            "ImmediateData" => {
                params.immediate_data = boolean(value)?;
                text::push(answer, &pair.key, yes_no(params.immediate_data));
            }
            "MaxOutstandingR2T" => {
                number(value, 1, 65535)?;
                params.max_outstanding_r2t = 1;
                text::push(answer, &pair.key, "1");
            }
            "DataPDUInOrder" | "DataSequenceInOrder" => {
                // OR with the target's Yes: always Yes.
                boolean(value)?;
                text::push(answer, &pair.key, "Yes");
            }
            "ErrorRecoveryLevel" => {
                number(value, 0, 2)?;
                params.error_recovery_level = 0;
                text::push(answer, &pair.key, "0");
            }
            "MaxConnections" => {
                let offered = number(value, 1, 65535)?;
                params.max_connections = offered.min(u32::from(crate::session::CONNECTIONS_MAX));
                text::push(answer, &pair.key, &params.max_connections.to_string());
            }
            "DefaultTime2Wait" => {
                params.default_time2wait = number(value, 0, 3600)?.max(2);
                text::push(answer, &pair.key, &params.default_time2wait.to_string());
            }
            "DefaultTime2Retain" => {
                // Nothing is retained at error recovery level 0.
                number(value, 0, 3600)?;
                params.default_time2retain = 0;
                text::push(answer, &pair.key, "0");
            }
            "IFMarker" | "OFMarker" => text::push(answer, &pair.key, "No"),
            "IFMarkInt" | "OFMarkInt" => text::push(answer, &pair.key, "Irrelevant"),
            _ => text::push(answer, &pair.key, "NotUnderstood"),
        }
        Ok(())
    }
}

fn choose_digest(offered: &str) -> Result<bool, LoginStatus> {
    offered
        .split(',')
        .find_map(|name| match name {
            "CRC32C" => Some(true),
            "None" => Some(false),
            _ => None,
        })
        .ok_or(LoginStatus::INITIATOR_ERROR)
}

fn digest_name(on: bool) -> &'static str {
    if on { "CRC32C" } else { "None" }
}

fn yes_no(value: bool) -> &'static str {
    if value { "Yes" } else { "No" }
}

fn boolean(value: &str) -> Result<bool, LoginStatus> {
    match value {
        "Yes" => Ok(true),
        "No" => Ok(false),
        _ => Err(LoginStatus::INITIATOR_ERROR),
    }
}

fn number(value: &str, low: u32, high: u32) -> Result<u32, LoginStatus> {
    value
        .parse::<u32>()
        .ok()
        .filter(|n| (low..=high).contains(n))
        .ok_or(LoginStatus::INITIATOR_ERROR)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> TargetIdentity {
        TargetIdentity {
            name: "iqn.2026-11.org.wafer:node".into(),
            alias: "wafer".into(),
            portal_group_tag: 1,
            address: "127.0.0.1:3260".into(),
        }
    }

    fn request(current: u8, next: u8, data: &[u8]) -> LoginRequest<'_> {
        LoginRequest {
            transit: true,
            continued: false,
            current,
            next,
            versions: (0, 0),
            tsih: 0,
            data,
        }
    }

    fn answers(step: &Step) -> Vec<Pair> {
        text::parse(&step.answer).expect("valid answer")
    }

    fn value<'a>(pairs: &'a [Pair], key: &str) -> Option<&'a str> {
        pairs
            .iter()
            .find(|p| p.key == key)
            .map(|p| p.value.as_str())
    }

    #[test]
    fn security_then_operational_settles_every_key() {
        let mut login = Login::new(identity());
        let security = b"InitiatorName=iqn.i\0SessionType=Normal\0TargetName=iqn.2026-11.org.wafer:node\0AuthMethod=CHAP,None\0";
        let step = login.step(&request(0, 1, security));
        assert_eq!(step.status, LoginStatus::SUCCESS);
        assert_eq!(step.next, Some(Stage::Operational));
        let pairs = answers(&step);
        assert_eq!(value(&pairs, "AuthMethod"), Some("None"));
        assert_eq!(value(&pairs, "TargetPortalGroupTag"), Some("1"));

        let operational = b"HeaderDigest=CRC32C,None\0DataDigest=None\0MaxRecvDataSegmentLength=65536\0MaxBurstLength=16776192\0FirstBurstLength=262144\0InitialR2T=No\0ImmediateData=Yes\0MaxOutstandingR2T=8\0ErrorRecoveryLevel=2\0X-com.example=1\0";
        let step = login.step(&request(1, 3, operational));
        assert_eq!(step.next, Some(Stage::FullFeature));
        let pairs = answers(&step);
        assert_eq!(value(&pairs, "HeaderDigest"), Some("CRC32C"));
        assert_eq!(value(&pairs, "MaxBurstLength"), Some("1048576"));
        assert_eq!(value(&pairs, "MaxOutstandingR2T"), Some("1"));
        assert_eq!(value(&pairs, "ErrorRecoveryLevel"), Some("0"));
        assert_eq!(value(&pairs, "X-com.example"), Some("NotUnderstood"));
        let params = login.params;
        assert!(params.header_digest && !params.data_digest && !params.initial_r2t);
        assert_eq!(params.initiator_recv_data_segment, 65536);
        assert_eq!(params.first_burst, 262_144);
    }

    #[test]
    fn refusals_carry_their_status() {
        let mut login = Login::new(identity());
        let step = login.step(&request(0, 1, b"InitiatorName=i\0AuthMethod=CHAP\0"));
        assert_eq!(step.status, LoginStatus::AUTHENTICATION_FAILURE);
        let mut login = Login::new(identity());
        let step = login.step(&request(0, 1, b"InitiatorName=i\0TargetName=iqn.other\0"));
        assert_eq!(step.status, LoginStatus::NOT_FOUND);
        let mut login = Login::new(identity());
        let step = login.step(&request(1, 3, b"SessionType=Discovery\0"));
        assert_eq!(step.status, LoginStatus::MISSING_PARAMETER);
        let mut login = Login::new(identity());
        let step = login.step(&request(0, 2, b"InitiatorName=i\0"));
        assert_eq!(step.status, LoginStatus::INVALID_REQUEST);
        let mut login = Login::new(identity());
        let step = login.step(&request(1, 3, b"InitiatorName=i\0MaxBurstLength=12\0"));
        assert_eq!(step.status, LoginStatus::INITIATOR_ERROR);
    }

    #[test]
    fn continued_text_is_answered_once_whole() {
        let mut login = Login::new(identity());
        let mut first = request(1, 3, b"InitiatorName=iqn.");
        first.continued = true;
        first.transit = false;
        let step = login.step(&first);
        assert!(step.answer.is_empty() && step.next.is_none());
        let step = login.step(&request(1, 3, b"i\0SessionType=Discovery\0"));
        assert_eq!(step.status, LoginStatus::SUCCESS);
        assert_eq!(login.initiator_name.as_deref(), Some("iqn.i"));
        assert_eq!(login.session_type, SessionType::Discovery);
    }

    fn chap_security(outbound: bool) -> Arc<Security> {
        let mut security = Security::default();
        let policy = Policy::Chap {
            inbound: chap::Credentials {
                name: "alice".into(),
                secret: b"alice-secret".to_vec(),
            },
            outbound: outbound.then(|| chap::Credentials {
                name: "target".into(),
                secret: b"target-secret".to_vec(),
            }),
        };
        security.initiators.insert("iqn.i".into(), policy);
        Arc::new(security)
    }

    const CHALLENGE: Challenge = Challenge {
        identifier: 7,
        bytes: [0x5a; chap::CHALLENGE_BYTES],
    };

    /// Logs in through security up to the challenge, which it returns.
    fn challenged(login: &mut Login) -> (u8, Vec<u8>) {
        let first = b"InitiatorName=iqn.i\0SessionType=Normal\0AuthMethod=CHAP,None\0";
        let step = login.step(&request(0, 1, first));
        assert_eq!(step.status, LoginStatus::SUCCESS);
        assert_eq!(step.next, None, "no transit before CHAP is done");
        assert_eq!(value(&answers(&step), "AuthMethod"), Some("CHAP"));
        let step = login.step(&request(0, 1, b"CHAP_A=7,5\0"));
        assert_eq!(step.status, LoginStatus::SUCCESS);
        assert_eq!(step.next, None);
        let pairs = answers(&step);
        assert_eq!(value(&pairs, "CHAP_A"), Some("5"));
        let identifier = value(&pairs, "CHAP_I")
            .expect("CHAP_I")
            .parse()
            .expect("a byte");
        let challenge = chap::from_hex(value(&pairs, "CHAP_C").expect("CHAP_C")).expect("hex");
        (identifier, challenge)
    }

    fn answer_with(secret: &[u8], identifier: u8, challenge: &[u8], extra: &str) -> Vec<u8> {
        let response = chap::to_hex(&chap::response(identifier, secret, challenge));
        format!("CHAP_N=alice\0CHAP_R={response}\0{extra}").into_bytes()
    }

    #[test]
    fn one_way_chap_admits_the_right_secret_only() {
        let mut login = Login::with_security(identity(), chap_security(false), CHALLENGE);
        let (identifier, challenge) = challenged(&mut login);
        assert_eq!((identifier, challenge.as_slice()), (7, &[0x5a; 16][..]));
        let step = login.step(&request(
            0,
            1,
            &answer_with(b"alice-secret", 7, &challenge, ""),
        ));
        assert_eq!(step.status, LoginStatus::SUCCESS);
        assert_eq!(step.next, Some(Stage::Operational));

        let mut login = Login::with_security(identity(), chap_security(false), CHALLENGE);
        let (identifier, challenge) = challenged(&mut login);
        let wrong = answer_with(b"wrong", identifier, &challenge, "");
        let step = login.step(&request(0, 1, &wrong));
        assert_eq!(step.status, LoginStatus::AUTHENTICATION_FAILURE);
    }

    #[test]
    fn mutual_chap_answers_the_initiators_challenge() {
        let mut login = Login::with_security(identity(), chap_security(true), CHALLENGE);
        let (identifier, challenge) = challenged(&mut login);
        let mutual = answer_with(
            b"alice-secret",
            identifier,
            &challenge,
            "CHAP_I=9\0CHAP_C=0x0102\0",
        );
        let step = login.step(&request(0, 1, &mutual));
        assert_eq!(step.status, LoginStatus::SUCCESS);
        let pairs = answers(&step);
        assert_eq!(value(&pairs, "CHAP_N"), Some("target"));
        let proof = chap::to_hex(&chap::response(9, b"target-secret", &[1, 2]));
        assert_eq!(value(&pairs, "CHAP_R"), Some(proof.as_str()));

        // Without outbound credentials, or with the target's own challenge
        // reflected, mutual CHAP is refused.
        let mut login = Login::with_security(identity(), chap_security(false), CHALLENGE);
        let (identifier, challenge) = challenged(&mut login);
        let step = login.step(&request(
            0,
            1,
            &answer_with(
                b"alice-secret",
                identifier,
                &challenge,
                "CHAP_I=9\0CHAP_C=0x0102\0",
            ),
        ));
        assert_eq!(step.status, LoginStatus::AUTHENTICATION_FAILURE);
        let mut login = Login::with_security(identity(), chap_security(true), CHALLENGE);
        let (identifier, challenge) = challenged(&mut login);
        let reflected = format!("CHAP_I=7\0CHAP_C={}\0", chap::to_hex(&challenge));
        let step = login.step(&request(
            0,
            1,
            &answer_with(b"alice-secret", identifier, &challenge, &reflected),
        ));
        assert_eq!(step.status, LoginStatus::AUTHENTICATION_FAILURE);
    }

    #[test]
    fn an_initiator_that_must_use_chap_cannot_skip_it() {
        let none_only = b"InitiatorName=iqn.i\0AuthMethod=None\0";
        let mut login = Login::with_security(identity(), chap_security(false), CHALLENGE);
        let step = login.step(&request(0, 1, none_only));
        assert_eq!(step.status, LoginStatus::AUTHENTICATION_FAILURE);
        // Straight to operational, or out of security without AuthMethod.
        let mut login = Login::with_security(identity(), chap_security(false), CHALLENGE);
        let step = login.step(&request(1, 3, b"InitiatorName=iqn.i\0"));
        assert_eq!(step.status, LoginStatus::AUTHENTICATION_FAILURE);
        let mut login = Login::with_security(identity(), chap_security(false), CHALLENGE);
        let step = login.step(&request(0, 1, b"InitiatorName=iqn.i\0"));
        assert_eq!(step.status, LoginStatus::AUTHENTICATION_FAILURE);
        // A response before any challenge.
        let mut login = Login::with_security(identity(), chap_security(false), CHALLENGE);
        let early = b"InitiatorName=iqn.i\0AuthMethod=CHAP\0CHAP_N=alice\0CHAP_R=0x00\0";
        let step = login.step(&request(0, 1, early));
        assert_eq!(step.status, LoginStatus::AUTHENTICATION_FAILURE);
        // Others keep the default: none needed.
        let mut login = Login::with_security(identity(), chap_security(false), CHALLENGE);
        let step = login.step(&request(
            0,
            1,
            b"InitiatorName=iqn.other\0AuthMethod=None\0",
        ));
        assert_eq!(step.status, LoginStatus::SUCCESS);
        // Deny refuses.
        let deny = Arc::new(Security {
            default: Policy::Deny,
            ..Security::default()
        });
        let mut login = Login::with_security(identity(), deny, CHALLENGE);
        let step = login.step(&request(
            0,
            1,
            b"InitiatorName=iqn.other\0AuthMethod=None\0",
        ));
        assert_eq!(step.status, LoginStatus::AUTHENTICATION_FAILURE);
    }
}
