//! What a file a user named is, told before it is read: not a regular file (a FIFO would
//! hang a read, a device may never end), or a file of one of the kernel's pseudo-filesystems
//! (its size says nothing of what a read gives, and a read may block or consume: a link to
//! /proc/kmsg drains the kernel's log). Shared by every reader of user-named files: the
//! forwarder's route tables, the collector's checked opener, the stats segment.

/// What a file type is, in words, when it is not a regular file.
pub fn not_regular(t: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// The kernel's pseudo-filesystem open file `f` lives on (procfs, sysfs, debugfs, ...), by
/// name; None for a filesystem that stores files.
pub fn pseudo_filesystem(f: &std::fs::File) -> Option<&'static str> {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed statfs is a valid value of the plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs fills the struct for a descriptor the caller owns.
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    match st.f_type as u64 {
        0x9fa0 => Some("procfs"),
        0x6265_6572 => Some("sysfs"),
        0x6462_6720 => Some("debugfs"),
        0x7472_6163 => Some("tracefs"),
        0x7363_6673 => Some("securityfs"),
        0x6367_7270 | 0x0027_e0eb => Some("cgroup filesystem"),
        0xcafe_4a11 => Some("bpf filesystem"),
        0x6265_6570 => Some("configfs"),
        0x6165_676c => Some("pstore"),
        0xde5e_81e4 => Some("efivarfs"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_and_fifos_are_named() {
        let f = std::fs::File::open("/proc/self/status").expect("procfs");
        assert_eq!(pseudo_filesystem(&f), Some("procfs"));
        let d = std::env::temp_dir().join(format!("fwd-abi-kind-{}", std::process::id()));
        std::fs::write(&d, b"x").expect("write");
        let f = std::fs::File::open(&d).expect("open");
        assert_eq!(pseudo_filesystem(&f), None);
        assert_eq!(not_regular(f.metadata().expect("md").file_type()), None);
        std::fs::remove_file(&d).expect("rm");
        let dir = std::fs::metadata("/").expect("root");
        assert_eq!(not_regular(dir.file_type()), Some("a directory"));
    }
}
