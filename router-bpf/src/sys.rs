//! The few `bpf(2)` commands the control loop needs, on maps a loaded
//! program holds: find them from the program's id, look entries up, walk
//! and update them; and attaching a loaded program to a device's tcx
//! egress hook, by the device's index ([`ifindex`]). Plain syscalls (libc), so the crate needs no libbpf to
//! build; `tc` loads the program.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

// Commands and their attribute layouts: include/uapi/linux/bpf.h.
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_DETACH: libc::c_long = 9;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_MAP_GET_FD_BY_ID: libc::c_long = 14;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_PROG_QUERY: libc::c_long = 16;
const BPF_MAP_LOOKUP_AND_DELETE_ELEM: libc::c_long = 21;
/// tcx's egress hook (`enum bpf_attach_type`, Linux 6.6).
const BPF_TCX_EGRESS: u32 = 47;
/// Name lengths in `bpf_prog_info` / `bpf_map_info` (BPF_OBJ_NAME_LEN).
const OBJ_NAME_LEN: usize = 16;

/// `union bpf_attr` for the map element commands.
#[repr(C)]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `union bpf_attr` for BPF_PROG_TEST_RUN.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
}

/// `union bpf_attr` for BPF_*_GET_FD_BY_ID.
#[repr(C)]
#[derive(Default)]
struct IdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

/// `union bpf_attr` for BPF_PROG_ATTACH and BPF_PROG_DETACH on a device.
#[repr(C)]
#[derive(Default)]
struct AttachAttr {
    target_ifindex: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
    relative_fd: u32,
    expected_revision: u64,
}

/// `union bpf_attr` for BPF_PROG_QUERY on a device.
#[repr(C)]
#[derive(Default)]
struct QueryAttr {
    target_ifindex: u32,
    attach_type: u32,
    query_flags: u32,
    attach_flags: u32,
    prog_ids: u64,
    count: u32,
    _pad: u32,
    prog_attach_flags: u64,
    link_ids: u64,
    link_attach_flags: u64,
    revision: u64,
}

/// `union bpf_attr` for BPF_OBJ_GET_INFO_BY_FD.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    fd: u32,
    info_len: u32,
    info: u64,
}

/// The head of `struct bpf_prog_info`, up to its name.
#[repr(C)]
#[derive(Default)]
struct ProgInfo {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
    name: [u8; OBJ_NAME_LEN],
}

/// The head of `struct bpf_map_info`, up to its name.
#[repr(C)]
#[derive(Default)]
struct MapInfo {
    map_type: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: [u8; OBJ_NAME_LEN],
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised `union bpf_attr` prefix of the
    // size passed; the kernel reads and writes no more than that.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_by_id(cmd: libc::c_long, id: u32) -> io::Result<OwnedFd> {
    let fd = bpf(
        cmd,
        &mut IdAttr {
            id,
            ..IdAttr::default()
        },
    )?;
    // SAFETY: the kernel returned a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn info<T>(fd: &OwnedFd, info: &mut T) -> io::Result<()> {
    let mut attr = InfoAttr {
        fd: fd.as_raw_fd() as u32,
        info_len: size_of::<T>() as u32,
        info: info as *mut T as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr).map(drop)
}

fn name_of(raw: &[u8; OBJ_NAME_LEN]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// One map of a loaded program.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    /// The map's name (the kernel keeps its first 15 bytes).
    pub name: String,
    /// Key and value sizes, bytes.
    pub key_size: usize,
    pub value_size: usize,
}

/// The maps of the loaded program with id `prog_id`.
pub fn maps_of_program(prog_id: u32) -> io::Result<Vec<Map>> {
    let prog = fd_by_id(BPF_PROG_GET_FD_BY_ID, prog_id)?;
    let mut head = ProgInfo::default();
    info(&prog, &mut head)?;
    let mut ids = vec![0u32; head.nr_map_ids as usize];
    let mut with_ids = ProgInfo {
        nr_map_ids: head.nr_map_ids,
        map_ids: ids.as_mut_ptr() as u64,
        ..ProgInfo::default()
    };
    info(&prog, &mut with_ids)?;
    ids.into_iter()
        .map(|id| {
            let fd = fd_by_id(BPF_MAP_GET_FD_BY_ID, id)?;
            let mut m = MapInfo::default();
            info(&fd, &mut m)?;
            Ok(Map {
                fd,
                name: name_of(&m.name),
                key_size: m.key_size as usize,
                value_size: m.value_size as usize,
            })
        })
        .collect()
}

/// The name of the loaded program `prog_id` (its first 15 bytes).
pub fn program_name(prog_id: u32) -> io::Result<String> {
    let prog = fd_by_id(BPF_PROG_GET_FD_BY_ID, prog_id)?;
    let mut head = ProgInfo::default();
    info(&prog, &mut head)?;
    Ok(name_of(&head.name))
}

/// The index of device `dev` in the calling thread's network namespace.
pub fn ifindex(dev: &str) -> io::Result<u32> {
    let name = std::ffi::CString::new(dev)
        .map_err(|_| io::Error::other(format!("device name `{dev}` has a NUL")))?;
    // SAFETY: a NUL-terminated name; the call only reads it.
    match unsafe { libc::if_nametoindex(name.as_ptr()) } {
        0 => Err(io::Error::other(format!(
            "no device `{dev}`: {}",
            io::Error::last_os_error()
        ))),
        index => Ok(index),
    }
}

