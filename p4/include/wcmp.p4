/* fare: WCMP member selection and next-hop rewrite (v1model externs).
 *
 * The group table is keyed by the group id the route chose; its action selector picks one
 * member of the group's action-profile group. Weights are P4Runtime member weights (BMv2
 * replicates a member weight w as w copies, the selector picks a copy uniformly) or, for
 * targets that reject weights, explicit replicated members of weight 1: same table, same
 * program.
 *
 * The selector hash is `identity`, so the selector input alone decides the copy:
 *   spray (per packet): input = a per-group packet counter, so copy = counter mod size and
 *                       every window of sum(weights) packets carries exactly w_i on member i.
 * Flow mode is a resilient bucket table instead: the 5-tuple's CRC32 h picks bucket
 * (h * FLOW_BUCKETS) >> 32, wcmp_bucket maps (group, bucket) to a member index and
 * wcmp_member that index to its next hop. The controller re-assigns only the buckets new
 * weights require (fare_model::resilient), so a weight change moves only those flows; a
 * group without bucket entries falls back to the selector (input = h).
 * Flowlet mode (flowlet_gap > 0): registers keep per flow-hash slot the last-seen time,
 * member and group; a flow keeps its member while its packets are at most the gap apart,
 * and a new flowlet takes its bucket's member (so weight changes reach new flowlets only).
 *
 * Members removed by an ARN (arn_removed[slot] = 1, see arn.p4) are skipped at once: the
 * packet is resubmitted with a re-hashed input, at most MAX_RESELECT times; then, when
 * DPF gave the group a fallback (dpf.p4), once more onto that group.
 * A flowlet whose member is gone (no wcmp_member entry) is resubmitted once to pick anew.
 * TNA port (tna/fare_tna.p4): ActionSelector(..., SelectorMode_t.FAIR, ...) with the same
 * keys; the spray counter and the flowlet registers become RegisterActions; resubmit
 * becomes a second selector stage.
 */
#ifndef FARE_WCMP_P4
#define FARE_WCMP_P4

/* ARN removal state, written by ArnReceive and read here: one slot per (neighbor port,
 * Path ID). Slot 0 is never marked (members without an ARN mapping). A removal ends at
 * arn_removed_until (ingress timestamp, microseconds): the hold time comes with the
 * slot's arn_rx entry, because targets need not support register writes from P4Runtime
 * (BMv2's does not). */
register<bit<1>>(ARN_SLOTS)  arn_removed;
register<bit<48>>(ARN_SLOTS) arn_removed_until;

