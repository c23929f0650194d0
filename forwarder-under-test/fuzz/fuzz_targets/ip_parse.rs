//! Fuzz the ip stage's header checks: any frame is either forwarded (TTL decremented,
//! checksum still valid) or dropped with a reason; nothing panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut frame = data.to_vec();
    if let Ok(_h) = forwarder::stages::ip::ip_validate_and_forward(&mut frame) {
        assert_eq!(forwarder::packet::checksum(&frame[14..34]), 0);
    } else {
        assert_eq!(frame, data, "a dropped frame is left as it was");
    }
});
