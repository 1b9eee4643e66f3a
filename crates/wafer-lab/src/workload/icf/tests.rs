use super::*;

/// An IOmeter 1.1.0 file as IOmeter writes it: two specifications, two
/// disk workers on one manager, each with one target.
const TWO_WORKERS: &str = "Version 1.1.0 
'TEST SETUP ====================================================================
'Test Description
\tmixed load
'Run Time
'\thours      minutes    seconds
\t0          20         30
'Ramp Up Time (s)
\t15
'Default Disk Workers to Spawn
\tNUMBER_OF_CPUS
'Default Network Workers to Spawn
\t0
'Record Results
\tALL
'Worker Cycling
'\tstart      step       step type
\t1          1          LINEAR
'Disk Cycling
'\tstart      step       step type
\t1          1          LINEAR
'Queue Depth Cycling
'\tstart      end        step       step type
\t1          32         2          EXPONENTIAL
'Test Type
\tNORMAL
'END test setup
'RESULTS DISPLAY ===============================================================
'Record Last Update Results,Update Frequency,Update Type
\tDISABLED,0,WHOLE_TEST
'Bar chart 1 statistic
\tTotal I/Os per Second
'END results display
'ACCESS SPECIFICATIONS =========================================================
'Access specification name,default assignment
\t4K; 70% read, random,DISK
'size,% of size,% reads,% random,delay,burst,align,reply
\t4096,100,70,100,0,1,4096,0
'Access specification name,default assignment
\tmixed,NONE
'size,% of size,% reads,% random,delay,burst,align,reply
\t512,40,100,0,0,1,0,0
\t65536,60,0,25,0,1,65536,0
'END access specifications
'MANAGER LIST ==================================================================
'Manager ID, manager name
\t1,host1
'Manager network address
\t
'Worker
\tWorker 1
'Worker type
\tDISK
'Default target settings for worker
'Number of outstanding IOs,test connection rate,transactions per connection,use fixed seed,fixed seed value
\t16,DISABLED,1,DISABLED,0
'Disk maximum size,starting sector,Data pattern
\t2097152,2048,0
'End default target settings for worker
'Assigned access specs
\tmixed
'End assigned access specs
'Target assignments
'Target
\tPHYSICALDRIVE:1
'Target type
\tDISK
'End target
'End target assignments
'End worker
'Worker
\tWorker 2
'Worker type
\tDISK
'Default target settings for worker
'Number of outstanding IOs,test connection rate,transactions per connection,use fixed seed,fixed seed value
\t16,DISABLED,1,DISABLED,0
'Disk maximum size,starting sector,Data pattern
\t2097152,2099200,0
'End default target settings for worker
'Assigned access specs
\tmixed
'End assigned access specs
'Target assignments
'Target
\tPHYSICALDRIVE:1
'Target type
\tDISK
'End target
'End target assignments
'End worker
'End manager
'END manager list
Version 1.1.0 
";

fn parse(text: &str) -> Result<IcfFile, IcfError> {
    IcfFile::parse(text)
}

/// The error from `TWO_WORKERS` with `from` replaced by `to`.
fn error_with(from: &str, to: &str) -> IcfError {
    assert!(TWO_WORKERS.contains(from), "the test edits `{from}`");
    parse(&TWO_WORKERS.replacen(from, to, 1)).unwrap_err()
}

fn line(size_bytes: u64, percent: u32, read: u32, random: u32, align: u64) -> AccessLine {
    AccessLine {
        size_bytes,
        percent,
        read_percent: read,
        random_percent: random,
        align_bytes: align,
    }
}

