use super::*;

const SMALL: &str = r#"
name = "small"

[run]
seed = 7
segments = 3
segment_s = 10

[workload]
kind = "iometer"
outstanding_ios = 8
test_file_gib = 1
lines = [
  { size_kib = 4, percent = 70, read_percent = 100, random_percent = 100 },
  { size_kib = 64, percent = 30, read_percent = 0, random_percent = 0, align_kib = 64 },
]

[[array]]
name = "filer"
kind = "wafer"
drive = "fc15k-144g"
raid_type = "raid_dp"
raid_size = 16
disks = 20
volume_gib = 200
lun_gib = 100

[[array]]
name = "raid5"
kind = "in-place"
drive = "fc15k-144g"
disks = 5
stripe_unit_kib = 64
lun_gib = 100
outstanding_ios = 12
"#;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(text, &Catalog::builtin().unwrap())
}

/// The error from `SMALL` with `from` replaced by `to`.
fn error_with(from: &str, to: &str) -> ScenarioError {
    assert!(SMALL.contains(from), "the test edits `{from}`");
    parse(&SMALL.replacen(from, to, 1)).unwrap_err()
}

/// The field an error names.
fn field(error: ScenarioError) -> String {
    match error {
        ScenarioError::Missing { field }
        | ScenarioError::Unknown { field }
        | ScenarioError::Invalid { field, .. } => field,
        ScenarioError::Syntax { line, message } => panic!("syntax error, line {line}: {message}"),
    }
}

#[test]
fn a_scenario_parses_into_specs_and_workloads() {
    let scenario = parse(SMALL).unwrap();
    assert_eq!(scenario.run.seed, 7);
    assert_eq!(scenario.run.sysstat_interval, SYSSTAT_INTERVAL_DEFAULT);
    let timing = scenario.workload.timing;
    assert_eq!(
        (timing.segments, timing.segment, timing.ramp),
        (3, Duration::from_secs(10), Duration(0))
    );
    assert_eq!(
        scenario.workload.lines[0].align_bytes, 512,
        "absent align is one sector"
    );
    assert_eq!(scenario.workload.lines[1].align_bytes, 65536);
    assert!(scenario.workload.prepare.fill);
    let ArraySpec::Wafer(wafer) = &scenario.arrays[0].spec else {
        panic!("the first array is wafer");
    };
    assert_eq!(wafer.aggregates[0].raid_type, RaidType::RaidDp);
    assert_eq!(wafer.aggregates[0].group_sizes(), vec![16, 4]);
    assert_eq!(wafer.cache_mib, None, "absent: the engine's default");
    assert_eq!(wafer.controller, None, "absent: an infinitely fast one");
    let ArraySpec::InPlace(eva) = &scenario.arrays[1].spec else {
        panic!("the second array is in place");
    };
    assert_eq!(
        (eva.stripe_unit_bytes, eva.stripe_width, eva.cache),
        (65536, None, None)
    );
    let depths: Vec<u32> = scenario
        .workloads()
        .iter()
        .map(|w| w.outstanding_per_worker)
        .collect();
    assert_eq!(depths, vec![8, 12]);
}

#[test]
fn an_array_names_its_controller_from_the_catalog() {
    let text = SMALL.replace("disks = 5", "disks = 5\ncontroller = \"eva4400\"");
    let scenario = parse(&text).unwrap();
    let ArraySpec::InPlace(eva) = &scenario.arrays[1].spec else {
        panic!("the second array is in place");
    };
    let builtin = crate::controller::ControllerCatalog::builtin();
    assert_eq!(eva.controller.as_ref(), builtin.get("eva4400"));
    let error = error_with("disks = 5", "disks = 5\ncontroller = \"eva8000\"");
    assert_eq!(field(error.clone()), "array[1].controller");
    assert!(error.to_string().contains("eva4400, fas2050"), "{error}");
}

