//! Router presence for the schemes whose wire cannot say "no router"
//! (docs/design.md §2, "No router on the path"). VCP's, MPCP's, BMCC's and
//! MCP's base codepoint is a valid low-load code, so a path with no ecnq
//! router reads as an idle one, and their laws would grow until loss. Their
//! senders therefore send presence probes: every [`PROBE_EVERY`]-th
//! datagram is one, and an ecnq router raises it before it marks it (the
//! registry's `Probe`: a Not-ECT packet to the base codepoint, or, for MCP,
//! whose base is Not-ECT, a tag with its probe bit to the plain tag). Until
//! its first verdict every datagram is a probe ([`is_probe`]), so that the
//! verdict comes about a round trip after its first datagrams, and so that
//! no packet carries the scheme's codepoint unraised meanwhile.
//! The receiver's feedback report carries its cumulative count of probes
//! that arrived unraised; when about as many did as the sender sent, no
//! ecnq router saw them, and the sender runs Cubic with ECT(0) until probes
//! come back raised.
//!
//! Sans-IO: the sender feeds [`RouterPresence`] its own count of probe
//! packets and the receiver's count of unraised ones at each accepted
//! report.

/// Once it has a verdict, a sender makes every this-many-th datagram it
/// sends a probe.
pub const PROBE_EVERY: u64 = 16;

/// Whether the `nth` datagram a probing sender sends (from 1) is a probe:
/// every one until the sender has its first verdict
/// ([`RouterPresence::decided`]), then every [`PROBE_EVERY`]-th.
/// * A sender with no ecnq router on its path learns it while still
///   starting, and hands Cubic a starting window to grow in slow start,
///   not one its law held down while a Cubic neighbour took the link.
/// * No datagram carries the scheme's own codepoint unraised before the
///   verdict: at a DualPI2 bottleneck with no ecnq router, ECT(1) ones
///   between the probes would overtake them from the L4S queue, which
///   QUIC reads as loss, and that queue's marks would make the law
///   decrease before Cubic takes over (`l4s_goals` in sim/tests). Where
///   an ecnq router is, it raises every probe, so the scheme loses nothing.
pub fn is_probe(nth: u64, decided: bool) -> bool {
    !decided || nth % PROBE_EVERY == 0
}
/// The verdict follows about the last this-many probe packets, however
/// often reports come (probes still in flight at one report arrive by a
/// later one).
const WINDOW_PROBES: f64 = 32.0;
/// The verdict needs this many probe packets in the window.
pub const MIN_PROBES: u64 = 4;
/// No router when more than this share of the probes arrived unraised ...
const ABSENT_ABOVE: f64 = 0.5;
/// ... and a router again when less than this share did.
const PRESENT_BELOW: f64 = 0.1;

/// Whether an ecnq router is on the path, from probes sent and probes
/// received unraised.
#[derive(Clone, Debug)]
pub struct RouterPresence {
    /// The cumulative counts at the last report: unraised probes received,
    /// probes sent.
    last: (u64, u64),
    /// Unraised probes received and probe packets sent over the window.
    unraised: f64,
    probes: f64,
    present: bool,
}

impl Default for RouterPresence {
    /// A router is assumed until the counts say otherwise, so a flow starts
    /// on its scheme's law. Both counts start at zero with the connection:
    /// the receiver counts only packets that are still probes when they
    /// arrive, and before the sender probes it sends quinn's ECT(0).
    fn default() -> Self {
        RouterPresence {
            last: (0, 0),
            unraised: 0.0,
            probes: 0.0,
            present: true,
        }
    }
}

impl RouterPresence {
    /// At an accepted report: the receiver's cumulative count of probes
    /// that arrived unraised, this sender's cumulative probe packets, and
    /// the packets of the sender's that the report says arrived since it
    /// began probing. No more probes than those count as sent: probes still
    /// in flight would put the verdict off, or, while every datagram is a
    /// probe, make it wrong. Returns whether an ecnq router is on the path.
    pub fn on_report(&mut self, unraised_received: u64, probes_sent: u64, arrived: u64) -> bool {
        let probes_sent = probes_sent.min(arrived);
        let (received, sent) = self.last;
        self.unraised += unraised_received.saturating_sub(received) as f64;
        self.probes += probes_sent.saturating_sub(sent) as f64;
        if self.probes > WINDOW_PROBES {
            // Older counts fade as new probes come, keeping the share.
            let keep = WINDOW_PROBES / self.probes;
            self.unraised *= keep;
            self.probes = WINDOW_PROBES;
        }
        self.last = (unraised_received, probes_sent);
        if self.probes >= MIN_PROBES as f64 {
            let share = self.unraised_share();
            if self.present && share > ABSENT_ABOVE {
                self.present = false;
            } else if !self.present && share < PRESENT_BELOW {
                self.present = true;
            }
        }
        self.present
    }

