//! Attaching the program to a device's egress, and taking it off again.
//! `tc` (iproute2, which loads it with libbpf) loads it as a clsact
//! filter; where the kernel has tcx (Linux 6.6), the program moves to the
//! tcx egress hook and the filter goes. The kernel runs a tcx program
//! directly, without the classifier's chain walk (`tcf_classify`,
//! `cls_bpf_classify`), which was about a third of the hook's cost in the
//! router's thread (`cargo bench -p ecnq-shim --bench forwarding`).

use std::io::Write as _;
use std::process::Command;

use crate::sys;

/// The tc filter priority ecnq's program takes on the clsact egress hook
/// (where the kernel has no tcx): detach removes this one filter and
/// leaves any others.
pub const PRIORITY: u32 = 0xecf;

/// The compiled program, when the build had clang and libbpf's headers.
pub fn object() -> Result<&'static [u8], String> {
    #[cfg(ecnq_bpf_object)]
    {
        Ok(include_bytes!(concat!(env!("OUT_DIR"), "/ecnq.bpf.o")))
    }
    #[cfg(not(ecnq_bpf_object))]
    {
        Err(
            "ecnq-bpf was built without its tc program: clang or libbpf's headers were \
             missing (apt-get install clang libbpf-dev, then rebuild)"
                .to_owned(),
        )
    }
}

