//! What the fuzz targets check, run as property tests in every CI run (cargo fuzz needs a
//! nightly toolchain): arbitrary frames and arbitrary table text never panic, and the
//! outcome is either a valid forwarded frame or an untouched drop / a located error.

use forwarder::packet::checksum;
use forwarder::stages::ip::ip_validate_and_forward;
use forwarder::table::RouteTable;
use proptest::prelude::*;
use std::path::Path;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn arbitrary_frames(data in prop::collection::vec(any::<u8>(), 0..80), ipv4 in any::<bool>()) {
        let mut frame = data.clone();
        if ipv4 && frame.len() > 14 {
            // Half the cases get a plausible start so the deeper checks are reached.
            frame[12] = 0x08;
            frame[13] = 0x00;
            frame[14] = 0x45;
        }
        let before = frame.clone();
        match ip_validate_and_forward(&mut frame) {
            Ok(_) => prop_assert_eq!(checksum(&frame[14..34]), 0),
            Err(_) => prop_assert_eq!(frame, before),
        }
    }

    #[test]
    fn arbitrary_table_text(lines in prop::collection::vec("[0-9./a-z ]{0,40}", 1..10)) {
        let text = lines.join("\n");
        if let Err(e) = RouteTable::parse(text.as_bytes(), Path::new("p.txt"), &Default::default()) {
            prop_assert!(e.to_string().starts_with("p.txt:"), "{}", e);
        }
    }
}
