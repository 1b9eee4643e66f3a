use super::*;

const OLTP: &str = "\
; an OLTP-like job, after device-models.md §3.2
[global]
ioengine=libaio
direct=1
time_based
runtime=5m
ramp_time=30
group_reporting
filename=/dev/sdX

[oltp-8k-70r]
rw=randrw
rwmixread=70
bs=8k
iodepth=16
numjobs=4
size=10g
offset=1g
";

#[test]
fn a_job_file_compiles_to_its_workload() {
    let job = FioJob::parse(OLTP).unwrap();
    assert_eq!(job.name, "oltp-8k-70r");
    let workload = job.workload().unwrap();
    assert_eq!(workload.lines.len(), 1);
    let line = workload.lines[0];
    assert_eq!(
        (
            line.size_bytes,
            line.percent,
            line.read_percent,
            line.random_percent,
            line.align_bytes
        ),
        (8192, 100, 70, 100, 8192)
    );
    assert_eq!((workload.workers, workload.outstanding_per_worker), (4, 16));
    assert_eq!(
        workload.region,
        Region {
            offset_bytes: 1 << 30,
            length_bytes: Some(10 << 30),
            ..Region::default()
        }
    );
    assert_eq!(workload.timing.segment, Duration::from_secs(300));
    assert_eq!(workload.timing.ramp, Duration::from_secs(30));
    assert_eq!(workload.distribution, Distribution::Uniform);
}

#[test]
fn bssplit_gives_the_size_mix_and_blank_shares_split_the_rest() {
    let text = "[j]\nrw=randread\nbssplit=4k/60:64k/40\nruntime=10\n";
    let workload = FioJob::parse(text).unwrap().workload().unwrap();
    let mix: Vec<(u64, u32)> = workload
        .lines
        .iter()
        .map(|l| (l.size_bytes, l.percent))
        .collect();
    assert_eq!(mix, vec![(4096, 60), (65536, 40)]);
    assert!(
        workload.lines.iter().all(|l| l.align_bytes == 4096),
        "aligned to the smallest bs"
    );
    assert_eq!(
        parse_bssplit("4k/50:8k/:16k/").unwrap(),
        vec![(4096, 50), (8192, 25), (16384, 25)]
    );
    assert_eq!(
        parse_bssplit("1k/:2k/:4k/").unwrap(),
        vec![(1024, 34), (2048, 33), (4096, 33)]
    );
    assert!(matches!(
        parse_bssplit("4k/60:8k/30"),
        Err(FioError::Value { .. })
    ));
    assert!(matches!(
        parse_bssplit("4k/60,8k/100"),
        Err(FioError::Value { .. })
    ));
}

#[test]
fn directions_and_mixes() {
    let direction = |body: &str| {
        let text = format!("[j]\nruntime=1\n{body}\n");
        let line = FioJob::parse(&text).unwrap().workload().unwrap().lines[0];
        (line.read_percent, line.random_percent)
    };
    assert_eq!(direction("rw=read"), (100, 0));
    assert_eq!(direction("rw=write"), (0, 0));
    assert_eq!(direction("rw=randwrite"), (0, 100));
    assert_eq!(direction("readwrite=readwrite"), (50, 0));
    let aliased = "[global]\nrw=read\n[j]\nreadwrite=randwrite\nruntime=1\n";
    let line = FioJob::parse(aliased).unwrap().workload().unwrap().lines[0];
    assert_eq!(
        (line.read_percent, line.random_percent),
        (0, 100),
        "the job's alias wins over [global]"
    );
    assert_eq!(direction("rw=randrw\nrwmixwrite=30"), (70, 100));
    assert_eq!(direction("rw=randread\npercentage_random=25"), (100, 25));
    assert_eq!(
        direction("rw=randread\nrandom_distribution=zipf:1.2"),
        (100, 100)
    );
}