#[test]
fn errors_name_the_field() {
    assert_eq!(field(error_with("seed = 7\n", "")), "run.seed");
    assert_eq!(
        field(error_with("segment_s = 10", "segment_seconds = 10")),
        "run.segment_seconds"
    );
    assert_eq!(
        field(error_with("disks = 5", "disks = \"five\"")),
        "array[1].disks"
    );
    assert_eq!(
        field(error_with("disks = 5", "disks = 2")),
        "array[1].disks"
    );
    assert_eq!(
        field(error_with("disks = 5", "disks = 5\nstripe_width = 5")),
        "array[1].stripe_width"
    );
    assert_eq!(
        field(error_with(
            "lun_gib = 100\noutstanding",
            "lun_gib = 900\noutstanding"
        )),
        "array[1].lun_gib"
    );
    assert_eq!(
        field(error_with(
            "stripe_unit_kib = 64",
            "stripe_unit_kib = 64\nstripe_unit_bytes = 65536"
        )),
        "array[1].stripe_unit_kib"
    );
    assert_eq!(
        field(error_with(
            "stripe_unit_kib = 64",
            "stripe_unit_bytes = 1000"
        )),
        "array[1].stripe_unit_bytes"
    );
    assert_eq!(
        field(error_with(
            "lun_gib = 100\n",
            "lun_gib = 100\ncache_mib = 0\n"
        )),
        "array[0].cache_mib"
    );
    assert_eq!(
        field(error_with("raid_size = 16", "raid_size = 30")),
        "array[0].raid_size"
    );
    assert_eq!(
        field(error_with("disks = 20", "disks = 18")),
        "array[0].disks"
    );
    assert_eq!(
        field(error_with("volume_gib = 200", "volume_gib = 90")),
        "array[0].lun_gib"
    );
    assert_eq!(
        field(error_with(
            "raid_type = \"raid_dp\"",
            "raid_type = \"raid6\""
        )),
        "array[0].raid_type"
    );
    assert_eq!(
        field(error_with(
            "drive = \"fc15k-144g\"",
            "drive = \"nvram-512m\""
        )),
        "array[0].drive"
    );
    assert_eq!(
        field(error_with("kind = \"in-place\"", "kind = \"eva\"")),
        "array[1].kind"
    );
    assert_eq!(
        field(error_with("name = \"raid5\"", "name = \"filer\"")),
        "array[1].name"
    );
    assert_eq!(
        field(error_with("read_percent = 0,", "read_percent = 101,")),
        "workload.lines[1].read_percent"
    );
    assert_eq!(
        field(error_with("percent = 30,", "percent = 20,")),
        "workload.lines"
    );
    assert_eq!(
        field(error_with("percent = 30,", "pct = 30,")),
        "workload.lines[1].percent"
    );
    assert_eq!(
        field(error_with("outstanding_ios = 8\n", "")),
        "workload.outstanding_ios"
    );
    assert_eq!(
        field(error_with("test_file_gib = 1", "test_file_gib = -1")),
        "workload.test_file_gib"
    );
    assert_eq!(
        field(error_with("kind = \"iometer\"", "kind = \"vdbench\"")),
        "workload.kind"
    );
}

