#![no_main]

use fare_arn::ArnMessage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = ArnMessage::decode(data) {
        let again = msg.encode().expect("a decoded message always encodes");
        assert_eq!(again.len(), data.len());
        assert_eq!(ArnMessage::decode(&again).as_ref(), Ok(&msg));
    }
});
