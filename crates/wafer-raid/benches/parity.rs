//! Parity kernels against the memory-bound baseline, for an 18+2 RAID-DP group.
//!
//! One run measures, over 64 stripes: plain XOR of 18 buffers into one (the
//! baseline: what any parity must at least do), RAID-4 encode, RAID-DP encode of
//! 18+2, and RAID-DP reconstruction of two lost data disks of 18+2. RAID-4 groups
//! stop at 14 disks, so its encode runs on the widest one, 13+1. Throughput
//! counts the data bytes of the stripes processed per second, in GB/s (10^9 B/s),
//! so groups of different widths compare fairly. After criterion's own report it
//! prints each kernel as GB/s and as a ratio to the baseline of the same run.
//!
//! Run: `cargo bench -p wafer-raid --bench parity`

#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented items"
)]
#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark driver reads criterion's result files; the library stays pure"
)]

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput};
use wafer_raid::xor::xor_all;
use wafer_raid::{BLOCK_SIZE, Block, DiskIndex, DiskSet, RaidGroupGeometry, RaidType};

const DATA_DISKS: usize = 18;
const RAID4_DATA_DISKS: usize = 13;
const STRIPES: usize = 64;
const GROUP: &str = "parity-18+2";
const BASELINE: &str = "xor-baseline";
/// Each kernel with the data disks of the stripes it processes.
const KERNELS: [(&str, usize); 4] = [
    (BASELINE, DATA_DISKS),
    ("raid4-encode-13+1", RAID4_DATA_DISKS),
    ("raid-dp-encode", DATA_DISKS),
    ("raid-dp-reconstruct-2", DATA_DISKS),
];

fn data_bytes(data_disks: usize) -> u64 {
    (data_disks * STRIPES * BLOCK_SIZE) as u64
}

fn filled_stripes(geometry: &RaidGroupGeometry) -> Vec<Vec<Block>> {
    let mut state = 0x0123_4567_89ab_cdefu64;
    (0..STRIPES)
        .map(|_| {
            let mut stripe = vec![[0u8; BLOCK_SIZE]; geometry.group_size()];
            for block in &mut stripe {
                for word in block.chunks_exact_mut(8) {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    word.copy_from_slice(&state.to_le_bytes());
                }
            }
            geometry.encode_stripe(&mut stripe);
            stripe
        })
        .collect()
}

fn bench_parity(c: &mut Criterion) {
    let raid_dp = RaidGroupGeometry::new(RaidType::RaidDp, DATA_DISKS as u16 + 2, 1 << 20)
        .expect("18+2 is a valid RAID-DP group");
    let raid4 = RaidGroupGeometry::new(RaidType::Raid4, RAID4_DATA_DISKS as u16 + 1, 1 << 20)
        .expect("13+1 is a valid RAID-4 group");
    let mut dp_stripes = filled_stripes(&raid_dp);
    let mut r4_stripes = filled_stripes(&raid4);
    // The baseline streams the same number of bytes from 18 separate buffers.
    let columns: Vec<Vec<u8>> = (0..DATA_DISKS)
        .map(|disk| dp_stripes.iter().flat_map(|s| s[disk + 2]).collect())
        .collect();
    let mut baseline_out = vec![0u8; STRIPES * BLOCK_SIZE];
    let failed = DiskSet::of([DiskIndex(5), DiskIndex(14)]);

    let mut group = c.benchmark_group(GROUP);
    let [baseline, raid4_encode, raid_dp_encode, raid_dp_reconstruct] = KERNELS;
    group.throughput(Throughput::BytesDecimal(data_bytes(baseline.1)));
    group.bench_function(baseline.0, |b| {
        b.iter(|| xor_all(black_box(&mut baseline_out), columns.iter().map(|c| &c[..])))
    });
    group.throughput(Throughput::BytesDecimal(data_bytes(raid4_encode.1)));
    group.bench_function(raid4_encode.0, |b| {
        b.iter(|| {
            r4_stripes
                .iter_mut()
                .for_each(|s| raid4.encode_stripe(black_box(s)))
        })
    });
    group.throughput(Throughput::BytesDecimal(data_bytes(raid_dp_encode.1)));
    group.bench_function(raid_dp_encode.0, |b| {
        b.iter(|| {
            dp_stripes
                .iter_mut()
                .for_each(|s| raid_dp.encode_stripe(black_box(s)))
        })
    });
    group.throughput(Throughput::BytesDecimal(data_bytes(raid_dp_reconstruct.1)));
    group.bench_function(raid_dp_reconstruct.0, |b| {
        b.iter(|| {
            for stripe in &mut dp_stripes {
                raid_dp
                    .reconstruct_stripe(black_box(stripe), failed)
                    .expect("two failures are within RAID-DP's promise");
            }
        })
    });
    group.finish();
}

/// Mean time of one iteration, as criterion estimated it in this run.
fn mean_ns(results: &Path, kernel: &str) -> Option<f64> {
    let path = results.join(GROUP).join(kernel).join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["mean"]["point_estimate"].as_f64()
}

fn print_ratios(results: &Path) {
    let gb_per_s = |(kernel, data_disks): (&str, usize)| {
        mean_ns(results, kernel).map(|ns| data_bytes(data_disks) as f64 / ns)
    };
    let Some(baseline) = gb_per_s(KERNELS[0]) else {
        println!("(no estimates for {BASELINE}: was it filtered out or run with --test?)");
        return;
    };
    println!(
        "\n{GROUP}: {STRIPES} stripes of 4 KiB blocks per iteration; GB/s = 10^9 data bytes/s"
    );
    println!("{:<24} {:>10} {:>12}", "kernel", "GB/s", "vs baseline");
    for kernel in KERNELS {
        if let Some(rate) = gb_per_s(kernel) {
            println!("{:<24} {rate:>10.2} {:>11.2}x", kernel.0, rate / baseline);
        }
    }
}

fn main() {
    // Results go beside the workspace's build output; they are cleared first so
    // that the ratios printed come from this run only.
    let results: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion");
    let _ = std::fs::remove_dir_all(results.join(GROUP));
    let mut criterion = Criterion::default()
        .output_directory(&results)
        .configure_from_args();
    bench_parity(&mut criterion);
    criterion.final_summary();
    print_ratios(&results);
}