/// Attaches the loaded program `prog_id` last on the tcx egress hook of
/// the device with index `ifindex` (Linux 6.6). The attachment holds the
/// program until [`tcx_detach`], whatever becomes of the process.
pub fn tcx_attach(ifindex: u32, prog_id: u32) -> io::Result<()> {
    tcx(BPF_PROG_ATTACH, ifindex, prog_id)
}

/// Takes the program `prog_id` off the device's tcx egress hook.
pub fn tcx_detach(ifindex: u32, prog_id: u32) -> io::Result<()> {
    tcx(BPF_PROG_DETACH, ifindex, prog_id)
}

fn tcx(cmd: libc::c_long, ifindex: u32, prog_id: u32) -> io::Result<()> {
    let prog = fd_by_id(BPF_PROG_GET_FD_BY_ID, prog_id)?;
    let mut attr = AttachAttr {
        target_ifindex: ifindex,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_TCX_EGRESS,
        ..AttachAttr::default()
    };
    bpf(cmd, &mut attr).map(drop)
}

/// The ids of the programs on the device's tcx egress hook, in the order
/// they run; none where the kernel has no tcx.
pub fn tcx_programs(ifindex: u32) -> io::Result<Vec<u32>> {
    let query = |ids: &mut [u32]| {
        let mut attr = QueryAttr {
            target_ifindex: ifindex,
            attach_type: BPF_TCX_EGRESS,
            prog_ids: if ids.is_empty() {
                0
            } else {
                ids.as_mut_ptr() as u64
            },
            count: ids.len() as u32,
            ..QueryAttr::default()
        };
        match bpf(BPF_PROG_QUERY, &mut attr) {
            Ok(_) => Ok(attr.count as usize),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(0),
            Err(e) => Err(e),
        }
    };
    // Programs attached between the two queries are left for the next.
    let mut ids = vec![0u32; query(&mut [])?];
    if !ids.is_empty() {
        let n = query(&mut ids)?;
        ids.truncate(n);
    }
    Ok(ids)
}

/// Runs the loaded program `prog_id` on `packet` (a whole frame, link
/// header first) `repeat` times in the kernel (BPF_PROG_TEST_RUN) and
/// returns its verdict, its mean time per run in nanoseconds, and the
/// packet as it left the last run.
pub fn test_run(prog_id: u32, packet: &[u8], repeat: u32) -> io::Result<(u32, u32, Vec<u8>)> {
    let prog = fd_by_id(BPF_PROG_GET_FD_BY_ID, prog_id)?;
    let mut out = vec![0u8; packet.len() + 256];
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: packet.len() as u32,
        data_size_out: out.len() as u32,
        data_in: packet.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat,
        ..TestRunAttr::default()
    };
    bpf(BPF_PROG_TEST_RUN, &mut attr)?;
    out.truncate(attr.data_size_out as usize);
    Ok((attr.retval, attr.duration, out))
}

impl Map {
    /// One element command; a queue's commands take no key.
    fn elem(
        &self,
        cmd: libc::c_long,
        key: Option<&[u8]>,
        value: u64,
        flags: u64,
    ) -> io::Result<()> {
        let mut attr = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.map_or(0, |k| k.as_ptr() as u64),
            value,
            flags,
            ..ElemAttr::default()
        };
        bpf(cmd, &mut attr).map(drop)
    }

    /// The value under `key` into `value` (for a per-CPU map, one value per
    /// possible CPU, each rounded up to 8 bytes); false if there is none.
    pub fn lookup(&self, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
        match self.elem(BPF_MAP_LOOKUP_ELEM, Some(key), value.as_mut_ptr() as u64, 0) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Takes the oldest value out of a queue map into `value`; false when
    /// it is empty.
    pub fn pop(&self, value: &mut [u8]) -> io::Result<bool> {
        match self.elem(
            BPF_MAP_LOOKUP_AND_DELETE_ELEM,
            None,
            value.as_mut_ptr() as u64,
            0,
        ) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes `value` under `key` (BPF_ANY).
    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.elem(BPF_MAP_UPDATE_ELEM, Some(key), value.as_ptr() as u64, 0)
    }

    /// The key after `key` (the first one for `None`) into `next`; false
    /// at the end.
    pub fn next_key(&self, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
        let key = key.map_or(0, |k| k.as_ptr() as u64);
        let mut attr = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key,
            value: next.as_mut_ptr() as u64,
            ..ElemAttr::default()
        };
        match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// How many values a per-CPU map holds per key: the possible CPUs.
pub fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(text.trim())
        .ok_or_else(|| io::Error::other(format!("unreadable CPU list `{}`", text.trim())))
}

/// The number of CPUs in a list such as `0-3,8`: its largest one plus one,
/// as the kernel sizes per-CPU values.
fn parse_cpu_list(list: &str) -> Option<usize> {
    list.split(',')
        .map(|part| part.rsplit('-').next()?.parse::<usize>().ok())
        .try_fold(0, |max, last| Some(max.max(last? + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_count_up_to_their_largest_cpu() {
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-1"), Some(2));
        assert_eq!(parse_cpu_list("0-3,8-11"), Some(12));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn attribute_layouts_match_the_kernels() {
        // Offsets of include/uapi/linux/bpf.h.
        assert_eq!(size_of::<ElemAttr>(), 32);
        assert_eq!(size_of::<AttachAttr>(), 32);
        assert_eq!(std::mem::offset_of!(QueryAttr, count), 24);
        assert_eq!(std::mem::offset_of!(QueryAttr, revision), 56);
        assert_eq!(std::mem::offset_of!(ProgInfo, nr_map_ids), 52);
        assert_eq!(std::mem::offset_of!(ProgInfo, map_ids), 56);
        assert_eq!(std::mem::offset_of!(MapInfo, name), 24);
    }
}