    /// The current verdict: whether an ecnq router is on the path.
    pub fn present(&self) -> bool {
        self.present
    }

    /// Whether the verdict rests on enough probes yet.
    pub fn decided(&self) -> bool {
        self.probes >= MIN_PROBES as f64
    }

    /// The share of the window's probes that arrived unraised.
    pub fn unraised_share(&self) -> f64 {
        self.unraised / self.probes.max(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `reports` reports of `probes` probes each, `unraised` of them
    /// arriving Not-ECT; returns the verdict after each.
    fn feed(
        p: &mut RouterPresence,
        totals: &mut (u64, u64),
        reports: usize,
        probes: u64,
        unraised: u64,
    ) -> Vec<bool> {
        (0..reports)
            .map(|_| {
                totals.0 += unraised;
                totals.1 += probes;
                // Every probe sent has arrived.
                p.on_report(totals.0, totals.1, totals.1)
            })
            .collect()
    }

    #[test]
    fn unraised_probes_mean_no_router_and_raised_ones_bring_it_back() {
        let mut p = RouterPresence::default();
        let mut totals = (0, 0);
        // A router raises every probe: present throughout.
        assert!(feed(&mut p, &mut totals, 20, 3, 0).iter().all(|&v| v));
        // No router: every probe arrives Not-ECT. Absent once about half a
        // window of probes has, not at the first.
        let verdicts = feed(&mut p, &mut totals, 10, 3, 3);
        let absent_after = verdicts.iter().position(|&v| !v).expect("absent");
        assert!((2..=8).contains(&absent_after), "{verdicts:?}");
        assert!(verdicts[absent_after..].iter().all(|&v| !v));
        // A router again: present within a few windows of probes, not at once.
        let verdicts = feed(&mut p, &mut totals, 80, 3, 0);
        let back_after = verdicts.iter().position(|&v| v).expect("present");
        assert!((2..=40).contains(&back_after), "{verdicts:?}");
    }

    /// Reports come every 10 ms or every round trip: either way, a window
    /// of unraised probes is a verdict.
    #[test]
    fn the_verdict_does_not_depend_on_how_often_reports_come() {
        for (reports_per_probe, probes) in [(20, 0), (1, 1), (1, 40)] {
            let mut p = RouterPresence::default();
            let mut totals = (0, 0);
            let mut absent = false;
            for _ in 0..12 {
                feed(&mut p, &mut totals, reports_per_probe, 0, 0);
                absent = !*feed(&mut p, &mut totals, 1, probes.max(1), probes.max(1))
                    .last()
                    .unwrap();
            }
            assert!(
                absent,
                "{reports_per_probe} reports per probe, {probes} probes"
            );
        }
    }

    #[test]
    fn every_datagram_is_a_probe_until_the_first_verdict() {
        let mut p = RouterPresence::default();
        assert!(!p.decided());
        assert!((1..=20).all(|n| is_probe(n, p.decided())));
        // Three probes are no verdict; the fourth, unraised, is.
        assert!(p.on_report(3, 3, 3) && !p.decided());
        assert!(!p.on_report(4, 4, 4) && p.decided());
        let probes: Vec<u64> = (1..=64).filter(|&n| is_probe(n, p.decided())).collect();
        assert_eq!(probes, [16, 32, 48, 64]);
    }

    #[test]
    fn a_few_lost_or_bleached_probes_are_no_verdict() {
        let mut p = RouterPresence::default();
        let mut totals = (0, 0);
        // One probe in ten arrives Not-ECT (a middlebox, a router's reboot).
        for i in 0..40 {
            let verdict = feed(&mut p, &mut totals, 1, 10, u64::from(i % 10 == 0)).pop();
            assert_eq!(verdict, Some(true));
        }
    }
}