#[test]
fn a_whole_file_reads_as_written() {
    let file = parse(TWO_WORKERS).unwrap();
    assert_eq!(file.run_time, Some(Duration::from_secs(20 * 60 + 30)));
    assert_eq!(file.ramp_up, Some(Duration::from_secs(15)));
    let names: Vec<&str> = file.specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["4K; 70% read, random", "mixed"]);
    assert_eq!(file.specs[0].lines, [line(4096, 100, 70, 100, 4096)]);
    assert_eq!(
        file.specs[1].lines,
        [line(512, 40, 100, 0, 0), line(65536, 60, 0, 25, 65536)]
    );
    assert_eq!(file.workers.len(), 2);
    assert_eq!(
        file.workers[1],
        IcfWorker {
            name: "Worker 2".into(),
            outstanding_ios: 16,
            disk_sectors: 2_097_152,
            start_sector: 2_099_200,
            assigned: vec!["mixed".into()],
        }
    );
    assert_eq!(file.spec(None).unwrap().name, "mixed");
    assert_eq!(file.disk_workers(), Some(2));
    assert_eq!(file.outstanding_ios(), Ok(Some(16)));
    assert_eq!(file.test_file_bytes(), Ok(Some(1 << 30)));
    // Worker 2 starts 2,097,152 sectors (1 GiB) after worker 1.
    assert_eq!(file.starts_bytes(), Ok((2048 * 512, 1 << 30)));
}

#[test]
fn spaces_for_tabs_and_crlf_line_ends_read_the_same() {
    let other = TWO_WORKERS.replace('\t', "    ").replace('\n', "\r\n");
    assert_eq!(parse(&other), parse(TWO_WORKERS));
}

#[test]
fn the_scenario_may_name_the_spec() {
    let file = parse(TWO_WORKERS).unwrap();
    let spec = file.spec(Some("4K; 70% read, random")).unwrap();
    assert_eq!(spec.lines[0].read_percent, 70);
    let error = file.spec(Some("oltp")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "no access specification `oltp` in the file (it defines `4K; 70% read, random`, `mixed`)"
    );
}

#[test]
fn workers_with_different_specs_leave_the_choice_open() {
    let file = parse(&TWO_WORKERS.replacen(
        "'Assigned access specs\n\tmixed",
        "'Assigned access specs\n\t4K; 70% read, random",
        1,
    ))
    .unwrap();
    let error = file.spec(None).unwrap_err();
    assert!(
        matches!(&error, IcfError::Ambiguous { choices }
        if choices.contains("`4K; 70% read, random`, `mixed`")),
        "{error}"
    );
    assert_eq!(file.spec(Some("mixed")).unwrap().name, "mixed");
}

#[test]
fn a_file_without_workers_runs_its_only_spec() {
    let end = TWO_WORKERS.find("'MANAGER LIST").unwrap();
    let text = TWO_WORKERS[..end].replacen(
        "'Access specification name,default assignment\n\t4K; 70% read, random,DISK\n\
         'size,% of size,% reads,% random,delay,burst,align,reply\n\t4096,100,70,100,0,1,4096,0\n",
        "",
        1,
    );
    let file = parse(&text).unwrap();
    assert_eq!(file.spec(None).unwrap().name, "mixed");
    assert_eq!(file.disk_workers(), None);
    assert_eq!(file.outstanding_ios(), Ok(None));
    assert_eq!(file.test_file_bytes(), Ok(None));
    assert_eq!(file.starts_bytes(), Ok((0, 0)));
    let both = parse(&TWO_WORKERS[..end]).unwrap();
    assert!(matches!(both.spec(None), Err(IcfError::Ambiguous { .. })));
}

#[test]
fn run_time_zero_runs_until_stopped() {
    let file = parse(&TWO_WORKERS.replacen("0          20         30", "0 0 0", 1)).unwrap();
    assert_eq!(file.run_time, None);
}

#[test]
fn workers_that_differ_say_which_scenario_key_settles_it() {
    let text = TWO_WORKERS.replacen("\t16,DISABLED", "\t8,DISABLED", 1);
    let file = parse(&text).unwrap();
    let error = file.outstanding_ios().unwrap_err();
    assert_eq!(
        error.to_string(),
        "the workers' outstanding I/Os differ (8, 16); the lab runs its workers alike: set \
         `outstanding_ios` in the scenario"
    );
    let file = parse(&TWO_WORKERS.replacen("\t2097152,2048,0", "\t0,2048,0", 1)).unwrap();
    assert!(matches!(
        file.test_file_bytes(),
        Err(IcfError::WorkersDiffer {
            key: "test_file_<unit>",
            ..
        })
    ));
    let file = parse(&TWO_WORKERS.replacen("\t2097152,2099200,0", "\t2097152,0,0", 1)).unwrap();
    assert!(matches!(
        file.starts_bytes(),
        Err(IcfError::WorkersDiffer { .. })
    ));
}

