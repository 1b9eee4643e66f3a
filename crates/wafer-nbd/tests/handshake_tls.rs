//! `NBD_OPT_STARTTLS` in each TLS mode: what is granted, what is refused
//! before and after the upgrade, what the upgrade forgets, and what the
//! driver must do in between.

mod common;

use common::{OptionReply, catalogue, client_flags, export_query, meta_context_query, option};
use wafer_nbd::consts::*;
use wafer_nbd::{Handshake, HandshakeError, HandshakeEvent, TlsMode};

/// What one feeding did: the server's output, the last outcome, and the input
/// it did not take.
struct Fed {
    output: Vec<u8>,
    outcome: Result<Option<HandshakeEvent>, HandshakeError>,
    leftover: Vec<u8>,
}

impl Fed {
    fn replies(&self) -> Vec<OptionReply> {
        common::parse_option_replies(&self.output)
    }

    fn reply_types(&self) -> Vec<u32> {
        self.replies()
            .iter()
            .map(|reply| reply.reply_type)
            .collect()
    }
}

/// A handshake in `mode` with its greeting already taken.
fn handshake(mode: TlsMode) -> Handshake {
    let mut handshake = Handshake::with_tls(mode);
    let mut greeting = Vec::new();
    handshake.poll_transmit(&mut greeting);
    handshake
}

/// Feeds `input` until it is used up or an event or error comes.
fn feed(handshake: &mut Handshake, input: &[u8]) -> Fed {
    let exports = catalogue();
    let mut output = Vec::new();
    let mut rest = input;
    let mut outcome = Ok(None);
    while !rest.is_empty() {
        outcome = handshake.handle_input(&mut rest, &*exports);
        handshake.poll_transmit(&mut output);
        if !matches!(outcome, Ok(None)) {
            break;
        }
    }
    Fed {
        output,
        outcome,
        leftover: rest.to_vec(),
    }
}

fn fixed_newstyle() -> Vec<u8> {
    client_flags(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)
}

fn go(name: &str) -> Vec<u8> {
    option(NBD_OPT_GO, &export_query(name, &[]))
}

/// Upgrades a fresh handshake in `mode` (flags, then STARTTLS) and returns it
/// as the driver leaves it once TLS is on.
fn upgraded(mode: TlsMode, flags: Vec<u8>) -> Handshake {
    let mut handshake = handshake(mode);
    let mut input = flags;
    input.extend(option(NBD_OPT_STARTTLS, &[]));
    let fed = feed(&mut handshake, &input);
    assert!(matches!(fed.outcome, Ok(Some(HandshakeEvent::StartTls))));
    assert_eq!(fed.reply_types(), [NBD_REP_ACK]);
    handshake.tls_started();
    handshake
}

#[test]
fn without_tls_starttls_is_refused_by_policy_and_the_negotiation_goes_on() {
    let mut handshake = handshake(TlsMode::Off);
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STARTTLS, &[]));
    input.extend(option(NBD_OPT_LIST, &[]));
    let fed = feed(&mut handshake, &input);
    assert!(matches!(fed.outcome, Ok(None)));
    let replies = fed.replies();
    assert_eq!(replies[0].option, NBD_OPT_STARTTLS);
    assert_eq!(replies[0].reply_type, NBD_REP_ERR_POLICY);
    assert_eq!(
        fed.reply_types().last(),
        Some(&NBD_REP_ACK),
        "LIST answered"
    );
}

#[test]
fn optional_tls_serves_a_plain_client() {
    let mut handshake = handshake(TlsMode::Optional);
    let mut input = fixed_newstyle();
    input.extend(go("vol0/lun0"));
    let fed = feed(&mut handshake, &input);
    assert!(matches!(
        fed.outcome,
        Ok(Some(HandshakeEvent::Transmission(_)))
    ));
    assert!(!fed.reply_types().contains(&NBD_REP_ERR_TLS_REQD));
}

