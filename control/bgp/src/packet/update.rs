//! UPDATE (RFC 4271 §4.3) with RFC 7606 revised error handling: the decoder decides the
//! outcome (session reset = `Err`; attribute discard / treat-as-withdraw = `errors`).

use super::attribute::PathAttributes;
use super::error::{code, update as sub, AttrAction, AttrError, MessageError};
use super::{nlri, Context, Family, Reader, HEADER_LEN, MAX_MESSAGE_LEN};
use ipnet::IpNet;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Update {
    /// IPv4 prefixes withdrawn in the message body.
    pub withdrawn: Vec<IpNet>,
    pub attributes: PathAttributes,
    /// IPv4 prefixes announced in the message body.
    pub nlri: Vec<IpNet>,
    /// Malformed attributes RFC 7606 let us survive (not encoded).
    pub errors: Vec<AttrError>,
}

impl Update {
    /// RFC 7606: every prefix of this UPDATE must be handled as withdrawn.
    pub fn treat_as_withdraw(&self) -> bool {
        self.errors
            .iter()
            .any(|e| e.action == AttrAction::TreatAsWithdraw)
    }

    /// Every announced prefix (body and MP_REACH_NLRI).
    pub fn announced(&self) -> impl Iterator<Item = IpNet> + '_ {
        self.nlri.iter().copied().chain(
            self.attributes
                .mp_reach
                .iter()
                .flat_map(|m| m.nlri.iter().copied()),
        )
    }

    /// Every withdrawn prefix (body and MP_UNREACH_NLRI).
    pub fn withdrawn_all(&self) -> impl Iterator<Item = IpNet> + '_ {
        self.withdrawn.iter().copied().chain(
            self.attributes
                .mp_unreach
                .iter()
                .flat_map(|m| m.withdrawn.iter().copied()),
        )
    }

    pub(super) fn decode(body: &[u8], ctx: Context) -> Result<Update, MessageError> {
        let list_err =
            |reason| MessageError::new(code::UPDATE, sub::MALFORMED_ATTRIBUTE_LIST, vec![], reason);
        let mut r = Reader::new(body);
        let wlen =
            r.u16()
                .ok_or_else(|| list_err("truncated withdrawn routes length"))? as usize;
        let wbuf = r
            .take(wlen)
            .ok_or_else(|| list_err("withdrawn routes length overruns the message"))?;
        let alen =
            r.u16()
                .ok_or_else(|| list_err("truncated path attribute length"))? as usize;
        let abuf = r
            .take(alen)
            .ok_or_else(|| list_err("total path attribute length overruns the message"))?;
        let nbuf = r.rest();
        let bad_nlri = || {
            MessageError::new(
                code::UPDATE,
                sub::INVALID_NETWORK_FIELD,
                vec![],
                "malformed NLRI (RFC 7606 §5.3: session reset)",
            )
        };
        let withdrawn = nlri::decode(wbuf, Family::Ipv4Unicast).ok_or_else(bad_nlri)?;
        let nlri = nlri::decode(nbuf, Family::Ipv4Unicast).ok_or_else(bad_nlri)?;
        let mut errors = Vec::new();
        let attributes = PathAttributes::decode(abuf, ctx, &mut errors)?;
        let mut update = Update {
            withdrawn,
            attributes,
            nlri,
            errors,
        };
        update.check_mandatory();
        Ok(update)
    }

    /// RFC 7606 §3(d): a missing well-known mandatory attribute -> treat-as-withdraw.
    fn check_mandatory(&mut self) {
        let a = &self.attributes;
        let reach =
            !self.nlri.is_empty() || a.mp_reach.as_ref().is_some_and(|m| !m.nlri.is_empty());
        if !reach || self.treat_as_withdraw() {
            return;
        }
        let missing = if a.origin.is_none() {
            Some(super::attribute::attr_type::ORIGIN)
        } else if a.as_path.is_none() {
            Some(super::attribute::attr_type::AS_PATH)
        } else if !self.nlri.is_empty() && a.next_hop.is_none() {
            Some(super::attribute::attr_type::NEXT_HOP)
        } else {
            None
        };
        if let Some(type_code) = missing {
            self.errors.push(AttrError {
                type_code,
                action: AttrAction::TreatAsWithdraw,
                subcode: sub::MISSING_WELL_KNOWN,
                reason: "missing well-known mandatory attribute",
            });
        }
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>, ctx: Context) {
        let mut w = Vec::new();
        nlri::encode(&self.withdrawn, &mut w);
        out.extend_from_slice(&(w.len() as u16).to_be_bytes());
        out.extend_from_slice(&w);
        let mut a = Vec::new();
        self.attributes.encode(ctx, &mut a);
        out.extend_from_slice(&(a.len() as u16).to_be_bytes());
        out.extend_from_slice(&a);
        nlri::encode(&self.nlri, out);
    }
}

