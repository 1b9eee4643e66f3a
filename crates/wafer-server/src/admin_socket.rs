//! The admin socket's server side: a listener on `DIR/admin.sock` and a
//! thread per admin connection, each relaying JSON lines to the engine.
//!
//! A line that is too long or not a request gets an `invalid` error response
//! (a line too long also ends the connection, since the rest of it cannot be
//! told from the next request). At most [`ADMIN_CONNECTIONS_MAX`] connections
//! are served at once.

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::thread;

use crate::admin::{
    ADMIN_SOCKET, AdminError, AdminErrorKind, AdminRequest, AdminResponse, REQUEST_LINE_BYTES_MAX,
};
use crate::error::ServeError;
use crate::events::Event;
use crate::stop::StopSignal;
use crate::stream::remove_stale_socket;

/// Admin connections served at once.
const ADMIN_CONNECTIONS_MAX: usize = 16;

/// Binds `DIR/admin.sock`, readable and writable by the owner only.
pub(crate) fn bind(dir: &Path) -> Result<(UnixListener, PathBuf), ServeError> {
    let path = dir.join(ADMIN_SOCKET);
    let refuse = |error| ServeError::Listen {
        address: path.display().to_string(),
        error,
    };
    remove_stale_socket(&path).map_err(refuse)?;
    let listener = UnixListener::bind(&path).map_err(refuse)?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).map_err(refuse)?;
    Ok((listener, path))
}

/// Starts serving admin connections.
pub(crate) fn spawn(
    listener: UnixListener,
    path: PathBuf,
    engine: Sender<Event>,
    stop: &Arc<StopSignal>,
) -> io::Result<()> {
    let wake = path.clone();
    stop.add_waker(Box::new(move || {
        let _ = UnixStream::connect(&wake);
    }));
    let stop = Arc::clone(stop);
    thread::Builder::new()
        .name("admin-listener".into())
        .spawn(move || accept_loop(&listener, &path, &engine, &stop))?;
    Ok(())
}

fn accept_loop(listener: &UnixListener, path: &Path, engine: &Sender<Event>, stop: &StopSignal) {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stop.is_stopping() {
            break;
        }
        let Ok(stream) = stream else { continue };
        if open.fetch_add(1, Ordering::SeqCst) >= ADMIN_CONNECTIONS_MAX {
            open.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!("admin connection refused: {ADMIN_CONNECTIONS_MAX} are open");
            continue;
        }
        let (engine, still_open) = (engine.clone(), Arc::clone(&open));
        let spawned = thread::Builder::new().name("admin".into()).spawn(move || {
            if let Err(error) = serve(stream, &engine) {
                tracing::info!("admin connection ended: {error}");
            }
            still_open.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let _ = fs::remove_file(path);
}

fn serve(stream: UnixStream, engine: &Sender<Event>) -> io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = REQUEST_LINE_BYTES_MAX as u64 + 1;
        (&mut reader).take(limit).read_until(b'\n', &mut line)?;
        if line.is_empty() {
            return Ok(());
        }
        let complete = line.last() == Some(&b'\n');
        let response = match serde_json::from_slice::<AdminRequest>(&line) {
            _ if !complete && line.len() > REQUEST_LINE_BYTES_MAX => invalid(format!(
                "a request line is at most {REQUEST_LINE_BYTES_MAX} bytes"
            )),
            Ok(request) => relay(engine, request),
            Err(error) => invalid(format!("not an admin request: {error}")),
        };
        let mut answer = serde_json::to_vec(&response).map_err(io::Error::other)?;
        answer.push(b'\n');
        writer.write_all(&answer)?;
        if !complete {
            return Ok(());
        }
    }
}

/// Has the engine carry out a request, and waits for its response.
fn relay(engine: &Sender<Event>, request: AdminRequest) -> AdminResponse {
    let (reply, response) = mpsc::channel();
    let stopped = || {
        AdminResponse::Error(AdminError {
            kind: AdminErrorKind::ShuttingDown,
            message: "the server has stopped".into(),
        })
    };
    if engine.send(Event::Admin { request, reply }).is_err() {
        return stopped();
    }
    response.recv().unwrap_or_else(|_| stopped())
}

fn invalid(message: String) -> AdminResponse {
    AdminResponse::Error(AdminError {
        kind: AdminErrorKind::Invalid,
        message,
    })
}