#[test]
fn starttls_is_acknowledged_and_the_bytes_after_it_are_left_for_tls() {
    let mut handshake = handshake(TlsMode::Optional);
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STARTTLS, &[]));
    // A client hello sent without waiting for the ACK: TLS bytes, never
    // options, whatever they look like.
    let tls_bytes = option(NBD_OPT_LIST, &[]);
    input.extend(&tls_bytes);
    let fed = feed(&mut handshake, &input);
    assert!(matches!(fed.outcome, Ok(Some(HandshakeEvent::StartTls))));
    assert_eq!(fed.reply_types(), [NBD_REP_ACK]);
    assert_eq!(fed.replies()[0].data, b"", "an ACK carries no data");
    assert_eq!(fed.leftover, tls_bytes);
    handshake.tls_started();
    let fed = feed(&mut handshake, &go("vol0/lun0"));
    assert!(matches!(
        fed.outcome,
        Ok(Some(HandshakeEvent::Transmission(_)))
    ));
}

#[test]
fn starttls_with_data_is_invalid_and_upgrades_nothing() {
    let mut handshake = handshake(TlsMode::Required);
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STARTTLS, b"x"));
    input.extend(option(NBD_OPT_STARTTLS, &[]));
    let fed = feed(&mut handshake, &input);
    assert_eq!(fed.reply_types(), [NBD_REP_ERR_INVALID, NBD_REP_ACK]);
    assert!(matches!(fed.outcome, Ok(Some(HandshakeEvent::StartTls))));
}

#[test]
fn starttls_once_tls_is_on_is_invalid_and_the_negotiation_goes_on() {
    for mode in [TlsMode::Optional, TlsMode::Required] {
        let mut handshake = upgraded(mode, fixed_newstyle());
        let mut input = option(NBD_OPT_STARTTLS, &[]);
        input.extend(go("vol0/lun0"));
        let fed = feed(&mut handshake, &input);
        let replies = fed.replies();
        assert_eq!(replies[0].option, NBD_OPT_STARTTLS);
        assert_eq!(replies[0].reply_type, NBD_REP_ERR_INVALID, "{mode:?}");
        assert!(matches!(
            fed.outcome,
            Ok(Some(HandshakeEvent::Transmission(_)))
        ));
    }
}

#[test]
fn required_tls_refuses_every_option_but_starttls_and_abort_before_the_upgrade() {
    let mut handshake = handshake(TlsMode::Required);
    let mut input = fixed_newstyle();
    let refused = [
        option(NBD_OPT_LIST, &[]),
        option(NBD_OPT_INFO, &export_query("vol0/lun0", &[])),
        go("vol0/lun0"),
        option(NBD_OPT_STRUCTURED_REPLY, &[]),
        option(
            NBD_OPT_LIST_META_CONTEXT,
            &meta_context_query("vol0/lun0", &[]),
        ),
        option(NBD_OPT_LIST, b"malformed: LIST takes no data"),
        option(0x0765_4321, b"unknown"),
        option(NBD_OPT_INFO, &vec![0; 20_000]),
    ];
    for bytes in &refused {
        input.extend(bytes);
    }
    input.extend(option(NBD_OPT_ABORT, &[]));
    let fed = feed(&mut handshake, &input);
    let mut expected = vec![NBD_REP_ERR_TLS_REQD; refused.len()];
    expected.push(NBD_REP_ACK);
    assert_eq!(fed.reply_types(), expected);
    assert!(matches!(fed.outcome, Ok(Some(HandshakeEvent::Aborted))));
}

#[test]
fn required_tls_drops_export_name_before_the_upgrade() {
    let mut handshake = handshake(TlsMode::Required);
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_EXPORT_NAME, b"vol0/lun0"));
    let fed = feed(&mut handshake, &input);
    assert_eq!(fed.outcome, Err(HandshakeError::ExportNameWithoutTls));
    assert!(fed.output.is_empty(), "nothing about the export is sent");
}

#[test]
fn required_tls_serves_everything_once_upgraded_and_never_says_tls_required() {
    let mut handshake = upgraded(TlsMode::Required, fixed_newstyle());
    let mut input = option(NBD_OPT_LIST, &[]);
    input.extend(option(0x0765_4321, b"unknown"));
    input.extend(option(NBD_OPT_INFO, &export_query("vol0/lun0", &[])));
    input.extend(go("vol0/lun0"));
    let fed = feed(&mut handshake, &input);
    assert!(!fed.reply_types().contains(&NBD_REP_ERR_TLS_REQD));
    assert!(fed.reply_types().contains(&NBD_REP_SERVER));
    assert!(fed.reply_types().contains(&NBD_REP_ERR_UNSUP));
    assert!(matches!(
        fed.outcome,
        Ok(Some(HandshakeEvent::Transmission(_)))
    ));
}

