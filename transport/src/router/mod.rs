//! One output link of a router, sans-IO: the bottleneck (queues, scheduler,
//! AQMs, drops), the load-factor meter, the policer, and the marking
//! pipeline that hands each packet to its scheme's marker; `capacity` is
//! the link's rate over time and what a router measures of it. The router shim
//! drives it with the real clock, the simulator with virtual time.

pub mod bottleneck;
pub mod capacity;
pub mod marking;
pub mod meter;
pub mod policer;

pub use marking::{MarkCounters, MarkingMode, RouterConfig, RouterLink};
