//! Meter accounting plus marking, per packet, for every scheme.
fn main() {}