/// Splits an announcement of many prefixes sharing `attributes` into UPDATEs that each fit
/// in 4096 octets. IPv4 prefixes go in the body, IPv6 ones in MP_REACH_NLRI.
pub fn pack(attributes: &PathAttributes, prefixes: &[IpNet], ctx: Context) -> Vec<Update> {
    let mut base = Vec::new();
    attributes.encode(ctx, &mut base);
    // Attributes too large to leave room for one prefix (an IPv6 /128 takes 17 octets)
    // cannot be sent without Extended Messages (RFC 8654 §4): no UPDATE at all.
    let Some(budget) = (MAX_MESSAGE_LEN - HEADER_LEN - 4 - 8)
        .checked_sub(base.len())
        .filter(|b| *b >= 17)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut chunk: Vec<IpNet> = Vec::new();
    let mut used = 0;
    let flush = |chunk: &mut Vec<IpNet>, out: &mut Vec<Update>| {
        if chunk.is_empty() {
            return;
        }
        let mut u = Update {
            attributes: attributes.clone(),
            ..Default::default()
        };
        let nets = std::mem::take(chunk);
        match attributes.mp_reach.as_ref() {
            Some(m) => {
                if let Some(mr) = u.attributes.mp_reach.as_mut() {
                    mr.nlri = nets;
                    mr.family = m.family;
                }
            }
            None => u.nlri = nets,
        }
        out.push(u);
    };
    for p in prefixes {
        let n = nlri::encoded_len(p);
        if used + n > budget {
            flush(&mut chunk, &mut out);
            used = 0;
        }
        chunk.push(*p);
        used += n;
    }
    flush(&mut chunk, &mut out);
    out
}

/// Splits withdrawals into UPDATEs that fit in 4096 octets (IPv4 in the body, IPv6 in
/// MP_UNREACH_NLRI).
pub fn pack_withdraw(prefixes: &[IpNet]) -> Vec<Update> {
    let budget = MAX_MESSAGE_LEN - HEADER_LEN - 4 - 16;
    let mut out = Vec::new();
    for family in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
        let nets: Vec<IpNet> = prefixes
            .iter()
            .copied()
            .filter(|p| nlri::family_of(p) == family)
            .collect();
        let mut chunk = Vec::new();
        let mut used = 0;
        let mut emit = |chunk: Vec<IpNet>| {
            let mut u = Update::default();
            match family {
                Family::Ipv4Unicast => u.withdrawn = chunk,
                Family::Ipv6Unicast => {
                    u.attributes.mp_unreach = Some(super::MpUnreach {
                        family,
                        withdrawn: chunk,
                    })
                }
            }
            out.push(u);
        };
        for p in nets {
            let n = nlri::encoded_len(&p);
            if used + n > budget {
                emit(std::mem::take(&mut chunk));
                used = 0;
            }
            chunk.push(p);
            used += n;
        }
        if !chunk.is_empty() {
            emit(chunk);
        }
    }
    out
}
