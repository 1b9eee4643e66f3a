//! Parsing of one option's data, once the handshake has gathered all of it.
//!
//! This is the syntactic half of option handling: it turns the bytes that
//! follow an option header into a [`ClientOption`], or into a [`Refusal`] that
//! the handshake sends back as an error reply before reading the next option.
//! Whether a well-formed option can be granted (does the export exist, were
//! structured replies negotiated) is the handshake's business.
//!
//! Lengths inside the data are checked against the data actually received, so
//! a field can never claim bytes beyond its option; strings follow the
//! protocol's rules (UTF-8, no NUL, at most 4096 bytes), and a string over the
//! limit is refused as too big rather than as malformed.

use crate::consts::{
    NBD_OPT_ABORT, NBD_OPT_EXPORT_NAME, NBD_OPT_GO, NBD_OPT_INFO, NBD_OPT_LIST,
    NBD_OPT_LIST_META_CONTEXT, NBD_OPT_SET_META_CONTEXT, NBD_OPT_STARTTLS,
    NBD_OPT_STRUCTURED_REPLY, NBD_REP_ERR_INVALID, NBD_REP_ERR_TOO_BIG, NBD_REP_ERR_UNSUP,
};
use crate::wire::{Reader, StringError, decode_string};

/// A well-formed option.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ClientOption {
    /// `NBD_OPT_EXPORT_NAME`: enter transmission with this export, no questions.
    ExportName { name: String },
    /// `NBD_OPT_ABORT`: any data is ignored, as the specification asks.
    Abort,
    /// `NBD_OPT_LIST`.
    List,
    /// `NBD_OPT_STARTTLS`.
    StartTls,
    /// `NBD_OPT_INFO`.
    Info(ExportQuery),
    /// `NBD_OPT_GO`.
    Go(ExportQuery),
    /// `NBD_OPT_STRUCTURED_REPLY`.
    StructuredReply,
    /// `NBD_OPT_LIST_META_CONTEXT`.
    ListMetaContext(MetaContextQuery),
    /// `NBD_OPT_SET_META_CONTEXT`.
    SetMetaContext(MetaContextQuery),
}

/// The data of `NBD_OPT_INFO` and `NBD_OPT_GO`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ExportQuery {
    /// The export's name as the client spelled it ("" for the default).
    pub name: String,
    /// The `NBD_INFO_*` types the client asked for, unknown ones included.
    pub info_requests: Vec<u16>,
}

impl ExportQuery {
    pub(crate) fn asks_for(&self, info: u16) -> bool {
        self.info_requests.contains(&info)
    }
}

/// The data of `NBD_OPT_LIST_META_CONTEXT` and `NBD_OPT_SET_META_CONTEXT`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MetaContextQuery {
    /// The export the contexts are for.
    pub export_name: String,
    /// The context queries, such as `base:allocation` or `base:`.
    pub queries: Vec<String>,
}

/// An option refused before it is considered: the reply type and a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// An `NBD_REP_ERR_*` reply type.
    pub reply_type: u32,
    /// A message for humans, sent as the error reply's data.
    pub message: &'static str,
}

impl Refusal {
    const fn invalid(message: &'static str) -> Refusal {
        Refusal {
            reply_type: NBD_REP_ERR_INVALID,
            message,
        }
    }

    const fn too_big(message: &'static str) -> Refusal {
        Refusal {
            reply_type: NBD_REP_ERR_TOO_BIG,
            message,
        }
    }

    fn from_string_error(error: StringError, what: &'static str) -> Refusal {
        match error {
            StringError::TooLong => Refusal::too_big(what),
            StringError::Truncated | StringError::Malformed => Refusal::invalid(what),
        }
    }
}

/// The refusal for options this server does not know.
pub(crate) const UNSUPPORTED: Refusal = Refusal {
    reply_type: NBD_REP_ERR_UNSUP,
    message: "option not supported",
};

/// Parses the data of `option`.
pub(crate) fn parse(option: u32, data: &[u8]) -> Result<ClientOption, Refusal> {
    match option {
        NBD_OPT_EXPORT_NAME => decode_string(data)
            .map(|name| ClientOption::ExportName { name })
            .map_err(|error| Refusal::from_string_error(error, "malformed export name")),
        NBD_OPT_ABORT => Ok(ClientOption::Abort),
        NBD_OPT_LIST => {
            expect_no_data(data, "NBD_OPT_LIST takes no data").map(|()| ClientOption::List)
        }
        NBD_OPT_STARTTLS => {
            expect_no_data(data, "NBD_OPT_STARTTLS takes no data").map(|()| ClientOption::StartTls)
        }
        NBD_OPT_INFO => parse_export_query(data).map(ClientOption::Info),
        NBD_OPT_GO => parse_export_query(data).map(ClientOption::Go),
        NBD_OPT_STRUCTURED_REPLY => expect_no_data(data, "NBD_OPT_STRUCTURED_REPLY takes no data")
            .map(|()| ClientOption::StructuredReply),
        NBD_OPT_LIST_META_CONTEXT => {
            parse_meta_context_query(data).map(ClientOption::ListMetaContext)
        }
        NBD_OPT_SET_META_CONTEXT => {
            parse_meta_context_query(data).map(ClientOption::SetMetaContext)
        }
        _ => Err(UNSUPPORTED),
    }
}

