//! Flash Pool in the server: `aggr options NAME hybrid_enabled`, SSD RAID
//! groups added with `aggr add -T SSD` (refused without the option; the
//! option then stays on), shown by `aggr status` and counted outside the
//! aggregate's size by `df -A`; small random overwrites land in the write
//! cache (`stats show wafl_hya_per_aggr`, the metrics, the SSD disks'
//! counters in `sysstat` and `statit`) and read back; and the write cache
//! survives a SIGKILL, its blocks and every byte of the LUN with it.

mod serve_harness;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serve_harness::load::{aggregate, config, refused};
use serve_harness::{NbdClient, Scratch, Served, TEST_SIZES, ok, serve, serve_with, wafer};
use wafer_server::admin::{AdminReply, AdminRequest, FlashPoolStats};

/// The LUN region the tests write: 16 MiB at the start of `vol0/lun0`.
const REGION: usize = 16 << 20;
/// Sequential first writes of the region, each above the write cache's
/// 16 KiB limit.
const FIRST_WRITE: usize = 64 << 10;
/// The random overwrites: 4 KiB each.
const OVERWRITE: usize = 4096;
const OVERWRITES: usize = 600;

/// Aggregate `name`'s total bytes, as `df -A` reports them.
fn total_bytes(server: &Served, name: &str) -> u64 {
    match server.admin_ok(AdminRequest::DfAggregates) {
        AdminReply::AggregateSpaces(all) => {
            let aggr = all.iter().find(|a| a.aggregate == name).expect("listed");
            aggr.total_bytes
        }
        other => panic!("df -A answered {other:?}"),
    }
}

/// The total kbytes of `df -A`'s aggr0 row.
fn df_total(data: &Path) -> String {
    let df = ok(data, &["df", "-A"]);
    df.lines()
        .find(|l| l.starts_with("aggr0 "))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("an aggr0 row in {df}"))
        .to_string()
}

fn disk_files(data: &Path) -> usize {
    std::fs::read_dir(data)
        .expect("listable")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".img"))
        })
        .count()
}

/// `stats show wafl_hya_per_aggr --json`, through the CLI: aggr0's stats.
fn hya(data: &Path) -> FlashPoolStats {
    let json = ok(data, &["stats", "show", "wafl_hya_per_aggr", "--json"]);
    let reply: AdminReply = serde_json::from_str(&json).expect("the reply");
    let AdminReply::WaflHyaPerAggr(pools) = reply else {
        panic!("stats show answered {json}");
    };
    let pool = pools.into_iter().find(|p| p.aggregate == "aggr0");
    pool.unwrap_or_else(|| panic!("aggr0 is listed: {json}"))
}

/// Makes aggr0 a Flash Pool: hybrid_enabled on, three 32 MiB SSDs in a
/// RAID-4 group. Returns the SSD disks' names.
fn make_flash_pool(data: &Path) -> Vec<String> {
    assert_eq!(
        ok(data, &["aggr", "options", "aggr0", "hybrid_enabled", "on"]),
        ""
    );
    let added = ok(
        data,
        &["aggr", "add", "aggr0", "-T", "SSD", "-t", "raid4", "3@32m"],
    );
    assert!(
        added.contains("Addition of 3 disks to the aggregate has completed."),
        "{added}"
    );
    let config = config(data);
    let groups = aggregate(&config, "aggr0")["groups"]
        .as_array()
        .expect("groups")
        .clone();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert_eq!(groups[1]["tier"].as_str(), Some("ssd"), "{groups:?}");
    assert_eq!(groups[1]["raid_type"].as_str(), Some("raid4"));
    assert_eq!(groups[1]["blocks_per_disk"].as_integer(), Some(8192));
    assert!(groups[0].get("tier").is_none(), "HDD is the default");
    groups[1]["disks"]
        .as_array()
        .expect("disks")
        .iter()
        .map(|d| d.as_str().expect("a name").to_string())
        .collect()
}

/// The region's first writes, sequential, of generation 1; then a CP
/// commits them, so that the overwrites find blocks that exist.
fn write_region(server: &Served) -> Vec<u8> {
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    let mut image = vec![0u8; REGION];
    for n in 0..REGION / FIRST_WRITE {
        let data = serve_harness::pattern(1, n as u64, FIRST_WRITE);
        let at = n * FIRST_WRITE;
        assert_eq!(client.write(at as u64, &data), 0, "first write {n}");
        image[at..at + FIRST_WRITE].copy_from_slice(&data);
    }
    commit_everything(server);
    image
}