#[test]
fn a_client_without_fixed_newstyle_cannot_upgrade() {
    let mut required = handshake(TlsMode::Required);
    let fed = feed(&mut required, &client_flags(0));
    assert_eq!(fed.outcome, Err(HandshakeError::TlsImpossible));

    let mut optional = handshake(TlsMode::Optional);
    let mut input = client_flags(0);
    input.extend(option(NBD_OPT_STARTTLS, &[]));
    let fed = feed(&mut optional, &input);
    assert_eq!(fed.reply_types(), [NBD_REP_ERR_POLICY]);
    assert!(matches!(fed.outcome, Ok(None)));
}

#[test]
fn the_upgrade_forgets_structured_replies_and_metadata_contexts() {
    let mut handshake = handshake(TlsMode::Optional);
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STRUCTURED_REPLY, &[]));
    input.extend(option(
        NBD_OPT_SET_META_CONTEXT,
        &meta_context_query("vol0/lun0", &["base:allocation"]),
    ));
    input.extend(option(NBD_OPT_STARTTLS, &[]));
    let fed = feed(&mut handshake, &input);
    assert_eq!(
        fed.reply_types(),
        [NBD_REP_ACK, NBD_REP_META_CONTEXT, NBD_REP_ACK, NBD_REP_ACK]
    );
    handshake.tls_started();
    // Structured replies must be asked for again before a context can be.
    let mut input = option(
        NBD_OPT_SET_META_CONTEXT,
        &meta_context_query("vol0/lun0", &["base:allocation"]),
    );
    input.extend(go("vol0/lun0"));
    let fed = feed(&mut handshake, &input);
    assert_eq!(fed.replies()[0].reply_type, NBD_REP_ERR_INVALID);
    let Ok(Some(HandshakeEvent::Transmission(negotiated))) = fed.outcome else {
        panic!("GO enters transmission: {:?}", fed.outcome);
    };
    assert!(!negotiated.structured_replies);
    assert_eq!(negotiated.base_allocation, None);
}

#[test]
fn no_zeroes_from_the_clear_still_governs_export_name_inside_tls() {
    for (flags, padding) in [(NBD_FLAG_C_NO_ZEROES, 0), (0, 124)] {
        let flags = client_flags(NBD_FLAG_C_FIXED_NEWSTYLE | flags);
        let mut handshake = upgraded(TlsMode::Required, flags);
        let fed = feed(&mut handshake, &option(NBD_OPT_EXPORT_NAME, b"vol0/lun0"));
        assert!(matches!(
            fed.outcome,
            Ok(Some(HandshakeEvent::Transmission(_)))
        ));
        assert_eq!(fed.output.len(), 8 + 2 + padding);
    }
}

#[test]
fn a_connection_closed_while_tls_starts_is_closed() {
    let mut handshake = handshake(TlsMode::Optional);
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STARTTLS, &[]));
    feed(&mut handshake, &input);
    assert_eq!(handshake.handle_eof(), HandshakeError::Closed);
}

#[test]
#[should_panic(expected = "before tls_started")]
fn input_before_tls_has_started_is_a_driver_bug() {
    let mut handshake = handshake(TlsMode::Optional);
    let mut input = fixed_newstyle();
    input.extend(option(NBD_OPT_STARTTLS, &[]));
    input.extend(option(NBD_OPT_LIST, &[]));
    let fed = feed(&mut handshake, &input);
    feed(&mut handshake, &fed.leftover);
}

#[test]
#[should_panic(expected = "TLS started unasked")]
fn starting_tls_unasked_is_a_driver_bug() {
    let mut handshake = handshake(TlsMode::Required);
    feed(&mut handshake, &fixed_newstyle());
    handshake.tls_started();
}
