//! Test helpers: the mapping of this test binary's own code, as the kernel reports it, so
//! hand-made recordings can point samples at real forwarder functions.

#![allow(dead_code)]

use collector::records::Mapping;

/// The executable mapping of this test binary that holds `addr`.
pub fn own_mapping(addr: u64, pid: u32) -> Mapping {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for l in maps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (a, b) = f[0].split_once('-').unwrap();
        let (a, b) = (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap());
        if addr >= a && addr < b {
            return Mapping {
                time: 0,
                pid,
                tid: pid,
                start: a,
                len: b - a,
                pgoff: u64::from_str_radix(f[2], 16).unwrap(),
                path: f[5].to_string(),
                build_id: None,
            };
        }
    }
    panic!("no mapping for {addr:#x}");
}
