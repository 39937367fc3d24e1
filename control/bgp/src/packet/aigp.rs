//! AIGP, the Accumulated IGP Metric attribute (RFC 7311): optional non-transitive, type
//! 26, a sequence of TLVs (type 1 octet, length 2 octets counting the whole TLV, value).
//! TLV type 1 is the AIGP TLV with an 8-octet metric. DPF marks a route's primary color
//! with AIGP 0 (draft-wang-idr-dpf §2.2.1).
//!
//! Error handling (RFC 7311 §3, RFC 7606 attribute discard): a TLV that overruns the
//! attribute, an AIGP TLV whose length is not 11, or no AIGP TLV at all make the attribute
//! malformed; it is then discarded and the route kept. Only the first AIGP TLV counts;
//! TLVs of other types are kept and re-sent unchanged.

use super::Reader;

pub const ATTR_TYPE: u8 = 26;
pub const TLV_AIGP: u8 = 1;
const AIGP_TLV_LEN: u16 = 11;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Aigp {
    pub metric: u64,
    /// TLVs other than the first AIGP TLV, (type, value), in the order received.
    pub other: Vec<(u8, Vec<u8>)>,
}

impl Aigp {
    pub fn new(metric: u64) -> Self {
        Aigp {
            metric,
            other: vec![],
        }
    }

    /// `None` = malformed (the caller discards the attribute).
    pub fn decode(value: &[u8]) -> Option<Aigp> {
        let mut r = Reader::new(value);
        let mut metric = None;
        let mut other = Vec::new();
        while !r.is_empty() {
            let t = r.u8()?;
            let len = r.u16()?;
            let body = r.take((len as usize).checked_sub(3)?)?;
            if t == TLV_AIGP {
                if len != AIGP_TLV_LEN {
                    return None;
                }
                if metric.is_none() {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(body);
                    metric = Some(u64::from_be_bytes(b));
                }
                // RFC 7311 §3: all but the first AIGP TLV are disregarded.
                continue;
            }
            other.push((t, body.to_vec()));
        }
        Some(Aigp {
            metric: metric?,
            other,
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![TLV_AIGP];
        out.extend_from_slice(&AIGP_TLV_LEN.to_be_bytes());
        out.extend_from_slice(&self.metric.to_be_bytes());
        for (t, v) in &self.other {
            // A TLV too long for its length field cannot have been received; clip it.
            let v = &v[..v.len().min(u16::MAX as usize - 3)];
            out.push(*t);
            out.extend_from_slice(&((v.len() + 3) as u16).to_be_bytes());
            out.extend_from_slice(v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn vectors() {
        // (value bytes, decoded)
        let table: Vec<(Vec<u8>, Aigp)> = vec![
            (
                // type 1 (AIGP), length 11, metric 0
                vec![0x01, 0x00, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0],
                Aigp::new(0),
            ),
            (
                // type 1, length 11, metric 0x0102030405060708
                vec![0x01, 0x00, 0x0b, 1, 2, 3, 4, 5, 6, 7, 8],
                Aigp::new(0x0102_0304_0506_0708),
            ),
            (
                // AIGP TLV, then an unknown TLV type 9 length 5 value aa bb (kept)
                vec![
                    0x01, 0x00, 0x0b, 0, 0, 0, 0, 0, 0, 0, 7, //
                    0x09, 0x00, 0x05, 0xaa, 0xbb,
                ],
                Aigp {
                    metric: 7,
                    other: vec![(9, vec![0xaa, 0xbb])],
                },
            ),
        ];
        for (bytes, value) in table {
            assert_eq!(Aigp::decode(&bytes).as_ref(), Some(&value));
            assert_eq!(value.encode(), bytes);
        }
    }

    #[test]
    fn second_aigp_tlv_is_disregarded() {
        let bytes = [
            0x01, 0x00, 0x0b, 0, 0, 0, 0, 0, 0, 0, 1, // first: metric 1
            0x01, 0x00, 0x0b, 0, 0, 0, 0, 0, 0, 0, 2, // second: ignored
        ];
        assert_eq!(Aigp::decode(&bytes), Some(Aigp::new(1)));
    }

    /// A kept TLV longer than a TLV length field can say (65535 octets with its 3-octet
    /// header) is clipped to 65532 octets of value, its length field 0xffff.
    #[test]
    fn overlong_other_tlv_is_clipped() {
        let a = Aigp {
            metric: 0,
            other: vec![(9, vec![0xab; 70_000])],
        };
        let bytes = a.encode();
        assert_eq!(bytes.len(), 11 + 65_535);
        assert_eq!(bytes[11..14], [0x09, 0xff, 0xff]);
        assert!(bytes[14..].iter().all(|&b| b == 0xab));
    }

    #[test]
    fn malformed() {
        let table: [&[u8]; 6] = [
            &[],                                      // no AIGP TLV
            &[0x01, 0x00, 0x0a, 0, 0, 0, 0, 0, 0, 0], // AIGP TLV length 10
            &[0x01, 0x00, 0x0b, 0, 0, 0],             // overruns the attribute
            &[0x01, 0x00],                            // truncated TLV header
            &[0x09, 0x00, 0x02],                      // length smaller than the header
            &[0x09, 0x00, 0x03],                      // only an unknown TLV
        ];
        for bytes in table {
            assert_eq!(Aigp::decode(bytes), None, "{bytes:02x?}");
        }
    }

    proptest! {
        #[test]
        fn round_trip(metric in any::<u64>(),
                      other in proptest::collection::vec((2u8.., proptest::collection::vec(any::<u8>(), 0..40)), 0..4)) {
            let a = Aigp { metric, other };
            prop_assert_eq!(Aigp::decode(&a.encode()), Some(a));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Some(a) = Aigp::decode(&bytes) {
                prop_assert_eq!(Aigp::decode(&a.encode()), Some(a));
            }
        }
    }
}
