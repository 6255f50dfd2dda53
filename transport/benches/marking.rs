//! Meter accounting plus marking, per packet, for every wire scheme: what a
//! router does for each packet entering a link (`RouterLink::on_arrival` and
//! the queue update). Goal (issue 2): below 50 ns per packet.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ecnq::wire::hash::fmix32;
use ecnq::{MarkingMode, PacketMarks, RouterConfig, RouterLink, SchemeTag, WireScheme};

const BATCH: u32 = 1024;

fn per_packet(c: &mut Criterion) {
    let mut group = c.benchmark_group("meter+mark");
    group.throughput(Throughput::Elements(u64::from(BATCH)));
    for wire in WireScheme::all() {
        // 100 Mbit/s, so intervals close and markers see real load figures.
        let mut cfg = RouterConfig::new(12.5e6, 1 << 20);
        cfg.mode = MarkingMode::Auto;
        let mut link = RouterLink::new(cfg, Duration::ZERO);
        // 1000 flows, packets 1 µs apart (≈ 100 Mbit/s at 1200 bytes).
        let packets: Vec<PacketMarks> = (0..BATCH)
            .map(|i| PacketMarks {
                ecn: wire.base_ecn(),
                tag: SchemeTag::new(wire.id()),
                hash: fmix32(i),
                flow: u64::from(fmix32(i % 1000)),
            })
            .collect();
        let mut now = Duration::ZERO;
        let step = Duration::from_micros(1);
        let mut queue = 0u64;
        group.bench_function(wire.name(), |b| {
            b.iter(|| {
                for p in &packets {
                    now += step;
                    let mut pkt = *p;
                    link.on_arrival(now, 1200, &mut pkt);
                    queue = (queue + 1200) % 60_000;
                    link.on_queue(now, queue);
                    black_box(pkt);
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, per_packet);
criterion_main!(benches);