/// The random overwrites of the region, each 4 KiB at a 4 KiB boundary
/// chosen by a fixed sequence, applied to `image` too.
fn overwrite_region(server: &Served, image: &mut [u8]) {
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for n in 0..OVERWRITES {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let at = (state % (REGION / OVERWRITE) as u64) as usize * OVERWRITE;
        let data = serve_harness::pattern(2, n as u64, OVERWRITE);
        assert_eq!(client.write(at as u64, &data), 0, "overwrite {n}");
        image[at..at + OVERWRITE].copy_from_slice(&data);
    }
}

/// The region reads back as `image`.
fn check_region(server: &Served, image: &[u8]) {
    let mut client = NbdClient::connect(server.socket(), "vol0/lun0");
    for (n, part) in image.chunks(1 << 20).enumerate() {
        let read = client
            .read((n << 20) as u64, part.len() as u32)
            .expect("readable");
        assert!(read == part, "MiB {n} of the region differs");
    }
}

/// Every write acknowledged so far is in a committed CP: setting
/// `hybrid_enabled` is answered once a flush's CP has recorded it, and a
/// flush waits for every earlier write (NBD's FLUSH is answered at once, the
/// NVLog making writes durable).
fn commit_everything(server: &Served) {
    let before = server.sysstat().committed_cp;
    assert_eq!(
        ok(
            &server.data,
            &["aggr", "options", "aggr0", "hybrid_enabled", "on"]
        ),
        ""
    );
    assert!(server.sysstat().committed_cp > before, "a CP committed");
}

/// One metrics scrape's body, which `promtool check metrics` accepts.
fn scrape(server: &Served) -> String {
    let url = server.metrics_url();
    let address = url
        .strip_prefix("http://")
        .and_then(|a| a.strip_suffix("/metrics"))
        .expect("an http URL");
    let mut stream = std::net::TcpStream::connect(address).expect("the metrics port");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: wafer\r\n\r\n")
        .expect("sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("an answer");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .expect("a head and a body");
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (scripts/test installs Debian's prometheus)");
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(body.as_bytes()).expect("sent");
    drop(stdin);
    let output = child.wait_with_output().expect("promtool ran");
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    body
}

#[test]
fn ssd_groups_need_hybrid_enabled_which_then_stays_on_and_add_no_capacity() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let server = serve(&scratch);
    let files = disk_files(&data);
    let refusal = refused(&data, &["aggr", "add", "aggr0", "-T", "SSD", "3@32m"]);
    assert!(
        refusal.contains("hybrid_enabled is on (aggr options aggr0 hybrid_enabled on)"),
        "{refusal}"
    );
    assert_eq!(disk_files(&data), files, "a refused addition makes no file");
    let options = ok(&data, &["aggr", "options", "aggr0"]);
    assert!(options.contains("hybrid_enabled=off"), "{options}");
    let wrong = refused(
        &data,
        &["aggr", "options", "aggr0", "hybrid_enabled", "maybe"],
    );
    assert!(wrong.contains("on or off"), "{wrong}");
    let status = ok(&data, &["aggr", "status"]);
    assert!(!status.contains("hybrid"), "{status}");

    let before = total_bytes(&server, "aggr0");
    let df_before = df_total(&data);
    let ssds = make_flash_pool(&data);
    assert_eq!(disk_files(&data), files + 3);
    assert_eq!(
        total_bytes(&server, "aggr0"),
        before,
        "SSDs add no capacity"
    );
    assert_eq!(df_total(&data), df_before);

    let options = ok(&data, &["aggr", "options", "aggr0"]);
    assert!(options.contains("hybrid_enabled=on"), "{options}");
    let status = ok(&data, &["aggr", "status"]);
    assert!(
        status.contains("hybrid ") && status.contains("hybrid_enabled=on"),
        "{status}"
    );
    let raid = ok(&data, &["aggr", "status", "-r"]);
    assert!(
        raid.contains("RAID group /aggr0/plex0/rg1 (normal)"),
        "{raid}"
    );
    for ssd in &ssds {
        let row = raid
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(ssd.as_str()))
            .unwrap_or_else(|| panic!("{ssd} listed:\n{raid}"));
        assert!(row.contains(" SSD "), "{row}");
    }
    let hdd = raid
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some("disk3"))
        .expect("disk3 listed");
    assert!(hdd.contains(" FILE ") && !hdd.contains("SSD"), "{hdd}");
    assert_eq!(ok(&data, &["sysconfig", "-r"]), raid);

    let off = refused(
        &data,
        &["aggr", "options", "aggr0", "hybrid_enabled", "off"],
    );
    assert!(
        off.contains("hybrid_enabled cannot be turned off") && off.contains("SSD RAID groups"),
        "{off}"
    );
    // HDD disks added now make a new HDD group; they do not join rg1.
    let joined = refused(&data, &["aggr", "add", "aggr0", "-g", "rg1", "1"]);
    assert!(joined.contains("SSD RAID group"), "{joined}");
    let (code, out, _) = wafer(
        &data,
        &[
            "aggr", "add", "aggr0", "-T", "SSD", "-g", "rg1", "2", "--json",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("\"kind\": \"invalid\"") && out.contains("new RAID groups"),
        "{out}"
    );
    server.stop();

    // The SSD group, the option and the capacity are on the disks.
    let server = serve(&scratch);
    assert_eq!(total_bytes(&server, "aggr0"), before);
    assert!(ok(&data, &["aggr", "status", "-r"]).contains("RAID group /aggr0/plex0/rg1"));
    assert!(ok(&data, &["aggr", "options", "aggr0"]).contains("hybrid_enabled=on"));
    server.stop();
}

