//! `--nvlog PATH` puts the NVLog on another path (a faster device, like a
//! ZFS SLOG), recorded in `wafer.toml`. Acknowledged writes survive a SIGKILL
//! there as they do in the data directory; a restart that names no NVLog, or
//! another one, is refused with the path to use and changes nothing, since
//! the NVLog holds acknowledged writes.

mod serve_harness;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serve_harness::{NbdClient, Scratch, TEST_SIZES, pattern, refusal, serve_with};

const WRITE_BYTES: usize = 16 * 1024;
const BLOCKS: u64 = 400;

/// A directory beside the data directory, standing for another device.
fn device(scratch: &Scratch) -> PathBuf {
    let device = scratch.file("ssd");
    std::fs::create_dir(&device).expect("the other device's directory");
    device
}

fn with_nvlog(path: &Path) -> Vec<&str> {
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--nvlog", path.to_str().expect("UTF-8")]);
    args
}

#[test]
fn acknowledged_writes_on_another_nvlog_survive_sigkill_and_a_refused_restart() {
    let scratch = Scratch::new();
    let nvlog = device(&scratch).join("nvlog");
    let server = serve_with(&scratch, &with_nvlog(&nvlog));
    let config = std::fs::read_to_string(scratch.data().join("wafer.toml")).expect("readable");
    assert!(
        config.contains(&format!(
            "nvlog_file = {:?}",
            nvlog.to_str().expect("UTF-8")
        )),
        "{config}"
    );
    assert!(
        !scratch.data().join("nvlog").exists(),
        "no NVLog in the data directory"
    );
    let mode = std::fs::metadata(&nvlog)
        .expect("created")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "owner-only");

    // Every write is acknowledged, then the server dies with no CP since:
    // the CP timer is 10 s, so what is on the disks is the empty LUN.
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    for block in 0..BLOCKS {
        let data = pattern(7, block, WRITE_BYTES);
        assert_eq!(client.write(block * WRITE_BYTES as u64, &data), 0);
    }
    server.kill();
    drop(client);
    let logged = std::fs::read(&nvlog).expect("readable");

    let message = refusal(&scratch, &TEST_SIZES);
    assert!(
        message.contains(&format!("start with --nvlog {}", nvlog.display())),
        "{message}"
    );
    assert!(message.contains("acknowledged writes"), "{message}");
    let elsewhere = nvlog.with_file_name("other");
    let message = refusal(&scratch, &with_nvlog(&elsewhere));
    assert!(
        message.contains(&format!("not {}", elsewhere.display())),
        "{message}"
    );
    assert!(!elsewhere.exists(), "a refused start creates nothing");
    assert!(!scratch.data().join("nvlog").exists());
    assert!(
        std::fs::read(&nvlog).expect("readable") == logged,
        "the NVLog is untouched"
    );

    let server = serve_with(&scratch, &with_nvlog(&nvlog));
    assert!(server.startup.contains("mounted"), "{}", server.startup);
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    for block in 0..BLOCKS {
        let data = client
            .read(block * WRITE_BYTES as u64, WRITE_BYTES as u32)
            .expect("readable");
        assert!(data == pattern(7, block, WRITE_BYTES), "block {block} lost");
    }
    drop(client);
    server.stop();
}

#[test]
fn an_nvlog_path_that_cannot_be_used_is_refused_before_anything_is_made() {
    let scratch = Scratch::new();
    let missing = scratch.file("absent/nvlog");
    let message = refusal(&scratch, &with_nvlog(&missing));
    assert!(message.contains("is not usable"), "{message}");
    assert!(!scratch.data().exists(), "no data directory is made");

    let taken = device(&scratch).join("nvlog");
    std::fs::write(&taken, b"someone else's").expect("written");
    let message = refusal(&scratch, &with_nvlog(&taken));
    assert!(message.contains("exists"), "{message}");
    assert_eq!(std::fs::read(&taken).expect("readable"), b"someone else's");
    assert!(!scratch.data().exists(), "no data directory is made");
}

#[test]
fn a_data_directory_with_its_own_nvlog_does_not_take_another() {
    let scratch = Scratch::new();
    serve_with(&scratch, &TEST_SIZES).stop();
    let nvlog = device(&scratch).join("nvlog");
    let message = refusal(&scratch, &with_nvlog(&nvlog));
    assert!(message.contains("start without --nvlog"), "{message}");
    assert!(!nvlog.exists());
}
