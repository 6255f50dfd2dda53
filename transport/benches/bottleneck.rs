//! The bottleneck's cost per packet offered (offer, and departures at the
//! link rate) when its classic queue overflows: every arriving packet meets
//! a full queue, so under the dual queue each one looks for the flow with
//! the most bytes waiting (`make_room`), which a FIFO does not. Both
//! disciplines run in the same run, at 10, 100 and 1000 classic flows, so
//! the dual queue's figure reads against the FIFO's.
//! Run: `cargo bench -p ecnq --bench bottleneck`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ecnq::router::bottleneck::{Bottleneck, BottleneckConfig, Discipline, QueueLimit, Queued};
use ecnq::router::capacity::{CapacitySource, LinkRate};
use ecnq::wire::hash::fmix32;
use ecnq::{Ecn, PacketMarks, RouterConfig, SchemeTag};

const BATCH: u32 = 1024;
const LEN: u32 = 1250;
/// 1 Gbit/s: one 1250-byte packet per 10 µs.
const RATE: u64 = 1_000_000_000;

#[derive(Clone, Copy)]
struct Packet(PacketMarks);

impl Queued for Packet {
    fn wire_len(&self) -> u32 {
        LEN
    }
    fn marks(&self) -> Option<PacketMarks> {
        Some(self.0)
    }
    fn set_marks(&mut self, marks: &PacketMarks) {
        self.0 = *marks;
    }
}

fn overflowing(c: &mut Criterion) {
    let mut group = c.benchmark_group("bottleneck overflow");
    group.throughput(Throughput::Elements(u64::from(BATCH)));
    for flows in [10u32, 100, 1000] {
        for discipline in [Discipline::Dual, Discipline::Fifo] {
            let config = BottleneckConfig {
                rate: Some(LinkRate::Fixed(RATE)),
                capacity: CapacitySource::Configured,
                // 10 ms of the link.
                limit: QueueLimit::Bytes(RATE / 8 / 100),
                discipline,
                router: RouterConfig::new(RATE as f64 / 8.0, RATE / 8 / 100),
                seed: 0,
            };
            let mut link = Bottleneck::new(config, Duration::ZERO);
            // Untagged ECT(0): CoDel marks rather than drops, so the queue
            // stays full; the flows take turns in a shuffled order.
            let packets: Vec<Packet> = (0..BATCH)
                .map(|i| {
                    Packet(PacketMarks {
                        ecn: Ecn::Ect0,
                        tag: SchemeTag::UNTAGGED,
                        hash: fmix32(i),
                        flow: u64::from(fmix32(i) % flows),
                    })
                })
                .collect();
            // Twice the link's rate.
            let step = Duration::from_nanos(u64::from(LEN) * 8 * 1_000_000_000 / RATE / 2);
            let mut now = Duration::ZERO;
            let id = BenchmarkId::new(discipline.to_string(), flows);
            group.bench_function(id, |b| {
                b.iter(|| {
                    for &p in &packets {
                        now += step;
                        while let Some(departed) = link.depart(now) {
                            black_box(departed);
                        }
                        black_box(link.offer(now, p).is_ok());
                        black_box(link.take_drops().count());
                    }
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, overflowing);
criterion_main!(benches);