#[test]
fn random_overwrites_land_in_the_write_cache_and_survive_a_kill() {
    let scratch = Scratch::new();
    let data = scratch.data();
    let mut args = TEST_SIZES.to_vec();
    args.extend(["--metrics", "127.0.0.1:0"]);
    let server = serve_with(&scratch, &args);
    let refused_stats = refused(&data, &["stats", "show", "wafl_hya_per_aggr"]);
    assert!(refused_stats.contains("no instances"), "{refused_stats}");
    assert!(!scrape(&server).contains("wafer_flash_pool"));
    let ssds = make_flash_pool(&data);
    let empty = hya(&data);
    assert_eq!(empty.ssd_total, 2 * 8192, "two data disks of 32 MiB");
    assert_eq!(empty.ssd_write_cached, 0);

    ok(&data, &["statit", "-b"]);
    let mut image = write_region(&server);
    let sequential = hya(&data);
    assert_eq!(sequential.ssd_write_cached, 0, "first writes go to HDD");
    assert_eq!(sequential.wc_write_blks_total, 0, "{sequential:?}");
    assert!(sequential.hdd_write_blks_total >= (REGION / 4096) as u64);
    overwrite_region(&server, &mut image);
    commit_everything(&server);
    let cached = hya(&data);
    assert!(cached.wc_write_blks_total > 0, "{cached:?}");
    assert!(cached.ssd_write_cached > 0, "{cached:?}");
    assert!(cached.ssd_used >= cached.ssd_write_cached, "{cached:?}");
    assert!(cached.write_blks_replaced_percent > 0, "{cached:?}");
    assert!(
        cached.ssd_write_cached <= OVERWRITES as u64,
        "only the overwrites: {cached:?}"
    );
    let text = ok(&data, &["stats", "show", "wafl_hya_per_aggr"]);
    let line = format!(
        "wafl_hya_per_aggr:aggr0:ssd_write_cached:{} blocks",
        cached.ssd_write_cached
    );
    assert!(text.contains(&line), "{line} in\n{text}");
    check_region(&server, &image);

    // The SSD disks are counted as disks: their writes in sysstat, their
    // rows in statit under rg1, and the metrics per aggregate.
    let report = server.sysstat();
    for ssd in &ssds {
        let disk = report.disks.iter().find(|d| &d.name == ssd);
        let disk = disk.unwrap_or_else(|| panic!("{ssd} in sysstat: {:?}", report.disks));
        assert!(disk.write_blocks > 0, "{disk:?}");
    }
    let statit = ok(&data, &["statit", "-e"]);
    let rg1 = statit.find("/aggr0/plex0/rg1:").expect("rg1 in statit");
    for ssd in &ssds {
        assert!(statit[rg1..].contains(ssd.as_str()), "{ssd} in\n{statit}");
    }
    let body = scrape(&server);
    let metric = format!(
        "wafer_flash_pool_write_cached_blocks{{aggregate=\"aggr0\"}} {}",
        hya(&data).ssd_write_cached
    );
    assert!(body.lines().any(|l| l == metric), "{metric} in\n{body}");

    // Every overwrite is in a committed CP and reads dirty nothing: the
    // cache as it is now is what the disks hold.
    let before_kill = hya(&data).ssd_write_cached;
    server.kill();
    let server = serve(&scratch);
    let after = hya(&data);
    assert_eq!(after.ssd_write_cached, before_kill, "{after:?}");
    assert_eq!(after.ssd_total, 2 * 8192);
    check_region(&server, &image);
    // The cache was cold after the start: the overwritten blocks came from
    // the SSDs.
    let read = hya(&data);
    assert!(read.read_ops_replaced > 0, "reads came from SSD: {read:?}");
    assert!(read.hdd_read_blks > 0, "the rest from HDD: {read:?}");
    assert!(read.read_ops_replaced_percent > 0, "{read:?}");
    server.stop();
}