fn expect_no_data(data: &[u8], message: &'static str) -> Result<(), Refusal> {
    if data.is_empty() {
        Ok(())
    } else {
        Err(Refusal::invalid(message))
    }
}

/// Name length (32), name, request count (16), requests (16 each), nothing more.
fn parse_export_query(data: &[u8]) -> Result<ExportQuery, Refusal> {
    let mut reader = Reader::new(data);
    let name = reader
        .string_u32()
        .map_err(|error| Refusal::from_string_error(error, "malformed export name"))?;
    let count = reader
        .u16()
        .ok_or(Refusal::invalid("information request count missing"))?;
    if reader.remaining() != usize::from(count) * 2 {
        return Err(Refusal::invalid(
            "information requests do not match their count",
        ));
    }
    let info_requests = (0..count).filter_map(|_| reader.u16()).collect();
    Ok(ExportQuery {
        name,
        info_requests,
    })
}

/// Name length (32), name, query count (32), queries (length 32, string each),
/// nothing more.
fn parse_meta_context_query(data: &[u8]) -> Result<MetaContextQuery, Refusal> {
    let mut reader = Reader::new(data);
    let export_name = reader
        .string_u32()
        .map_err(|error| Refusal::from_string_error(error, "malformed export name"))?;
    let count = reader
        .u32()
        .ok_or(Refusal::invalid("query count missing"))?;
    // Each query takes at least its 4-byte length, which bounds the loop by the
    // option's size whatever the count claims.
    if usize::try_from(count).map_or(true, |count| count > reader.remaining() / 4) {
        return Err(Refusal::invalid("more queries than the data holds"));
    }
    let mut queries = Vec::new();
    for _ in 0..count {
        let query = reader
            .string_u32()
            .map_err(|error| Refusal::from_string_error(error, "malformed context query"))?;
        queries.push(query);
    }
    if reader.remaining() != 0 {
        return Err(Refusal::invalid("data after the last query"));
    }
    Ok(MetaContextQuery {
        export_name,
        queries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::NBD_INFO_NAME;

    fn export_query_data(name: &[u8], claimed_length: u32, requests: &[u16]) -> Vec<u8> {
        let mut data = claimed_length.to_be_bytes().to_vec();
        data.extend_from_slice(name);
        data.extend_from_slice(&(requests.len() as u16).to_be_bytes());
        for request in requests {
            data.extend_from_slice(&request.to_be_bytes());
        }
        data
    }

    #[test]
    fn an_export_query_reads_name_and_requests() {
        let data = export_query_data(b"lun0", 4, &[NBD_INFO_NAME, 77]);
        assert_eq!(
            parse(NBD_OPT_GO, &data),
            Ok(ClientOption::Go(ExportQuery {
                name: "lun0".to_owned(),
                info_requests: vec![NBD_INFO_NAME, 77],
            }))
        );
    }

    #[test]
    fn a_name_length_beyond_the_data_is_invalid() {
        let data = export_query_data(b"lun0", 40, &[]);
        assert_eq!(
            parse(NBD_OPT_INFO, &data).map_err(|refusal| refusal.reply_type),
            Err(NBD_REP_ERR_INVALID)
        );
    }

    #[test]
    fn a_request_count_that_disagrees_with_the_data_is_invalid() {
        let mut data = export_query_data(b"lun0", 4, &[NBD_INFO_NAME]);
        data.push(0);
        assert_eq!(
            parse(NBD_OPT_GO, &data).map_err(|refusal| refusal.reply_type),
            Err(NBD_REP_ERR_INVALID)
        );
    }

    #[test]
    fn a_query_count_larger_than_the_data_is_refused_before_any_allocation() {
        let mut data = 0u32.to_be_bytes().to_vec();
        data.extend_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            parse(NBD_OPT_LIST_META_CONTEXT, &data).map_err(|refusal| refusal.reply_type),
            Err(NBD_REP_ERR_INVALID)
        );
    }

    #[test]
    fn unknown_options_are_unsupported() {
        assert_eq!(parse(0x0765_4321, &[]), Err(UNSUPPORTED));
    }
}
