//! Parse + classify + meter + mark + rewrite per packet, the shim's per-packet
//! work without I/O or queueing (goal: ≥ 1 Mpps).
//! Run: `cargo bench -p ecnq-shim --bench parse_mark`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ecnq::router::{RouterConfig, RouterLink};
use ecnq::{Ecn, SchemeTag};
use ecnq_shim::link::classify::{classify, rewrite, Verdict};
use ecnq_shim::wire::{Ipv4Repr, UdpRepr, PROTO_UDP};

/// 1024 IPv4/UDP packets of `payload` bytes, tags cycling through every scheme.
fn packets(payload: usize) -> Vec<Vec<u8>> {
    (0..1024u32)
        .map(|i| {
            let mut buf = vec![0u8; 28 + payload];
            let tos = SchemeTag::new((i % 6) as u8).tos(Ecn::Ect1);
            Ipv4Repr {
                src: [10, 0, 0, 1].into(),
                dst: [10, 0, 1, 1].into(),
                protocol: PROTO_UDP,
                tos,
                ttl: 64,
                payload_len: 8 + payload,
            }
            .emit(&mut buf);
            UdpRepr {
                src_port: 4000 + (i % 16) as u16,
                dst_port: 443,
            }
            .emit(&mut buf[20..], payload);
            let tail = buf.len() - 4;
            buf[tail..].copy_from_slice(&i.to_le_bytes());
            buf
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse_meter_mark");
    for payload in [64usize, 1200] {
        let mut batch = packets(payload);
        // 1 Gbit/s, loaded so every scheme marks something.
        let mut router = RouterLink::new(RouterConfig::new(125e6, 1 << 20), Duration::ZERO);
        let mut now = Duration::ZERO;
        group.throughput(Throughput::Elements(batch.len() as u64));
        group.bench_function(format!("{payload}B"), |b| {
            b.iter(|| {
                for packet in batch.iter_mut() {
                    now += Duration::from_nanos(500);
                    if let Verdict::Udp(c) = classify(packet) {
                        let mut marks = c.marks;
                        router.on_arrival(now, packet.len() as u32, &mut marks);
                        rewrite(packet, &c, &marks);
                    }
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
