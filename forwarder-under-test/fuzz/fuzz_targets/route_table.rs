//! Fuzz the route-table parser: any text loads or fails with a located error; nothing panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = forwarder::table::RouteTable::parse(data, std::path::Path::new("fuzz"), &Default::default());
});
