//! The shim's data paths: where packets come from and go to, and the
//! threads that drive the links in real time.
//!
//! * [`pump`]: the thread that drives a link, for every data path.
//! * [`relay`]: the UDP relay (`ecnq-shim relay`), unprivileged.
//! * [`sessions`]: the relay's bounded session table, sans-IO.
//! * [`udp`]: the relay's sockets.
//! * [`tun`]: the router hop through two TUN devices (`ecnq-shim tun`).

pub mod pump;
pub mod relay;
pub mod sessions;
pub mod tun;
pub mod udp;