#[test]
fn syntax_errors_give_the_line() {
    match error_with("disks = 5", "disks = = 5") {
        ScenarioError::Syntax { line, .. } => {
            let expected = SMALL[..SMALL.find("disks = 5").unwrap()]
                .matches('\n')
                .count()
                + 1;
            assert_eq!(line, expected);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn fio_workloads_inline_or_as_a_job_file() {
    let job = "[workload]\nkind = \"fio\"\njob = \"\"\"\n[j]\nrw=randrw\nrwmixread=70\nbs=8k\niodepth=4\nruntime=30\n\"\"\"\n";
    let with_job = SMALL.replace(
        &SMALL[SMALL.find("[workload]").unwrap()..SMALL.find("[[array]]").unwrap()],
        job,
    );
    let scenario = parse(&with_job).unwrap();
    assert_eq!(scenario.workload.lines[0].read_percent, 70);
    assert_eq!(
        scenario.workload.timing.segment,
        Duration::from_secs(10),
        "[run] overrides runtime"
    );
    assert!(!scenario.workload.prepare.fill);
    let inline = "[workload]\nkind = \"fio\"\n[workload.options]\nrw = \"randread\"\nbs = \"4k\"\niodepth = 16\n\n";
    let with_options = SMALL.replace(
        &SMALL[SMALL.find("[workload]").unwrap()..SMALL.find("[[array]]").unwrap()],
        inline,
    );
    let scenario = parse(&with_options).unwrap();
    assert_eq!(scenario.workload.outstanding_per_worker, 16);
    let unsupported = with_options.replace("iodepth = 16", "verify = \"crc32c\"");
    assert_eq!(
        field(parse(&unsupported).unwrap_err()),
        "workload.options.verify"
    );
    let pareto = with_options.replace("iodepth = 16", "random_distribution = \"pareto:0.9\"");
    assert_eq!(
        field(parse(&pareto).unwrap_err()),
        "workload.options.random_distribution"
    );
}

/// `SMALL` with its wafer array declared in `aggregate`, `volume` and `lun`
/// tables: two aggregates, a volume on each, the second volume two LUNs.
fn small_with_aggregates() -> String {
    let tables = r#"[[array]]
name = "filer"
kind = "wafer"

[[array.aggregate]]
name = "aggr0"
drive = "fc15k-144g"
raid_type = "raid_dp"
raid_size = 16
disks = 20

[[array.aggregate]]
name = "fast"
drive = "ssd-200g"
raid_type = "raid4"
raid_size = 4
disks = 4

[[array.volume]]
name = "vol0"
aggregate = "aggr0"
size_gib = 200

[[array.volume]]
name = "vol1"
aggregate = "fast"
size_gib = 100

[[array.lun]]
name = "lun0"
volume = "vol0"
size_gib = 100

[[array.lun]]
name = "lun0"
volume = "vol1"
size_gib = 40

[[array.lun]]
name = "lun1"
volume = "vol1"
size_gib = 50
"#;
    let start = SMALL.find("[[array]]\nname = \"filer\"").unwrap();
    let end = SMALL.find("[[array]]\nname = \"raid5\"").unwrap();
    format!("{}{tables}\n{}", &SMALL[..start], &SMALL[end..])
}

#[test]
fn a_wafer_array_may_declare_aggregates_volumes_and_luns() {
    let scenario = parse(&small_with_aggregates()).unwrap();
    let ArraySpec::Wafer(wafer) = &scenario.arrays[0].spec else {
        panic!("the first array is wafer");
    };
    let aggregates: Vec<(&str, &str, u32)> = (wafer.aggregates.iter())
        .map(|a| (a.name.as_str(), a.drive.as_str(), a.disks))
        .collect();
    assert_eq!(
        aggregates,
        [("aggr0", "fc15k-144g", 20), ("fast", "ssd-200g", 4)]
    );
    let volumes: Vec<(&str, usize)> = (wafer.volumes.iter())
        .map(|v| (v.name.as_str(), v.aggregate))
        .collect();
    assert_eq!(volumes, [("vol0", 0), ("vol1", 1)]);
    let luns: Vec<(&str, usize, u64)> = (wafer.luns.iter())
        .map(|l| (l.name.as_str(), l.volume, l.size_bytes >> 30))
        .collect();
    assert_eq!(luns, [("lun0", 0, 100), ("lun0", 1, 40), ("lun1", 1, 50)]);
    assert_eq!(wafer.lun_bytes(), 190 << 30, "the LUNs end to end");
}

#[test]
fn a_scenario_without_tables_declares_one_aggregate_volume_and_lun() {
    let scenario = parse(SMALL).unwrap();
    let ArraySpec::Wafer(wafer) = &scenario.arrays[0].spec else {
        panic!("the first array is wafer");
    };
    let [aggr] = &wafer.aggregates[..] else {
        panic!("one aggregate");
    };
    assert_eq!((aggr.name.as_str(), aggr.disks), ("aggr0", 20));
    assert_eq!(
        (wafer.volumes[0].name.as_str(), wafer.luns[0].name.as_str()),
        ("vol0", "lun0")
    );
}

#[test]
fn aggregate_volume_and_lun_tables_are_checked_by_field() {
    let text = small_with_aggregates();
    let error = |from: &str, to: &str| {
        assert!(text.contains(from), "the test edits `{from}`");
        field(parse(&text.replacen(from, to, 1)).unwrap_err())
    };
    assert_eq!(
        error("kind = \"wafer\"\n", "kind = \"wafer\"\ndisks = 4\n"),
        "array[0].disks",
        "one aggregate's keys and aggregate tables, not both"
    );
    assert_eq!(
        error("aggregate = \"fast\"", "aggregate = \"slow\""),
        "array[0].volume[1].aggregate"
    );
    assert_eq!(
        error("name = \"fast\"", "name = \"aggr0\""),
        "array[0].aggregate[1].name"
    );
    assert_eq!(
        error("raid_size = 4", "raid_size = 40"),
        "array[0].aggregate[1].raid_size"
    );
    assert_eq!(
        error(
            "size_gib = 100\n\n[[array.lun]]",
            "size_gib = 1000\n\n[[array.lun]]"
        ),
        "array[0].volume[1].size_gib",
        "the SSD aggregate's 3 data disks hold under 1000 GiB"
    );
    assert_eq!(
        error("size_gib = 50", "size_gib = 61"),
        "array[0].lun[2].size_gib",
        "vol1's LUNs exceed it"
    );
    assert_eq!(
        error("volume = \"vol1\"\nsize_gib = 40", "size_gib = 40"),
        "array[0].lun[1].volume",
        "with two volumes a LUN names its own"
    );
    assert_eq!(
        error(
            "name = \"filer\"\nkind = \"wafer\"\n",
            "name = \"filer\"\nkind = \"wafer\"\nlun_gib = 1\n"
        ),
        "array[0].lun_gib"
    );
}

#[test]
fn workers_may_each_have_a_range_or_share_every_luns_active_part() {
    let staggered = SMALL.replace(
        "outstanding_ios = 8\n",
        "outstanding_ios = 8\nworkers = 4\nworker_offset_increment_gib = 1\n",
    );
    let region = parse(&staggered).unwrap().workload.region;
    assert_eq!(region.offset_increment_bytes, 1 << 30);
    assert_eq!(region.lun_active_percent, None);

    let active =
        small_with_aggregates().replace("test_file_gib = 1\n", "lun_active_percent = 25\n");
    let region = parse(&active).unwrap().workload.region;
    assert_eq!(region.lun_active_percent, Some(25));
    let both = small_with_aggregates().replace(
        "test_file_gib = 1\n",
        "test_file_gib = 1\nlun_active_percent = 25\n",
    );
    assert_eq!(
        field(parse(&both).unwrap_err()),
        "workload.lun_active_percent"
    );
    let over = active.replace("lun_active_percent = 25", "lun_active_percent = 101");
    assert_eq!(
        field(parse(&over).unwrap_err()),
        "workload.lun_active_percent"
    );

    let fio = "[workload]\nkind = \"fio\"\nlun_active_percent = 50\njob = \"\"\"\n[j]\nrw=read\nbs=1m\nnumjobs=2\n\"\"\"\n";
    let with_fio = SMALL.replace(
        &SMALL[SMALL.find("[workload]").unwrap()..SMALL.find("[[array]]").unwrap()],
        fio,
    );
    assert_eq!(
        parse(&with_fio).unwrap().workload.region.lun_active_percent,
        Some(50)
    );
    let increment = with_fio
        .replace("lun_active_percent = 50\n", "")
        .replace("numjobs=2\n", "numjobs=2\nsize=1g\noffset_increment=1g\n");
    let region = parse(&increment).unwrap().workload.region;
    assert_eq!(
        (region.length_bytes, region.offset_increment_bytes),
        (Some(1 << 30), 1 << 30)
    );
}

#[test]
fn a_snapshot_schedule_and_a_reserved_lun_pool_parse() {
    let text = SMALL
        .replacen("segment_s = 10", "segment_s = 10\nsnapshot_every_s = 5", 1)
        .replacen(
            "lun_gib = 100\noutstanding_ios = 12",
            "lun_gib = 100\noutstanding_ios = 12\nreserved_lun_pool_gib = 20\ncow_chunk_kib = 128",
            1,
        );
    let scenario = parse(&text).unwrap();
    assert_eq!(scenario.run.snapshot_every, Some(Duration::from_secs(5)));
    let ArraySpec::InPlace(spec) = &scenario.arrays[1].spec else {
        panic!("the second array is in place");
    };
    let pool = spec.snapshots.expect("a reserved LUN pool");
    assert_eq!((pool.pool_bytes, pool.chunk_bytes), (20 << 30, 128 << 10));
    let default_chunk = text.replacen("\ncow_chunk_kib = 128", "", 1);
    let ArraySpec::InPlace(spec) = &parse(&default_chunk).unwrap().arrays[1].spec else {
        panic!("the second array is in place");
    };
    assert_eq!(spec.snapshots.unwrap().chunk_bytes, 64 << 10);
}

#[test]
fn snapshot_schedules_the_arrays_cannot_keep_are_refused_by_field() {
    let scheduled = |every: &str, pool: &str| {
        SMALL
            .replacen("segment_s = 10", &format!("segment_s = 10\n{every}"), 1)
            .replacen(
                "lun_gib = 100\noutstanding_ios = 12",
                &format!("lun_gib = 100\noutstanding_ios = 12\n{pool}"),
                1,
            )
    };
    let refused = |every: &str, pool: &str| field(parse(&scheduled(every, pool)).unwrap_err());
    let pool = "reserved_lun_pool_gib = 20";
    // The in-place array copies on first write only into a reserved pool.
    assert_eq!(
        refused("snapshot_every_s = 5", ""),
        "array[1].reserved_lun_pool_gib"
    );
    // 30 s of run, one every 3 s: 9 snapshots, over SnapView's 8 per LUN.
    assert_eq!(
        refused("snapshot_every_s = 3", pool),
        "run.snapshot_every_s"
    );
    assert!(
        parse(&scheduled("snapshot_every_s = 4", pool)).is_ok(),
        "7 snapshots fit"
    );
    assert_eq!(
        refused("snapshot_every_s = 0", pool),
        "run.snapshot_every_s"
    );
    assert_eq!(refused("", "cow_chunk_kib = 64"), "array[1].cow_chunk_kib");
    assert_eq!(
        refused("", &format!("{pool}\ncow_chunk_kib = 6")),
        "array[1].cow_chunk_kib"
    );
    assert_eq!(
        refused("", "reserved_lun_pool_kib = 32"),
        "array[1].reserved_lun_pool_kib"
    );
    // The wafer array alone: 3000 s, one every 10 s, is 299 snapshots, over
    // a volume's 255; one every 12 s is 249.
    let wafer_only = |every: &str| {
        let (filer, _) = SMALL.rsplit_once("[[array]]").unwrap();
        filer.replacen("segment_s = 10", &format!("segment_s = 1000\n{every}"), 1)
    };
    assert_eq!(
        field(parse(&wafer_only("snapshot_every_s = 10")).unwrap_err()),
        "run.snapshot_every_s"
    );
    assert!(parse(&wafer_only("snapshot_every_s = 12")).is_ok());
}

#[test]
fn an_offered_load_parses_and_a_rate_of_zero_is_refused() {
    let open = SMALL.replacen(
        "outstanding_ios = 8",
        "outstanding_ios = 8\noffered_iops = 750",
        1,
    );
    assert_eq!(parse(&open).unwrap().workload.offered_iops, Some(750));
    assert_eq!(parse(SMALL).unwrap().workload.offered_iops, None);
    let zero = error_with(
        "outstanding_ios = 8",
        "outstanding_ios = 8\noffered_iops = 0",
    );
    assert_eq!(field(zero), "workload.offered_iops");
    let negative = error_with(
        "outstanding_ios = 8",
        "outstanding_ios = 8\noffered_iops = -5",
    );
    assert_eq!(field(negative), "workload.offered_iops");
}

#[test]
fn per_minute_reports_parse_and_a_threshold_needs_them() {
    let with = |keys: &str| SMALL.replacen("segment_s = 10", &format!("segment_s = 10\n{keys}"), 1);
    let scenario = parse(&with("per_minute = true\nlatency_threshold_us = 3000")).unwrap();
    let per_minute = scenario.run.per_minute.expect("per-minute reports");
    assert_eq!(per_minute.latency_threshold, Some(Duration(3_000_000)));
    assert_eq!(
        parse(&with("per_minute = false")).unwrap().run.per_minute,
        None
    );
    let refused = |keys: &str| field(parse(&with(keys)).unwrap_err());
    assert_eq!(
        refused("latency_threshold_us = 3000"),
        "run.latency_threshold_us"
    );
    assert_eq!(
        refused("per_minute = true\nlatency_threshold_us = 0"),
        "run.latency_threshold_us"
    );
    assert_eq!(refused("per_minute = 1"), "run.per_minute");
}

#[test]
fn a_fio_rate_and_an_offered_load_are_not_both_given() {
    let fio = |extra: &str| {
        format!(
            "[run]\nseed = 1\nsegment_s = 1\n[workload]\nkind = \"fio\"\n{extra}\n\
             [workload.options]\nrw = \"randread\"\nrate_iops = 100\nrate_process = \"poisson\"\n\
             [[array]]\nname = \"r\"\nkind = \"in-place\"\ndrive = \"fc15k-144g\"\ndisks = 5\n\
             stripe_unit_kib = 64\nlun_gib = 10\n"
        )
    };
    assert_eq!(parse(&fio("")).unwrap().workload.offered_iops, Some(100));
    assert_eq!(
        field(parse(&fio("offered_iops = 50")).unwrap_err()),
        "workload.offered_iops"
    );
}

/// SMALL's wafer array alone, with `run_keys` added to `[run]`.
fn wafer_only_with(run_keys: &str) -> String {
    let (filer, _) = SMALL.rsplit_once("[[array]]").unwrap();
    filer.replacen("segment_s = 10", &format!("segment_s = 10\n{run_keys}"), 1)
}

#[test]
fn a_snap_sched_and_its_clock_start_parse() {
    let text = wafer_only_with("snap_sched = \"0 2 6@8,12,16,20\"\nclock_start = \"Sun 07:59:50\"");
    let sched = parse(&text).unwrap().run.snap_sched.expect("a snap sched");
    assert_eq!(sched.schedule.to_string(), "0 2 6@8,12,16,20");
    assert_eq!(sched.clock_start.unwrap().to_string(), "Sun 07:59:50");
    let unanchored = parse(&wafer_only_with("snap_sched = \"0 0 1\"")).unwrap();
    assert_eq!(unanchored.run.snap_sched.unwrap().clock_start, None);
    assert_eq!(parse(SMALL).unwrap().run.snap_sched, None);
}

#[test]
fn bad_snap_scheds_are_refused_by_field() {
    let refused = |run_keys: &str| parse(&wafer_only_with(run_keys)).unwrap_err().to_string();
    let bad_counts = refused("snap_sched = \"0 2\"");
    assert!(bad_counts.contains("run.snap_sched") && bad_counts.contains("three counts"));
    let bad_hour = refused("snap_sched = \"0 2 6@24\"");
    assert!(bad_hour.contains("run.snap_sched") && bad_hour.contains("hour \"24\""));
    let bad_clock = refused("snap_sched = \"0 0 1\"\nclock_start = \"Sunday 8am\"");
    assert!(bad_clock.contains("run.clock_start"), "{bad_clock}");
    let alone = refused("clock_start = \"Sun 07:59:50\"");
    assert!(
        alone.contains("run.clock_start") && alone.contains("snap_sched"),
        "{alone}"
    );
    let both = refused("snap_sched = \"0 0 1\"\nsnapshot_every_s = 5");
    assert!(
        both.contains("run.snap_sched") && both.contains("not both"),
        "{both}"
    );
    // SMALL's second array is in place: it has no volumes to schedule.
    let with_in_place = SMALL.replacen(
        "segment_s = 10",
        "segment_s = 10\nsnap_sched = \"0 0 1\"",
        1,
    );
    let in_place = parse(&with_in_place).unwrap_err().to_string();
    assert!(
        in_place.contains("run.snap_sched") && in_place.contains("`raid5` is in-place"),
        "{in_place}"
    );
}

#[test]
fn a_moving_working_set_parses_and_is_checked_by_field() {
    let with = |keys: &str| {
        SMALL.replacen(
            "outstanding_ios = 8",
            &format!("outstanding_ios = 8\n{keys}"),
            1,
        )
    };
    let scenario = parse(&with(
        "working_set_percent = 5\nworking_set_sweep_s = 43200",
    ))
    .unwrap();
    assert_eq!(
        scenario.workload.distribution,
        Distribution::Moving(MovingSet {
            percent: 5,
            share_percent: 100,
            sweep: Duration::from_secs(43_200),
        })
    );
    let shared = parse(&with(
        "working_set_percent = 5\nworking_set_sweep_s = 60\nworking_set_share_percent = 90",
    ))
    .unwrap();
    assert!(matches!(
        shared.workload.distribution,
        Distribution::Moving(MovingSet {
            share_percent: 90,
            ..
        })
    ));
    assert_eq!(
        parse(SMALL).unwrap().workload.distribution,
        Distribution::Uniform
    );
    let refused = |keys: &str| field(parse(&with(keys)).unwrap_err());
    assert_eq!(
        refused("working_set_percent = 5"),
        "workload.working_set_sweep_s"
    );
    assert_eq!(
        refused("working_set_sweep_s = 60"),
        "workload.working_set_percent"
    );
    assert_eq!(
        refused("working_set_share_percent = 60"),
        "workload.working_set_percent"
    );
    assert_eq!(
        refused("working_set_percent = 0\nworking_set_sweep_s = 60"),
        "workload.working_set_percent"
    );
    assert_eq!(
        refused("working_set_percent = 5\nworking_set_sweep_s = 0"),
        "workload.working_set_sweep_s"
    );
    assert_eq!(
        refused(
            "working_set_percent = 5\nworking_set_sweep_s = 60\nworking_set_share_percent = 101"
        ),
        "workload.working_set_share_percent"
    );
}

#[test]
fn a_moving_working_set_and_a_fio_distribution_are_not_both_given() {
    let fio = "[run]\nseed = 1\nsegment_s = 1\n[workload]\nkind = \"fio\"\n\
         working_set_percent = 5\nworking_set_sweep_s = 60\n\
         [workload.options]\nrw = \"randread\"\nrandom_distribution = \"zipf:1.1\"\n\
         [[array]]\nname = \"r\"\nkind = \"in-place\"\ndrive = \"fc15k-144g\"\ndisks = 5\n\
         stripe_unit_kib = 64\nlun_gib = 10\n";
    assert_eq!(
        field(parse(fio).unwrap_err()),
        "workload.working_set_percent"
    );
}

/// An Orion data point on SMALL's arrays, with `keys` in `[workload]`.
fn orion(keys: &str) -> String {
    let (_, arrays) = SMALL.split_once("[[array]]").unwrap();
    format!(
        "[run]\nseed = 1\n[workload]\nkind = \"orion\"\nduration_s = 5\n{keys}\n[[array]]{arrays}"
    )
}

#[test]
fn an_orion_point_parses_by_orions_option_names() {
    let text =
        orion("num_small = 8\nnum_large = 3\ntype = \"seq\"\nwrite = 30\nmatrix = \"point\"");
    let workload = parse(&text).unwrap().workload;
    assert_eq!(workload.workers, 1);
    assert_eq!(workload.depths(), [8, 4, 4, 4]);
    assert_eq!(workload.lines[0].size_bytes, 8 << 10);
    assert_eq!(workload.lines[0].read_percent, 70);
    assert_eq!(workload.timing.segment, Duration::from_secs(5));
    assert!(workload.prepare.fill);
    let large = workload.large.expect("large streams");
    assert_eq!((large.size_bytes, large.read_percent), (1 << 20, 70));
    assert!(large.sequential);
    let random = parse(&orion("num_large = 6\nsize_large_kib = 512"))
        .unwrap()
        .workload;
    assert_eq!(random.workers, 0);
    assert_eq!(random.depths(), [6]);
    assert_eq!(random.large.unwrap().size_bytes, 512 << 10);
}

#[test]
fn orion_points_are_checked_by_field() {
    let refused = |keys: &str| field(parse(&orion(keys)).unwrap_err());
    assert_eq!(
        refused("num_small = 4\nmatrix = \"row\""),
        "workload.matrix"
    );
    assert_eq!(refused("num_small = 4\ntype = \"zig\""), "workload.type");
    assert_eq!(
        refused("num_large = 4\nnum_streamIO = 2"),
        "workload.num_streamIO"
    );
    assert_eq!(refused(""), "workload.num_small");
    assert_eq!(refused("num_small = 4\nwrite = 101"), "workload.write");
    assert_eq!(
        refused("num_small = 4\nnum_large = 1\noffered_iops = 10"),
        "workload.num_large"
    );
    assert_eq!(
        refused("num_small = 4\nsimulate = \"raid0\""),
        "workload.simulate"
    );
}

#[test]
fn a_volumes_cache_policy_parses_and_a_bad_one_is_refused_by_field() {
    let with_volume = |policy: &str| {
        small_with_aggregates().replacen(
            "[[array.volume]]\nname = \"vol0\"",
            &format!("[[array.volume]]\nname = \"vol0\"\ncache = \"{policy}\""),
            1,
        )
    };
    let ArraySpec::Wafer(spec) = &parse(&with_volume("reuse")).unwrap().arrays[0].spec else {
        panic!("a wafer array");
    };
    assert_eq!(spec.volumes[0].cache_policy, CachePolicy::Reuse);
    assert_eq!(spec.volumes[1].cache_policy, CachePolicy::Default);
    assert_eq!(
        field(parse(&with_volume("lru")).unwrap_err()),
        "array[0].volume[0].cache"
    );
    let single = SMALL.replacen("lun_gib = 100", "lun_gib = 100\nvolume_cache = \"keep\"", 1);
    let ArraySpec::Wafer(spec) = &parse(&single).unwrap().arrays[0].spec else {
        panic!("a wafer array");
    };
    assert_eq!(spec.volumes[0].cache_policy, CachePolicy::Keep);
}

/// `SMALL`'s in-place array as three groups of five disks holding the
/// LUNs of `luns` (TOML), with `extra` keys.
fn grouped(luns: &str, extra: &str) -> String {
    SMALL.replacen(
        "disks = 5\nstripe_unit_kib = 64\nlun_gib = 100\noutstanding_ios = 12\n",
        &format!(
            "raid_groups = 3\ndisks_per_group = 5\nstripe_unit_kib = 64\noutstanding_ios = 12\n\
             {extra}\n{luns}\n"
        ),
        1,
    )
}

const TWO_LUNS: &str = "[[array.lun]]\nsize_gib = 40\n[[array.lun]]\nsize_gib = 60";

#[test]
fn an_in_place_array_of_groups_and_luns_parses() {
    let scenario = parse(&grouped(TWO_LUNS, "")).unwrap();
    let ArraySpec::InPlace(spec) = &scenario.arrays[1].spec else {
        panic!("the second array is in place");
    };
    assert_eq!((spec.raid_groups, spec.disks), (3, 5));
    assert_eq!(spec.luns, vec![40 << 30, 60 << 30]);
    assert_eq!(spec.placement, LunPlacement::Striped { multiplier: 4 });
    let whole = parse(&grouped(TWO_LUNS, "metalun = false")).unwrap();
    let ArraySpec::InPlace(spec) = &whole.arrays[1].spec else {
        panic!("the second array is in place");
    };
    assert_eq!(spec.placement, LunPlacement::RoundRobin);
    let wide = parse(&grouped("lun_gib = 100", "metalun_multiplier = 2")).unwrap();
    let ArraySpec::InPlace(spec) = &wide.arrays[1].spec else {
        panic!("the second array is in place");
    };
    assert_eq!(spec.placement, LunPlacement::Striped { multiplier: 2 });
    // Without the new keys, one group of `disks` and one LUN, as before.
    let ArraySpec::InPlace(spec) = &parse(SMALL).unwrap().arrays[1].spec else {
        panic!("the second array is in place");
    };
    assert_eq!((spec.raid_groups, spec.disks, spec.luns.len()), (1, 5, 1));
}

#[test]
fn ambiguous_in_place_groups_and_luns_are_refused_by_field() {
    let refused = |text: &str| field(parse(text).unwrap_err());
    assert_eq!(refused(&grouped(TWO_LUNS, "disks = 15")), "array[1].disks");
    assert_eq!(
        refused(&SMALL.replacen("disks = 5", "disks = 5\ndisks_per_group = 5", 1)),
        "array[1].disks_per_group"
    );
    assert_eq!(
        refused(&grouped(TWO_LUNS, "lun_gib = 1")),
        "array[1].lun_gib"
    );
    assert_eq!(
        refused(&grouped(
            TWO_LUNS,
            "metalun = false\nmetalun_multiplier = 2"
        )),
        "array[1].metalun_multiplier"
    );
    assert_eq!(
        refused(&grouped("[[array.lun]]\nsize_gib = 0", "")),
        "array[1].lun[0].size_gib"
    );
    assert_eq!(
        refused(&grouped(TWO_LUNS, "raid_groups = 0").replacen("raid_groups = 3\n", "", 1)),
        "array[1].raid_groups"
    );
    assert_eq!(
        refused(&grouped(TWO_LUNS, "").replacen("disks_per_group = 5", "disks_per_group = 2", 1)),
        "array[1].disks_per_group"
    );
}
