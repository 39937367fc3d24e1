#![no_main]

//! BGP message decoder: never panics on any input; whatever decodes re-encodes to bytes
//! that decode to the same message (UPDATEs: the same attributes and prefixes, minus the
//! attributes RFC 7606 had discarded).

use fare::bgp::packet::{Context, Message, HEADER_LEN, MARKER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, body)) = data.split_first() else {
        return;
    };
    let ctx = Context {
        four_octet_as: knobs & 0x80 != 0,
    };
    // The low bits pick the message type; the rest of the input is the body.
    let mut msg = MARKER.to_vec();
    msg.extend_from_slice(&((HEADER_LEN + body.len()).min(u16::MAX as usize) as u16).to_be_bytes());
    msg.push(knobs & 0x07);
    msg.extend_from_slice(body);
    let _ = fare::bgp::packet::frame_len(&msg);
    let Ok(first) = Message::decode(&msg, ctx) else {
        return;
    };
    let bytes = first.encode(ctx);
    if bytes.len() > fare::bgp::packet::MAX_MESSAGE_LEN {
        return;
    }
    let again = Message::decode(&bytes, ctx).expect("a re-encoded message decodes");
    match (&first, &again) {
        (Message::Update(a), Message::Update(b)) => {
            assert_eq!(a.attributes, b.attributes);
            assert_eq!(a.nlri, b.nlri);
            assert_eq!(a.withdrawn, b.withdrawn);
        }
        _ => assert_eq!(first, again),
    }
});