#[test]
fn sizes_and_times_follow_fio() {
    assert_eq!(parse_size("4k"), Ok(4096));
    assert_eq!(parse_size("64KB"), Ok(65536));
    assert_eq!(parse_size("1g"), Ok(1 << 30));
    assert_eq!(parse_size("512"), Ok(512));
    assert!(parse_size("4KiB").unwrap_err().contains("powers of 1000"));
    assert!(parse_size("50%").is_err());
    assert!(parse_size("1.5g").is_err());
    assert_eq!(parse_time("90"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_time("20m"), Ok(Duration::from_secs(1200)));
    assert_eq!(parse_time("250ms"), Ok(Duration::from_millis(250)));
    assert!(parse_time("1w").is_err());
}

#[test]
fn what_the_lab_cannot_honour_is_refused_by_name() {
    let refuse = |body: &str| {
        let text = format!("[j]\nruntime=1\n{body}\n");
        FioJob::parse(&text)
            .and_then(|job| job.workload())
            .unwrap_err()
    };
    let value_of = |error: FioError| match error {
        FioError::Value { option, .. } => option,
        other => panic!("refused for another reason: {other}"),
    };
    assert_eq!(
        value_of(refuse("random_distribution=pareto:0.9")),
        "random_distribution"
    );
    assert_eq!(
        value_of(refuse("random_distribution=zoned:60/10:40/90")),
        "random_distribution"
    );
    assert_eq!(value_of(refuse("rw=trim")), "rw");
    assert_eq!(value_of(refuse("rw=write:4k")), "rw");
    assert_eq!(value_of(refuse("bs=4k,8k")), "bs");
    assert_eq!(value_of(refuse("size=50%")), "size");
    assert_eq!(value_of(refuse("direct=0")), "direct");
    assert_eq!(value_of(refuse("iodepth=0")), "iodepth");
    assert_eq!(
        value_of(refuse("rwmixread=70\nrwmixwrite=70\nrw=rw")),
        "rwmixread"
    );
    assert!(
        matches!(refuse("verify=crc32c"), FioError::Unsupported { option } if option == "verify")
    );
    assert!(matches!(refuse("bs=3000000000"), FioError::Workload(_)));
}

#[test]
fn the_file_must_hold_one_job_and_well_formed_lines() {
    assert_eq!(
        FioJob::parse("[global]\nbs=4k\n"),
        Err(FioError::JobCount { found: 0 })
    );
    assert_eq!(
        FioJob::parse("[a]\n[b]\n"),
        Err(FioError::JobCount { found: 2 })
    );
    assert!(matches!(
        FioJob::parse("bs=4k\n[a]\n"),
        Err(FioError::Orphan { line: 1, .. })
    ));
    assert!(matches!(
        FioJob::parse("[a]\nbs 4k = 2\n"),
        Err(FioError::Syntax { line: 2, .. })
    ));
    let missing = FioJob::parse("[a]\nrw=read\n").unwrap().workload();
    assert!(matches!(missing, Err(FioError::Missing { option, .. }) if option == "runtime"));
    let named = FioJob::parse("[a]\nname=real\nruntime=1\n").unwrap();
    assert_eq!(named.name, "real");
}

#[test]
fn rate_iops_with_a_poisson_process_is_an_offered_load_per_job() {
    let workload = |body: &str| {
        let text = format!("[j]\nruntime=1\nnumjobs=4\n{body}\n");
        FioJob::parse(&text).and_then(|job| job.workload())
    };
    let open = workload("rate_iops=250\nrate_process=poisson").unwrap();
    assert_eq!(
        open.offered_iops,
        Some(1000),
        "250 a second for each of 4 jobs"
    );
    assert_eq!(workload("").unwrap().offered_iops, None);
    let option_of = |error: FioError| match error {
        FioError::Value { option, .. } | FioError::Missing { option, .. } => option,
        other => panic!("refused for another reason: {other}"),
    };
    let refused = |body: &str| option_of(workload(body).unwrap_err());
    assert_eq!(refused("rate_iops=250"), "rate_process");
    assert_eq!(
        refused("rate_iops=250\nrate_process=linear"),
        "rate_process"
    );
    assert_eq!(refused("rate_process=poisson"), "rate_process");
    assert_eq!(
        refused("rate_iops=500,200\nrate_process=poisson"),
        "rate_iops"
    );
    assert_eq!(refused("rate_iops=0\nrate_process=poisson"), "rate_iops");
    assert_eq!(
        refused("rate_iops=2000000000\nrate_process=poisson"),
        "rate_iops"
    );
}