control Wcmp(inout headers_t hdr,
             inout metadata_t meta,
             inout standard_metadata_t standard_metadata) {
    register<bit<32>>(GROUP_TABLE_SIZE) spray_counter;
    action_selector(HashAlgorithm.identity, SELECTOR_SIZE, 32) wcmp_selector;
    counter(MEMBER_COUNTERS, CounterType.packets_and_bytes) member_packets;
    register<bit<48>>(FLOWLET_SLOTS) flowlet_seen;
    register<bit<16>>(FLOWLET_SLOTS) flowlet_member;
    register<bit<16>>(FLOWLET_SLOTS) flowlet_group;

    /* One member: the egress port and the MACs of the hop toward the neighbor. arn_slot is
     * the ARN removal slot this member belongs to; member_index its counter. */
    action set_nexthop(bit<9> port, mac_addr_t dst_mac, mac_addr_t src_mac,
                       bit<16> arn_slot, bit<16> member_index) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        meta.arn_slot = arn_slot;
        meta.member_index = member_index;
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* Flow mode: bucket -> member index (the member's counter index, stable while the
     * member stays in the group). */
    action set_bucket_member(bit<16> member_index) {
        meta.member_index = member_index;
        meta.have_member = 1;
    }

    table wcmp_bucket {
        key = {
            meta.group_id: exact @name("group_id");
            meta.bucket:   exact @name("bucket");
        }
        actions = { set_bucket_member; @defaultonly NoAction; }
        const default_action = NoAction();
        size = BUCKET_TABLE_SIZE;
    }

    action member_gone() {
        meta.member_gone = 1;
    }

    /* Member index -> next hop, for flow and flowlet mode. */
    table wcmp_member {
        key = { meta.member_index: exact @name("member_index"); }
        actions = { set_nexthop; @defaultonly member_gone; }
        const default_action = member_gone();
        size = MEMBER_COUNTERS;
    }

    table wcmp_group {
        key = {
            meta.group_id: exact @name("group_id");
            meta.selector_input: selector @name("selector_input");
        }
        actions = { set_nexthop; @defaultonly drop; }
        const default_action = drop();
        implementation = wcmp_selector;
        size = GROUP_TABLE_SIZE;
    }

    apply {
        if (meta.spray == 1) {
            bit<32> count;
            spray_counter.read(count, (bit<32>)meta.group_id);
            spray_counter.write((bit<32>)meta.group_id, count + 1);
            meta.selector_input = count;
        } else {
            meta.selector_input = meta.flow_hash;
        }
        if (meta.reselect != 0) {
            hash(meta.selector_input, HashAlgorithm.crc32, 32w0,
                 { meta.selector_input, meta.reselect }, 64w4294967296);
        }

        meta.have_member = 0;
        meta.flowlet_pinned = 0;
        meta.member_gone = 0;
        if (meta.spray == 0) {
            bit<64> scaled = ((bit<64>)meta.selector_input) * FLOW_BUCKETS;
            meta.bucket = (bit<16>)(scaled >> 32);
            bit<32> fslot = 0;
            bit<48> now = standard_metadata.ingress_global_timestamp;
            if (meta.flowlet_gap != 0) {
                hash(fslot, HashAlgorithm.crc32, 32w0, { meta.flow_hash, meta.group_id },
                     (bit<32>)FLOWLET_SLOTS);
                bit<48> seen;
                bit<16> member;
                bit<16> group;
                flowlet_seen.read(seen, fslot);
                flowlet_member.read(member, fslot);
                flowlet_group.read(group, fslot);
                if (meta.reselect == 0 && meta.flowlet_reset == 0 && seen != 0
                        && group == meta.group_id
                        && now - seen <= (bit<48>)meta.flowlet_gap) {
                    meta.member_index = member;
                    meta.have_member = 1;
                    meta.flowlet_pinned = 1;
                }
            }
            if (meta.flowlet_pinned == 0) {
                wcmp_bucket.apply();
            }
            if (meta.flowlet_gap != 0 && meta.have_member == 1) {
                flowlet_seen.write(fslot, now);
                flowlet_member.write(fslot, meta.member_index);
                flowlet_group.write(fslot, meta.group_id);
            }
        }
        if (meta.have_member == 1) {
            wcmp_member.apply();
        } else {
            wcmp_group.apply();
        }
        if (meta.member_gone == 1) {
            if (meta.flowlet_pinned == 1 && meta.flowlet_reset == 0) {
                meta.flowlet_reset = 1;
                resubmit_preserving_field_list(FL_RESUBMIT);
            } else {
                mark_to_drop(standard_metadata);
            }
            return;
        }

        bit<1> removed = 0;
        if (meta.arn_slot != 0) {
            arn_removed.read(removed, (bit<32>)meta.arn_slot);
        }
        if (removed == 1) {
            bit<48> until;
            arn_removed_until.read(until, (bit<32>)meta.arn_slot);
            if (standard_metadata.ingress_global_timestamp >= until) {
                /* Revoked by timeout (no Type 2/4 arrived). */
                arn_removed.write((bit<32>)meta.arn_slot, 0);
                removed = 0;
            }
        }
        if (removed == 1 && meta.reselect < MAX_RESELECT) {
            meta.reselect = meta.reselect + 1;
            resubmit_preserving_field_list(FL_RESUBMIT);
        } else if (removed == 1 && meta.dpf_fallback == 0 && meta.fallback_group != 0) {
            /* DPF: every member seems removed; once more on the fallback group (dpf.p4). */
            meta.dpf_fallback = 1;
            meta.fallback_target = meta.fallback_group;
            meta.reselect = 0;
            resubmit_preserving_field_list(FL_RESUBMIT);
        } else {
            member_packets.count((bit<32>)meta.member_index);
            if (hdr.ipv4.isValid()) {
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            } else if (hdr.ipv6.isValid()) {
                hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
            }
        }
    }
}

/* 5-tuple hash for per-flow mode. */
control FlowHash(in headers_t hdr, inout metadata_t meta) {
    apply {
        if (hdr.ipv4.isValid()) {
            hash(meta.flow_hash, HashAlgorithm.crc32, 32w0,
                 { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                   meta.l4_src_port, meta.l4_dst_port }, 64w4294967296);
        } else if (hdr.ipv6.isValid()) {
            hash(meta.flow_hash, HashAlgorithm.crc32, 32w0,
                 { hdr.ipv6.src_addr, hdr.ipv6.dst_addr, hdr.ipv6.next_hdr,
                   meta.l4_src_port, meta.l4_dst_port }, 64w4294967296);
        }
    }
}

#endif