fn tc(args: &[&str]) -> Result<String, String> {
    let out = Command::new("tc")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run tc (iproute2): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`tc {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The program's name, as the kernel lists it (`SEC("tc")` function).
const NAME: &str = "ecnq_egress";

/// Loads the program on `dev`'s egress (adding the clsact qdisc if it is
/// not there), in place of an ecnq program already there, and returns the
/// loaded program's id.
pub fn attach(dev: &str) -> Result<u32, String> {
    let object = object()?;
    let mut file = tempfile(object)?;
    file.flush().map_err(|e| e.to_string())?;
    // tc reads the file through this process, which keeps it open.
    let path = format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        std::os::fd::AsRawFd::as_raw_fd(&file)
    );
    if !tc(&["qdisc", "show", "dev", dev])?.contains("clsact") {
        tc(&["qdisc", "add", "dev", dev, "clsact"])?;
    }
    let pref = PRIORITY.to_string();
    tc(&[
        "filter", "replace", "dev", dev, "egress", "pref", &pref, "handle", "1", "bpf", "da",
        "obj", &path, "sec", "tc",
    ])?;
    let id = filter_program(dev)?.ok_or_else(|| format!("tc loaded no ecnq program on {dev}"))?;
    let ifindex = ifindex(dev)?;
    // Without tcx the filter stays, and runs the program.
    if sys::tcx_attach(ifindex, id).is_ok() {
        tcx_detach_all(dev, ifindex, Some(id))?;
        tc(&["filter", "del", "dev", dev, "egress", "pref", &pref])?;
    }
    Ok(id)
}

/// The id of ecnq's program on `dev`'s egress, if one is attached.
pub fn program_id(dev: &str) -> Result<Option<u32>, String> {
    match tcx_programs(ifindex(dev)?)?.first() {
        Some(&id) => Ok(Some(id)),
        None => filter_program(dev),
    }
}

/// ecnq's programs on the tcx egress hook of the device `ifindex`.
fn tcx_programs(ifindex: u32) -> Result<Vec<u32>, String> {
    let ids = sys::tcx_programs(ifindex).map_err(|e| format!("tcx programs: {e}"))?;
    // A program that went between the query and the look is not there.
    Ok(ids
        .into_iter()
        .filter(|&id| sys::program_name(id).is_ok_and(|name| name == NAME))
        .collect())
}

/// The id of the program in ecnq's clsact filter on `dev`, if there is one.
fn filter_program(dev: &str) -> Result<Option<u32>, String> {
    let pref = PRIORITY.to_string();
    let shown = tc(&["filter", "show", "dev", dev, "egress", "pref", &pref]).unwrap_or_default();
    Ok(parse_program_id(&shown))
}

fn parse_program_id(shown: &str) -> Option<u32> {
    let mut words = shown.split_whitespace();
    while let Some(word) = words.next() {
        if word == "id" {
            return words.next()?.parse().ok();
        }
    }
    None
}

/// Takes ecnq's program off `dev`'s egress; the device forwards as before.
pub fn detach(dev: &str) -> Result<(), String> {
    let ifindex = ifindex(dev)?;
    tcx_detach_all(dev, ifindex, None)?;
    if filter_program(dev)?.is_none() {
        return Ok(());
    }
    let pref = PRIORITY.to_string();
    tc(&["filter", "del", "dev", dev, "egress", "pref", &pref]).map(drop)
}

/// The index of device `dev` in this thread's network namespace.
fn ifindex(dev: &str) -> Result<u32, String> {
    sys::ifindex(dev).map_err(|e| e.to_string())
}

/// Takes ecnq's programs other than `keep` off the tcx egress hook of
/// `dev`, whose index is `ifindex`.
fn tcx_detach_all(dev: &str, ifindex: u32, keep: Option<u32>) -> Result<(), String> {
    for id in tcx_programs(ifindex)?
        .into_iter()
        .filter(|&p| Some(p) != keep)
    {
        sys::tcx_detach(ifindex, id).map_err(|e| format!("{dev}: program {id}: {e}"))?;
    }
    Ok(())
}

/// An unlinked file holding `bytes`, for tc to read through /proc while this process holds it.
fn tempfile(bytes: &[u8]) -> Result<std::fs::File, String> {
    let dir = std::env::temp_dir();
    let path = dir.join(format!("ecnq-bpf-{}.o", std::process::id()));
    let mut file = std::fs::File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let _ = std::fs::remove_file(&path);
    file.write_all(bytes).map_err(|e| e.to_string())?;
    Ok(file)
}

/// The length of `dev`'s link header, where the program finds the IP
/// header: 14 on Ethernet (and veth), 0 on IP-only devices (TUN, WireGuard).
pub fn link_header(dev: &str) -> Result<u8, String> {
    // Link types of include/uapi/linux/if_arp.h.
    const ARPHRD_ETHER: u16 = 1;
    const ARPHRD_RAWIP: u16 = 519;
    const ARPHRD_NONE: u16 = 0xfffe;
    const ETH_HLEN: u8 = 14;
    if dev.len() >= libc::IFNAMSIZ {
        return Err(format!("device name `{dev}` is too long"));
    }
    // SAFETY: a zeroed ifreq holding the name, on a socket opened for it.
    let family = unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        for (to, from) in req.ifr_name.iter_mut().zip(dev.bytes()) {
            *to = from as libc::c_char;
        }
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
        let r = libc::ioctl(fd, libc::SIOCGIFHWADDR, &mut req);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if r < 0 {
            return Err(format!("device `{dev}`: {err}"));
        }
        req.ifr_ifru.ifru_hwaddr.sa_family
    };
    match family {
        ARPHRD_ETHER => Ok(ETH_HLEN),
        ARPHRD_NONE | ARPHRD_RAWIP => Ok(0),
        other => Err(format!(
            "device `{dev}` has link type {other}: the program reads Ethernet and IP-only devices"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ethernet_and_ip_only_devices_are_read() {
        // Loopback's link type is ARPHRD_LOOPBACK: not one the program reads.
        assert!(link_header("lo").is_err());
        assert!(link_header("no-such-device").is_err());
    }

    #[test]
    fn the_program_id_is_read_from_tcs_listing() {
        let shown = "filter protocol all pref 3791 bpf chain 0 handle 0x1 ecnq.bpf.o:[tc] \
                     direct-action not_in_hw id 100 name ecnq_egress tag fd93 jited";
        assert_eq!(parse_program_id(shown), Some(100));
        assert_eq!(parse_program_id("filter protocol all pref 3791 bpf"), None);
    }
}
