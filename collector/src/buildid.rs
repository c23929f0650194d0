//! Build-ids of mapped files, read from their ELF notes (for maps.json), so the analyzer can
//! check it symbolizes the very binary that was sampled; and the running kernel's vDSO
//! image, which no file holds.

use crate::records::Mapping;
use std::collections::HashMap;

/// The GNU build-id of an ELF file, as lowercase hex. The file is mapped, not read: only
/// the pages holding the headers and the note are touched (binaries with debug info run to
/// hundreds of megabytes).
pub fn read_build_id(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    // Without blocking, and regular files only: a FIFO or a device in a mapping's place
    // has no build-id and must not hang the recorder.
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    // SAFETY: read-only private mapping; a file truncated under us would fault, which for
    // mapped executables of a live process does not happen.
    let data = unsafe { memmap2::Mmap::map(&f) }.ok()?;
    image_build_id(&data)
}

/// The GNU build-id in an ELF notes blob (/sys/kernel/notes, a module's
/// .note.gnu.build-id), hex.
pub fn build_id_from_notes(notes: &[u8]) -> Option<String> {
    let mut p = 0usize;
    let u32_at = |p: usize| notes.get(p..p + 4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes);
    while p + 12 <= notes.len() {
        let (namesz, descsz, ty) = (u32_at(p)? as usize, u32_at(p + 4)? as usize, u32_at(p + 8)?);
        let name_at = p + 12;
        let desc_at = name_at + namesz.div_ceil(4) * 4;
        let end = desc_at.checked_add(descsz.div_ceil(4) * 4)?;
        if end > notes.len() + 3 {
            return None;
        }
        // NT_GNU_BUILD_ID (3), name "GNU\0".
        if ty == 3 && notes.get(name_at..name_at + namesz) == Some(b"GNU\0") {
            let d = notes.get(desc_at..desc_at + descsz)?;
            return Some(d.iter().map(|b| format!("{b:02x}")).collect());
        }
        p = end;
    }
    None
}

/// The running kernel's build-id (/sys/kernel/notes): what a recording needs to check,
/// later and elsewhere, that kernel symbols belong to the kernel it sampled.
pub fn running_kernel_build_id() -> Option<String> {
    std::fs::read("/sys/kernel/notes").ok().and_then(|b| build_id_from_notes(&b))
}

/// The address of `_text` in a kallsyms text (`ADDRESS TYPE NAME` lines); None when
/// absent or hidden (all zeros, as /proc/kallsyms shows it to an unprivileged reader).
pub fn kallsyms_text_address(kallsyms: &[u8]) -> Option<u64> {
    kallsyms.split(|&b| b == b'\n').find_map(|l| {
        let l = std::str::from_utf8(l).ok()?;
        let mut f = l.split_whitespace();
        let (a, _, n) = (f.next()?, f.next()?, f.next()?);
        (n == "_text").then(|| u64::from_str_radix(a, 16).ok()).flatten().filter(|&a| a != 0)
    })
}

/// The running kernel's vDSO image as mapped into this process (the `[vdso]` line of
/// /proc/self/maps, read through /proc/self/mem): no file holds it, but every 64-bit
/// process on this boot maps the same image, so a recording made here can be named by it.
pub fn running_vdso_image() -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.trim_end().ends_with("[vdso]"))?;
    let (lo, hi) = line.split_whitespace().next()?.split_once('-')?;
    let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
    // A vDSO is a few pages; anything else is not what this reads.
    let len = usize::try_from(hi.checked_sub(lo)?).ok().filter(|&n| n > 0 && n <= 1 << 20)?;
    let mut f = std::fs::File::open("/proc/self/mem").ok()?;
    f.seek(SeekFrom::Start(lo)).ok()?;
    let mut buf = vec![0u8; len];
    f.read_exact(&mut buf).ok()?;
    Some(buf)
}

/// The build-id of an ELF image in memory, hex.
pub fn image_build_id(image: &[u8]) -> Option<String> {
    use object::Object;
    let file = object::File::parse(image).ok()?;
    let id = file.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

/// Fill in build-ids the kernel did not supply, reading each distinct file once. A
/// `[vdso]` mapping gets the running vDSO's build-id when its length is that image's (a
/// 32-bit process's vDSO is another image, of another length, and stays without).
pub fn fill_build_ids(maps: &mut [Mapping]) {
    let mut cache: HashMap<String, Option<String>> = HashMap::new();
    let mut vdso: Option<Option<(u64, String)>> = None;
    for m in maps.iter_mut() {
        if m.build_id.is_none() && m.path == "[vdso]" {
            let running = vdso.get_or_insert_with(|| {
                running_vdso_image().and_then(|img| Some((img.len() as u64, image_build_id(&img)?)))
            });
            if let Some((len, id)) = running {
                if *len == m.len {
                    m.build_id = Some(id.clone());
                }
            }
            continue;
        }
        if m.build_id.is_some() || !m.path.starts_with('/') {
            continue;
        }
        let id = cache.entry(m.path.clone()).or_insert_with(|| read_build_id(std::path::Path::new(&m.path)));
        m.build_id = id.clone();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_running_vdso_is_an_elf_image_with_a_build_id_and_fills_its_mapping() {
        let Some(img) = super::running_vdso_image() else {
            eprintln!("skipped: this process has no readable [vdso] mapping");
            return;
        };
        assert_eq!(&img[..4], b"\x7fELF");
        let id = super::image_build_id(&img).expect("the vDSO carries a build-id note");
        assert!(id.len() >= 32 && id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        let m = |len: u64| crate::records::Mapping {
            time: 0,
            pid: 1,
            tid: 1,
            start: 0x7fff_0000_0000,
            len,
            pgoff: 0,
            path: "[vdso]".into(),
            build_id: None,
        };
        let mut maps = vec![m(img.len() as u64), m(img.len() as u64 + 4096)];
        super::fill_build_ids(&mut maps);
        assert_eq!(maps[0].build_id.as_deref(), Some(id.as_str()));
        assert_eq!(maps[1].build_id, None, "another image's length is not this vDSO");
    }

    #[test]
    fn text_address_from_kallsyms_only_when_visible() {
        let k = b"ffffffff81000000 T _stext\nffffffff81000000 T _text\nffffffff81000100 t f\n";
        assert_eq!(super::kallsyms_text_address(k), Some(0xffff_ffff_8100_0000));
        assert_eq!(super::kallsyms_text_address(b"0000000000000000 T _text\n"), None, "hidden addresses");
        assert_eq!(super::kallsyms_text_address(b"ffffffff81000000 T _stext\n"), None);
    }
}
