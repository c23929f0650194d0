//! Kernel symbol sources: a kallsyms text (`--kallsyms`, a recording's snapshot) and an ELF
//! notes blob (/sys/kernel/notes, a module's build-id note). Any input parses or is
//! refused; lookups, the reference search and a KASLR shift never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = analyzer::symbolize::kernel::build_id_from_notes(data);
    let text = String::from_utf8_lossy(data);
    let mut k = analyzer::symbolize::Kallsyms::parse(&text);
    let at = k.address_of("_text");
    k.shift(-0x1000_0000);
    for a in [0u64, 1, 0xffff_ffff_8100_0000, u64::MAX] {
        let _ = k.lookup(a);
    }
    let _ = at;
});
