//! The engine holds at most `Options::max_requests` host requests: beyond
//! it `submit` refuses with `Busy::Full`, takes nothing, and takes requests
//! again once replies have been polled.

use wafer_core::aggregate::Layout;
use wafer_core::filer::{Busy, Change, HostRequest, Options, ReplyData};
use wafer_core::nvlog::LunId;
use wafer_raid::{RaidGroupGeometry, RaidType};
use wafer_sim::check::{CheckConfig, run};
use wafer_sim::world::World;

const MAX_REQUESTS: usize = 3;

fn world_with_lun() -> (World, LunId) {
    let geometry = RaidGroupGeometry::new(RaidType::RaidDp, 6, 4096).expect("valid");
    let layout = Layout::new(vec![geometry], 1).expect("valid");
    let options = Options {
        max_requests: MAX_REQUESTS,
        nvlog_half_bytes: 1 << 20,
        dirty_high_water: 512,
        ..Options::default()
    };
    let mut world = World::format(layout, options, 7);
    world.wait_online().expect("online");
    let create = Change::CreateVolume {
        name: "vol0".into(),
        size_bytes: 40 << 20,
    };
    let reply = world.request(HostRequest::Change(create));
    let Ok(ReplyData::Volume(volume)) = reply else {
        panic!("no volume: {reply:?}");
    };
    let create = Change::CreateLun {
        volume,
        name: "lun0".into(),
        size_bytes: 8 << 20,
        attributes: wafer_core::format::LunAttributes::DEFAULT,
    };
    let Ok(ReplyData::Lun(lun)) = world.request(HostRequest::Change(create)) else {
        panic!("no LUN");
    };
    (world, lun)
}

fn write(lun: LunId, block: u64) -> HostRequest {
    HostRequest::Change(Change::Write {
        lun,
        offset: block * 4096,
        data: vec![block as u8 + 1; 4096],
    })
}

#[test]
fn a_full_engine_refuses_and_takes_requests_again_once_answered() {
    let (mut world, lun) = world_with_lun();
    let taken: Vec<_> = (0..MAX_REQUESTS as u64)
        .map(|block| world.submit(None, write(lun, block)).expect("room"))
        .collect();
    assert_eq!(
        world.submit(None, write(lun, 9)),
        Err(Busy::Full(MAX_REQUESTS))
    );
    assert_eq!(world.filer().counters().busy_refusals, 1);

    let mut answered = Vec::new();
    while answered.len() < taken.len() {
        assert!(world.step(), "the taken requests were never answered");
        answered.extend(world.take_replies().into_iter().map(|r| r.id));
    }
    answered.sort();
    assert_eq!(answered, taken, "exactly the taken requests are answered");

    world.submit(None, write(lun, 9)).expect("room again");
    let read = HostRequest::Read {
        lun,
        offset: 9 * 4096,
        length: 4096,
    };
    loop {
        if world.take_replies().len() == 1 {
            break;
        }
        assert!(
            world.step(),
            "the write after the refusal was never answered"
        );
    }
    let Ok(ReplyData::Data(data)) = world.request(read) else {
        panic!("the read failed");
    };
    assert_eq!(
        data,
        vec![10u8; 4096],
        "the refused write was not taken; the later one was"
    );
}

#[test]
fn the_seeded_check_meets_a_full_engine_and_passes() {
    let refused: u64 = (1..=6)
        .map(|seed| {
            let config = CheckConfig {
                seed,
                ops: 300,
                bound_requests: true,
                ..CheckConfig::default()
            };
            run(&config).unwrap_or_else(|f| panic!("{f}")).busy_refusals
        })
        .sum();
    assert!(refused > 0, "no seed bounded the engine below its workload");
}