#[test]
fn older_target_settings_keys_are_read() {
    let text = TWO_WORKERS
        .replace(
            "transactions per connection,use fixed seed,fixed seed value\n\t16,DISABLED,1,DISABLED,0",
            "transactions per connection\n\t4,DISABLED,1",
        )
        .replace(
            "'Disk maximum size,starting sector,Data pattern\n\t2097152,2048,0",
            "'Disk maximum size,starting sector\n\t0,0",
        )
        .replace("\t2097152,2099200,0", "\t0,0,0");
    let file = parse(&text).unwrap();
    assert_eq!(file.outstanding_ios(), Ok(Some(4)));
    assert_eq!(file.test_file_bytes(), Ok(None));
    assert_eq!(file.starts_bytes(), Ok((0, 0)));
}

#[test]
fn a_missing_end_names_the_section_and_where_it_opened() {
    let error = error_with("'END access specifications\n", "");
    assert_eq!(
        error.to_string(),
        "line 34: the access specifications section has no `'END access specifications` line"
    );
    let error = error_with("'End worker\n'End manager", "'End manager");
    assert!(
        matches!(
            error,
            IcfError::MissingEnd {
                section: "worker",
                opened: 71,
                ..
            }
        ),
        "{error}"
    );
    let error = error_with("'END manager list\nVersion 1.1.0 \n", "");
    assert!(
        matches!(
            error,
            IcfError::MissingEnd {
                section: "manager list",
                ..
            }
        ),
        "{error}"
    );
    let error = error_with("'END test setup\n", "");
    assert!(
        matches!(
            error,
            IcfError::MissingEnd {
                section: "test setup",
                opened: 2,
                ..
            }
        ),
        "{error}"
    );
    let error = error_with("'END results display\n", "'End of results\n");
    assert!(
        matches!(
            error,
            IcfError::MissingEnd {
                section: "results display",
                ..
            }
        ),
        "{error}"
    );
    let error = error_with(
        "'End assigned access specs\n'Target assignments",
        "'Target assignments",
    );
    assert!(
        matches!(
            error,
            IcfError::MissingEnd {
                section: "assigned access specs",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn the_version_comes_first() {
    let error = error_with("Version 1.1.0 \n'TEST SETUP", "'TEST SETUP");
    assert!(matches!(error, IcfError::Version { .. }), "{error}");
    assert!(matches!(parse(""), Err(IcfError::Version { .. })));
    let old = TWO_WORKERS.replacen("Version 1.1.0", "Version 2006.07.27", 1);
    assert!(parse(&old).is_ok());
}

#[test]
fn bad_numbers_are_named_with_their_line() {
    let error = error_with("\t65536,60,0,25,0,1,65536,0", "\t64k,60,0,25,0,1,65536,0");
    assert_eq!(
        error.to_string(),
        "line 43: size `64k` is not a whole number in range"
    );
    let error = error_with("\t15\n", "\tfifteen\n");
    assert!(
        matches!(
            error,
            IcfError::Number {
                field: "Ramp Up Time",
                line: 9,
                ..
            }
        ),
        "{error}"
    );
    let error = error_with("0          20         30", "0 20");
    assert!(matches!(error, IcfError::Number { line: 7, .. }), "{error}");
    let error = error_with("\t16,DISABLED,1,DISABLED,0", "\t-1,DISABLED,1,DISABLED,0");
    assert!(matches!(
        error,
        IcfError::Number {
            field: "Number of outstanding IOs",
            ..
        }
    ));
    let error = error_with("\t2097152,2048,0", "\t99999999999999999999,2048,0");
    assert!(matches!(
        error,
        IcfError::Number {
            field: "Disk maximum size",
            ..
        }
    ));
    let error = error_with("\t2097152,2048,0", "\t36028797018963968,2048,0");
    assert!(
        matches!(
            error,
            IcfError::Number {
                field: "Disk maximum size",
                ..
            }
        ),
        "{error}"
    );
    let error = error_with("\t4096,100,70,100,0,1,4096,0", "\t4096,100,70,100,0,1,4096");
    assert!(matches!(error, IcfError::Fields { found: 7, .. }));
}

#[test]
fn percentages_over_one_hundred_are_refused() {
    let error = error_with(
        "\t4096,100,70,100,0,1,4096,0",
        "\t4096,100,170,100,0,1,4096,0",
    );
    assert_eq!(error.to_string(), "line 38: % reads is 170, over 100");
    let error = error_with(
        "\t4096,100,70,100,0,1,4096,0",
        "\t4096,100,70,101,0,1,4096,0",
    );
    assert!(matches!(
        error,
        IcfError::Percent {
            field: "% random",
            value: 101,
            ..
        }
    ));
    let error = error_with("\t512,40,100,0,0,1,0,0", "\t512,50,100,0,0,1,0,0");
    assert_eq!(
        error.to_string(),
        "access specification `mixed`: its lines' % of size add up to 110, not 100"
    );
}

#[test]
fn pacing_and_network_replies_are_refused() {
    let error = error_with(
        "\t4096,100,70,100,0,1,4096,0",
        "\t4096,100,70,100,10,4,4096,0",
    );
    assert!(matches!(
        error,
        IcfError::Paced {
            delay: 10,
            burst: 4,
            line: 38
        }
    ));
    let error = error_with(
        "\t4096,100,70,100,0,1,4096,0",
        "\t4096,100,70,100,0,1,4096,512",
    );
    assert!(matches!(error, IcfError::Reply { reply: 512, .. }));
    let error = error_with("'Worker type\n\tDISK", "'Worker type\n\tNETWORK,TCP");
    assert_eq!(
        error.to_string(),
        "line 53: worker `Worker 1` is of type `NETWORK,TCP`; the lab runs disk workers"
    );
    let error = error_with("'Target type\n\tDISK", "'Target type\n\tNETWORK,VI");
    assert!(matches!(error, IcfError::Network { .. }));
}

#[test]
fn test_types_other_than_normal_are_refused() {
    let error = error_with("\tNORMAL", "\tCYCLE_OUTSTANDING_IOS");
    assert_eq!(
        error.to_string(),
        "line 26: test type `CYCLE_OUTSTANDING_IOS` cycles through several tests; the lab runs \
         one (NORMAL)"
    );
    let error = error_with("\tNORMAL", "\tSOMETIMES");
    assert!(
        matches!(error, IcfError::TestType { line: 26, .. }),
        "{error}"
    );
}

#[test]
fn a_worker_with_two_targets_is_refused() {
    let two = "'Target\n\tPHYSICALDRIVE:1\n'Target type\n\tDISK\n'End target\n";
    let error = error_with(two, &format!("{two}{two}"));
    assert!(
        matches!(error, IcfError::Targets { count: 2, .. }),
        "{error}"
    );
}

#[test]
fn stray_and_repeated_lines_are_refused() {
    let error = error_with("'RESULTS DISPLAY", "'GRAPHS ====\n'RESULTS DISPLAY");
    assert!(
        matches!(error, IcfError::Unexpected { line: 28, .. }),
        "{error}"
    );
    let error = error_with("'Worker type\n", "'Worker colour\n\tblue\n'Worker type\n");
    assert!(
        matches!(
            error,
            IcfError::Unexpected {
                context: "worker",
                ..
            }
        ),
        "{error}"
    );
    let error = error_with("\tmixed,NONE", "\t4K; 70% read, random,NONE");
    assert!(matches!(error, IcfError::DuplicateSpec { .. }), "{error}");
    let error = error_with(
        "'size,% of size,% reads,% random,delay,burst,align,reply\n\t512",
        "\t512",
    );
    assert!(matches!(error, IcfError::EmptySpec { .. }), "{error}");
    let error = error_with("'Test Type\n\tNORMAL\n", "'Test Type\n");
    assert!(matches!(error, IcfError::MissingValue { .. }), "{error}");
    let error = error_with(
        "'END results display\n",
        "'END results display\nstray words\n",
    );
    assert!(
        matches!(error, IcfError::Unexpected { line: 34, .. }),
        "{error}"
    );
}

#[test]
fn no_truncation_of_the_file_panics() {
    // Every prefix of the file, cut at any line, parses or fails cleanly.
    for (at, _) in TWO_WORKERS.match_indices('\n') {
        let _ = parse(&TWO_WORKERS[..at]);
        let _ = parse(&TWO_WORKERS[at..]);
    }
}
