//! Login: the security and operational negotiation stages.
//!
//! A connection starts in login. The initiator sends login requests, each
//! naming its current stage (security 0, operational 1) and, with the
//! transit bit, the next (operational 1, full feature 3); each carries text
//! keys the target answers in its login response. Security allows only
//! `AuthMethod=None` here: an initiator that offers nothing else is refused
//! with an authentication failure. Operational keys are settled by the
//! RFC 7143 rules, key by key: the lesser or greater of two numbers, the
//! OR or AND of two booleans, the first of the initiator's list the target
//! supports; a key the target does not know is answered `NotUnderstood`.
//! Keys the initiator does not send keep their defaults.
//!
//! [`Login`] holds what has been agreed; the connection drives it one
//! request at a time and reads the outcome from [`Step`].

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

/// A login in progress.
#[derive(Clone, Debug)]
pub struct Login {
    identity: TargetIdentity,
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
    /// A login to `identity`.
    pub fn new(identity: TargetIdentity) -> Login {
        Login {
            identity,
            params: Params::default(),
            initiator_name: None,
            session_type: SessionType::Normal,
            declared: false,
            pending: Vec::new(),
            stage: Stage::Security,
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
            // One connection per session: no session to join exists.
            return self.refuse(current, LoginStatus::SESSION_DOES_NOT_EXIST);
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
        let next = match request.transit {
            true => Stage::from_bits(request.next).filter(|&next| next > current),
            false => None,
        };
        if request.transit && next.is_none() {
            return self.refuse(current, LoginStatus::INVALID_REQUEST);
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

    fn negotiate(&mut self, pairs: &[Pair], answer: &mut Vec<u8>) -> Result<(), LoginStatus> {
        for pair in pairs {
            self.negotiate_key(pair, answer)?;
        }
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
            "AuthMethod" => {
                if !value.split(',').any(|method| method == "None") {
                    return Err(LoginStatus::AUTHENTICATION_FAILURE);
                }
                text::push(answer, "AuthMethod", "None");
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
                number(value, 1, 65535)?;
                params.max_connections = 1;
                text::push(answer, &pair.key, "1");
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
}
