/* fare for the Tofino Native Architecture (TNA): Tofino 1 (tna), and Tofino 2 (t2na).
 *
 * Compiled by p4c's open-source Tofino back end (`make -C p4 tna`, docs/p4.md "TNA"):
 * Tofino 1 in 12 of its 12 ingress stages, Tofino 2 in 14 of 20. It shows, and keeps
 * honest, what a TNA port shares with fare.p4 (v1model):
 *
 *   shared as is:  include/headers.p4 (headers, metadata, constants), include/routing.p4
 *                  (route tables and actions), include/dpf.p4 (DPF flow rules and
 *                  per-color groups), include/parser.p4 (every parser state and
 *                  the deparser's emit order);
 *   rewritten:     the externs — ActionSelector + Hash instead of action_selector + hash(),
 *                  Register/RegisterAction instead of register read/write, Counter,
 *                  Mirror (egress-to-egress) instead of clone, Resubmit instead of
 *                  resubmit_preserving_field_list, and TNA's intrinsic metadata.
 *
 * The control instance names and table, action, parameter, counter and register names are
 * those of fare.p4 (FareIngress.routing.route_v4, FareIngress.wcmp.wcmp_group,
 * FareIngress.wcmp.set_nexthop, FareIngress.arn_receive.arn_rx, ...), so fare's P4Runtime
 * backend, which resolves everything by name from the P4Info, drives both programs.
 * Differences a controller sees: Tofino selectors may reject member weights
 * (GroupForm::Replicated writes w members of weight 1); a removed member is skipped by at
 * most one resubmission (Tofino resubmits a packet once); ARN truncation is the mirror
 * session's max packet length (CloneSessionEntry.packet_length_bytes); DPF's fallback
 * resubmission (group_fallback) is not ported, so a color group whose members are all
 * removed keeps its last member until BGP moves the route. ARN generation sends Type 1 on
 * the upward crossing only (no refresh while congested) with Metric 127 (the level of a
 * queue at the high mark with the default limit), not fare.p4's level of the depth at the
 * time; reception, the
 * addressed-to-switch check, the Version / Type / Para-Type checks, Type 2 with Metric 0
 * and the queue probes are as in fare.p4. Flow mode's bucket table (wcmp_bucket,
 * wcmp_member) is fare.p4's; flowlet mode keeps its state in two registers (time; member
 * and group) with a 1.024 us clock, and a flowlet whose member left the group re-picks
 * on the one resubmission (fare.p4: a separate resubmission).
 */
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

#define CPU_PORT 192
#define ARN_MIRROR_TYPE 1
#define RESUBMIT_RESELECT 1

/* p4c's Tofino backend takes range keys of at most 5 nibbles: DPF's QP ranges cover QPs
 * below 2^20 here (include/dpf.p4). */
#define DPF_QP_RANGE_BITS 20
/* Fewer DPF flow rule entries than fare.p4's 1024: the wide ternary key (two IPv6
 * addresses, port and QP ranges) of 1024 entries took three stages of TCAM. */
#define FLOW_RULE_SIZE 256
/* Tofino's parser has three match registers: too few to keep the ARN's Para-Type live
 * through the flow identifier's states (include/parser.p4). */
#define ARN_PATH_ID_ONLY
#include "../include/headers.p4"
#include "../include/parser.p4"
#include "../include/routing.p4"
#include "../include/dpf.p4"
#include "../include/arn_addressed.p4"

/* First byte of every packet entering egress: 0 = bridged from ingress (a punt to the
 * controller included), 1 = ARN copy, 2 = queue probe from the controller. */
header bridged_h {
    bit<8>  kind;          // 0 or 2
}

/* Carried by the ARN mirror copy from the egress deparser to the egress parser. */
header arn_mirror_h {
    bit<8>  kind;          // 1 = ARN copy
    bit<8>  arn_type;
    bit<32> arn_path_id;
}

/* Carried by a resubmitted packet (TNA resubmit data, 8 bytes on Tofino 1). */
header resubmit_h {
    bit<8>  reselect;
    bit<56> pad;
}

/* A flowlet slot's member and group: the two 16-bit halves of one register word. */
struct flowlet_pair_t {
    bit<16> member;
    bit<16> group;
}

struct tna_ingress_metadata_t {
    metadata_t   fare;
    bridged_h    bridged;
    resubmit_h   resubmit;
    bit<1>       removed;
    /* The ARN deadlines' clock: the ingress timestamp in 65.536 us units (ns >> 16, a
     * container-aligned slice), read once; and the hold of the ARN path in those units. */
    bit<32>      now;
    bit<32>      hold;
    bit<32>      deadline;   // now + hold: what an ARN Type 1/3 writes to its slot
    /* Flowlet clock: the ingress timestamp in 1.024 us units (ns >> 10), compared with
     * set_group's flowlet_gap_us as if those were microseconds (2.4 % longer). */
    bit<32>      flowlet_now;
    bit<32>      flowlet_idle;
    bit<32>      flowlet_over;
}

struct tna_egress_metadata_t {
    metadata_t   fare;
    bridged_h    bridged;
    arn_mirror_h mirror;
    MirrorId_t   session;
}

parser IngressParser(packet_in packet,
                     out headers_t hdr,
                     out tna_ingress_metadata_t meta,
                     out ingress_intrinsic_metadata_t ig_intr_md) {
    FarePacketParser() packet_parser;
    FarePacketParser() controller_parser;

    state start {
        packet.extract(ig_intr_md);
        meta.fare.reselect = 0;
        transition select(ig_intr_md.resubmit_flag) {
            1: parse_resubmit;
            default: parse_port_metadata;
        }
    }

    state parse_resubmit {
        packet.extract(meta.resubmit);
        meta.fare.reselect = meta.resubmit.reselect;
        transition parse_packet;
    }

    state parse_port_metadata {
        packet.advance(PORT_METADATA_SIZE);
        transition parse_packet;
    }

    /* Tofino's parser selects on extracted fields only, not on a computed flag: one
     * state per origin, each applying the shared sub-parser with a constant. */
    state parse_packet {
        transition select(ig_intr_md.ingress_port) {
            CPU_PORT: parse_from_controller;
            default: parse_from_port;
        }
    }

    state parse_from_controller {
        controller_parser.apply(packet, hdr, meta.fare, 1);
        transition accept;
    }

    state parse_from_port {
        packet_parser.apply(packet, hdr, meta.fare, 0);
        transition accept;
    }
}

control FlowHash(in headers_t hdr, inout metadata_t meta) {
    Hash<bit<32>>(HashAlgorithm_t.CRC32) hash_v4;
    Hash<bit<32>>(HashAlgorithm_t.CRC32) hash_v6;
    Hash<bit<32>>(HashAlgorithm_t.CRC32) rehash;
    apply {
        if (hdr.ipv4.isValid()) {
            meta.flow_hash = hash_v4.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                           hdr.ipv4.protocol, meta.l4_src_port,
                                           meta.l4_dst_port });
        } else if (hdr.ipv6.isValid()) {
            meta.flow_hash = hash_v6.get({ hdr.ipv6.src_addr, hdr.ipv6.dst_addr,
                                           hdr.ipv6.next_hdr, meta.l4_src_port,
                                           meta.l4_dst_port });
        }
        /* Flow mode's bucket (Wcmp), here beside the hash rather than behind the route's
         * group: the hash's top byte (FLOW_BUCKETS = 256: (h * 256) >> 32), of the
         * re-hashed selector input on a resubmitted pass as in include/wcmp.p4. */
        if (meta.reselect == 0) {
            meta.bucket = (bit<16>)meta.flow_hash[31:24];
        } else {
            bit<32> h = rehash.get({ meta.flow_hash, meta.reselect });
            meta.bucket = (bit<16>)h[31:24];
        }
    }
}

/* Same table, action and counter names as include/wcmp.p4. */
control Wcmp(inout headers_t hdr,
             inout tna_ingress_metadata_t meta,
             in ingress_intrinsic_metadata_t ig_intr_md,
             in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
             inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
             inout ingress_intrinsic_metadata_for_tm_t ig_tm_md)
            (Register<bit<32>, bit<16>> arn_removed_until) {
    Register<bit<32>, bit<16>>(GROUP_TABLE_SIZE) spray_counter;
    RegisterAction<bit<32>, bit<16>, bit<32>>(spray_counter) spray_next = {
        void apply(inout bit<32> value, out bit<32> read_value) {
            read_value = value;
            value = value + 1;
        }
    };
    /* Removal check: 1 while the slot's deadline (meta.now's units) lies ahead. A slot whose deadline passed reads 0: revocation by timeout. */
    RegisterAction<bit<32>, bit<16>, bit<1>>(arn_removed_until) is_removed = {
        void apply(inout bit<32> until, out bit<1> removed) {
            if (meta.now < until) {
                removed = 1;
            } else {
                removed = 0;
            }
        }
    };

    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) selector_hash;
    /* The ActionProfile carries fare.p4's selector name: with standard extern messages
     * (--p4runtime-force-std-externs) it is the P4Info's action profile. */
    ActionProfile(SELECTOR_SIZE) wcmp_selector;
    ActionSelector(wcmp_selector, selector_hash, SelectorMode_t.FAIR, 256, GROUP_TABLE_SIZE)
        wcmp_select;
    Counter<bit<64>, bit<16>>(MEMBER_COUNTERS, CounterType_t.PACKETS_AND_BYTES) member_packets;
    Hash<bit<32>>(HashAlgorithm_t.CRC32) rehash;
    Hash<bit<32>>(HashAlgorithm_t.CRC32) rehash_flow;
    Hash<bit<16>>(HashAlgorithm_t.CRC16) flowlet_hash;

    /* Flowlet mode (include/wcmp.p4's registers as RegisterActions, one access each per
     * pass). flowlet_seen stores the slot's last-seen time and returns the time since
     * (one PHV input: the clock); the gap is compared outside the stateful ALU.
     * flowlet_member keeps the slot's (member, group): flowlet_take writes the bucket's
     * member (a new flowlet), flowlet_keep returns the stored member unless the slot
     * holds another group, which it replaces with the bucket's member. */
    Register<bit<32>, bit<16>>(FLOWLET_SLOTS) flowlet_seen;
    RegisterAction<bit<32>, bit<16>, bit<32>>(flowlet_seen) flowlet_touch = {
        void apply(inout bit<32> seen, out bit<32> idle) {
            idle = meta.flowlet_now - seen;
            seen = meta.flowlet_now;
        }
    };
    Register<flowlet_pair_t, bit<16>>(FLOWLET_SLOTS) flowlet_member;
    RegisterAction<flowlet_pair_t, bit<16>, bit<16>>(flowlet_member) flowlet_take = {
        void apply(inout flowlet_pair_t value) {
            value.member = meta.fare.member_index;
            value.group = meta.fare.group_id;
        }
    };
    RegisterAction<flowlet_pair_t, bit<16>, bit<16>>(flowlet_member) flowlet_keep = {
        void apply(inout flowlet_pair_t value, out bit<16> member) {
            if (value.group != meta.fare.group_id) {
                value.member = meta.fare.member_index;
                value.group = meta.fare.group_id;
            }
            member = value.member;
        }
    };

    /* Idle longer than the gap: idle - gap, which saturates at 0 otherwise. */
    @hidden action flowlet_check() {
        meta.flowlet_over = meta.flowlet_idle |-| meta.fare.flowlet_gap;
    }

    action set_nexthop(PortId_t port, mac_addr_t dst_mac, mac_addr_t src_mac,
                       bit<16> arn_slot, bit<16> member_index) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        meta.fare.arn_slot = arn_slot;
        meta.fare.member_index = member_index;
    }

    action drop() {
        ig_dprsr_md.drop_ctl = 1;
    }

    /* Flow mode's resilient bucket table and member table, as in include/wcmp.p4. */
    action set_bucket_member(bit<16> member_index) {
        meta.fare.member_index = member_index;
        meta.fare.have_member = 1;
    }

    table wcmp_bucket {
        key = {
            meta.fare.group_id: exact @name("group_id");
            meta.fare.bucket:   exact @name("bucket");
        }
        actions = { set_bucket_member; @defaultonly NoAction; }
        const default_action = NoAction();
        size = BUCKET_TABLE_SIZE;
    }

    action member_gone() {
        meta.fare.member_gone = 1;
    }

    table wcmp_member {
        key = { meta.fare.member_index: exact @name("member_index"); }
        actions = { set_nexthop; @defaultonly member_gone; }
        const default_action = member_gone();
        size = MEMBER_COUNTERS;
    }

    table wcmp_group {
        key = {
            meta.fare.group_id: exact @name("group_id");
            meta.fare.selector_input: selector;
        }
        actions = { set_nexthop; @defaultonly drop; }
        const default_action = drop();
        implementation = wcmp_select;
        size = GROUP_TABLE_SIZE;
    }

    apply {
        meta.fare.have_member = 0;
        meta.fare.member_gone = 0;
        if (meta.fare.spray == 1) {
            meta.fare.selector_input = spray_next.execute(meta.fare.group_id);
            if (meta.fare.reselect != 0) {
                meta.fare.selector_input = rehash.get({ meta.fare.selector_input,
                                                        meta.fare.reselect });
            }
        } else {
            /* The flow hash, re-hashed on a resubmitted pass, is the selector input (for
             * a group without bucket entries); FlowHash took the bucket from it. */
            if (meta.fare.reselect == 0) {
                meta.fare.selector_input = meta.fare.flow_hash;
            } else {
                meta.fare.selector_input = rehash_flow.get({ meta.fare.flow_hash,
                                                             meta.fare.reselect });
            }
            wcmp_bucket.apply();
            bit<16> slot = flowlet_hash.get({ meta.fare.flow_hash, meta.fare.group_id });
            if (meta.fare.flowlet_gap != 0) {
                /* Beside the bucket lookup, not behind it: the time is kept for a group
                 * without bucket entries too (it then uses the selector). */
                meta.flowlet_idle = flowlet_touch.execute(slot);
            }
            if (meta.fare.flowlet_gap != 0 && meta.fare.have_member == 1) {
                flowlet_check();
                if (meta.fare.reselect != 0) {
                    /* Steering around a removed member: a new flowlet. */
                    flowlet_take.execute(slot);
                } else if (meta.flowlet_over != 0) {
                    flowlet_take.execute(slot);
                } else {
                    meta.fare.member_index = flowlet_keep.execute(slot);
                }
            }
        }
        if (meta.fare.have_member == 1) {
            wcmp_member.apply();
        } else {
            wcmp_group.apply();
        }
        if (meta.fare.member_gone == 1) {
            /* A flowlet's member left the group: the resubmitted pass (reselect = 1)
             * starts a new flowlet on a re-hashed bucket. */
            if (meta.fare.reselect == 0) {
                meta.resubmit.setValid();
                meta.resubmit.reselect = 1;
                meta.resubmit.pad = 0;
                ig_dprsr_md.resubmit_type = RESUBMIT_RESELECT;
            } else {
                ig_dprsr_md.drop_ctl = 1;
            }
            return;
        }

        meta.removed = 0;
        if (meta.fare.arn_slot != 0) {
            meta.removed = is_removed.execute(meta.fare.arn_slot);
        }
        if (meta.removed == 1 && meta.fare.reselect == 0) {
            /* One more pass with a re-hashed selector input (Tofino resubmits once). */
            meta.resubmit.setValid();
            meta.resubmit.reselect = 1;
            meta.resubmit.pad = 0;
            ig_dprsr_md.resubmit_type = RESUBMIT_RESELECT;
        } else {
            member_packets.count(meta.fare.member_index);
            if (hdr.ipv4.isValid()) {
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            } else if (hdr.ipv6.isValid()) {
                hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
            }
        }
    }
}

/* Same names as ArnReceive in include/arn.p4. */
control ArnReceive(inout headers_t hdr,
                   inout tna_ingress_metadata_t meta,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md)
                  (Register<bit<32>, bit<16>> arn_removed_until) {
    Counter<bit<32>, bit<2>>(4, CounterType_t.PACKETS) arn_rx_counter;

    RegisterAction<bit<32>, bit<16>, bit<1>>(arn_removed_until) remove = {
        void apply(inout bit<32> until) {
            until = meta.deadline;
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<1>>(arn_removed_until) restore = {
        void apply(inout bit<32> until) {
            until = 0;
        }
    };

    action mark_slot(bit<16> slot, bit<48> hold_us) {
        meta.fare.arn_slot = slot;
        meta.hold = hold_us[37:6];   // us / 64: the clock's 65.536 us units, 2.4 % longer
    }

    action unknown_path() {
        meta.fare.arn_slot = 0;
        meta.hold = 0;
    }

    table arn_rx {
        key = {
            ig_intr_md.ingress_port: exact @name("ingress_port");
            hdr.arn_path.path_id: exact @name("path_id");
        }
        actions = { mark_slot; @defaultonly unknown_path; }
        const default_action = unknown_path();
        size = ARN_SLOTS;
    }

    action punt(bit<8> reason) {
        ig_tm_md.ucast_egress_port = CPU_PORT;
        meta.bridged.setValid();   // the egress parser reads it before the packet_in header
        meta.bridged.kind = 0;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = (bit<16>)ig_intr_md.ingress_port;
        hdr.packet_in.reason = reason;
        hdr.packet_in.pad = 0;
    }

    apply {
        bool gtsm = (hdr.ipv4.isValid() && hdr.ipv4.ttl == 255)
                 || (hdr.ipv6.isValid() && hdr.ipv6.hop_limit == 255);
        if (!gtsm) {
            arn_rx_counter.count(2);
            ig_dprsr_md.drop_ctl = 1;
            return;
        }
        /* docs/CODEPOINTS.md: Type 1-4, Version 0, Para-Type bits 2-7 unassigned. */
        if (hdr.arn.arn_type == 0 || hdr.arn.arn_type > ARN_FAILURE_ELIMINATED
                || hdr.arn.version != 0 || (hdr.arn.para_type & 0x3f) != 0) {
            arn_rx_counter.count(3);
            ig_dprsr_md.drop_ctl = 1;
            return;
        }
        meta.fare.arn_slot = 0;
        if (hdr.arn_path.isValid()) {
            arn_rx.apply();
        }
        if (meta.fare.arn_slot == 0) {
            arn_rx_counter.count(1);
            punt(PUNT_REASON_ARN_BAD);
            return;
        }
        if (hdr.arn.arn_type == ARN_CONGESTION_DETECTED || hdr.arn.arn_type == ARN_FAILURE_DETECTED) {
            meta.deadline = meta.now + meta.hold;
            remove.execute(meta.fare.arn_slot);
            arn_rx_counter.count(0);
            punt(PUNT_REASON_ARN);
        } else {
            /* Types 2 and 4 (the only others left by the check above). */
            restore.execute(meta.fare.arn_slot);
            arn_rx_counter.count(0);
            punt(PUNT_REASON_ARN);
        }
    }
}

control FareIngress(inout headers_t hdr,
                    inout tna_ingress_metadata_t meta,
                    in ingress_intrinsic_metadata_t ig_intr_md,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* ARN removal deadlines per slot, shared by reception (write) and Wcmp (read). */
    Register<bit<32>, bit<16>>(ARN_SLOTS) arn_removed_until;
    Routing() routing;
    Dpf() dpf;
    FlowHash() flow_hash;
    /* The register is a constructor argument: a RegisterAction needs it at compile time. */
    Wcmp(arn_removed_until) wcmp;
    ArnAddressed() arn_addressed;
    ArnReceive(arn_removed_until) arn_receive;

    apply {
        meta.now = ig_prsr_md.global_tstamp[47:16];
        meta.flowlet_now = ig_prsr_md.global_tstamp[41:10];
        if (hdr.packet_out.isValid()) {
            ig_tm_md.ucast_egress_port = (PortId_t)hdr.packet_out.egress_port;
            if (hdr.packet_out.flags == PACKET_OUT_PROBE) {
                /* A queue probe: through egress (the ARN monitor), dropped there. */
                meta.bridged.setValid();
                meta.bridged.kind = 2;
            } else {
                ig_tm_md.bypass_egress = 1;
            }
            hdr.packet_out.setInvalid();
            return;
        }
        /* The route lookup comes first for every packet, ARNs too: placed behind the ARN
         * checks it made the forwarding chain one stage longer than the 12 Tofino has. */
        routing.apply(hdr, meta.fare);
        /* DPF's classification and the flow hash only write metadata that Wcmp reads: run
         * for every packet, beside the checks below instead of behind them (one stage
         * earlier each). */
        dpf.apply(hdr, meta.fare);
        flow_hash.apply(hdr, meta.fare);
        bool to_switch = false;
        if (hdr.arn.isValid()) {
            arn_addressed.apply(hdr, to_switch);
        }
        if (to_switch) {
            arn_receive.apply(hdr, meta, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
            return;
        }
        /* An ARN to another node is forwarded like any packet. */
        if (meta.fare.routed == 0) {
            ig_dprsr_md.drop_ctl = 1;
            return;
        }
        if ((hdr.ipv4.isValid() && hdr.ipv4.ttl <= 1)
                || (hdr.ipv6.isValid() && hdr.ipv6.hop_limit <= 1)) {
            ig_dprsr_md.drop_ctl = 1;
            return;
        }
        meta.bridged.setValid();
        meta.bridged.kind = 0;
        wcmp.apply(hdr, meta, ig_intr_md, ig_prsr_md, ig_dprsr_md, ig_tm_md);
    }
}

control IngressDeparser(packet_out packet,
                        inout headers_t hdr,
                        in tna_ingress_metadata_t meta,
                        in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_checksum;
    Resubmit() resubmit;
    FareDeparser() fare_deparser;

    apply {
        if (ig_dprsr_md.resubmit_type == RESUBMIT_RESELECT) {
            resubmit.emit(meta.resubmit);
        }
        packet.emit(meta.bridged);
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update(
                { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                  hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                  hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                  hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        fare_deparser.apply(packet, hdr);
    }
}

/* Egress sees bridged_h then Ethernet onwards; an ARN mirror copy starts with
 * arn_mirror_h; a punt to the controller has bridged_h then the packet_in header, which is
 * left unparsed (it passes as payload). */
parser EgressParser(packet_in packet,
                    out headers_t hdr,
                    out tna_egress_metadata_t meta,
                    out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        packet.extract(eg_intr_md);
        transition select(packet.lookahead<bit<8>>()) {
            1: parse_mirror;
            default: parse_bridged;
        }
    }

    state parse_bridged {
        packet.extract(meta.bridged);
        transition select(eg_intr_md.egress_port) {
            CPU_PORT: accept;
            default: parse_packet;
        }
    }

    state parse_mirror {
        packet.extract(meta.mirror);
        transition parse_packet;
    }

    /* Egress reads no header of the packet: the ARN monitor needs none, normal packets
     * leave as they came, and ArnBuild writes every header of an ARN copy itself (the
     * copy's payload is what the mirror session's length leaves of the original). Parsing
     * here would need more parser match registers than Tofino has (the ARN states). */
    state parse_packet {
        transition accept;
    }
}

/* Same names as ArnMonitor in include/arn.p4. */
control ArnMonitor(inout tna_egress_metadata_t meta,
                   in egress_intrinsic_metadata_t eg_intr_md,
                   inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Register<bit<8>, PortId_t>(PORTS) port_congested;
    Counter<bit<32>, PortId_t>(PORTS, CounterType_t.PACKETS) arn_tx_counter;

    bit<19> short_of_high = 0;
    bit<19> short_of_low = 0;
    bit<32> path_id = 0;
    bit<32> session = 0;

    /* Per-port hysteresis: the depth is compared with the thresholds outside the stateful
     * ALU (it has two comparison units), which then runs one of two actions on the port's
     * state and returns the ARN type to send (0 = none). */
    RegisterAction<bit<8>, PortId_t, bit<8>>(port_congested) enter_congested = {
        void apply(inout bit<8> congested, out bit<8> arn_type) {
            arn_type = 0;
            if (congested == 0) {
                arn_type = ARN_CONGESTION_DETECTED;
            }
            congested = 1;
        }
    };
    RegisterAction<bit<8>, PortId_t, bit<8>>(port_congested) leave_congested = {
        void apply(inout bit<8> congested, out bit<8> arn_type) {
            arn_type = 0;
            if (congested == 1) {
                arn_type = ARN_CONGESTION_ELIMINATED;
            }
            congested = 0;
        }
    };

    /* Same parameters as fare.p4's monitor; limit_packets, metric_scale and refresh_us
     * are taken and not used here (no multiply for the scaled Metric, no refresh: see the
     * file comment). */
    action monitor(bit<19> high_threshold, bit<19> low_threshold, bit<19> limit_packets,
                   bit<40> metric_scale, bit<48> refresh_us, bit<32> neighbor_router_id,
                   bit<32> clone_session) {
        /* A gateway compares a field with a constant only: the action computes saturating
         * differences, 0 when the depth is at or above the threshold. */
        short_of_high = high_threshold |-| eg_intr_md.enq_qdepth;
        short_of_low = low_threshold |-| eg_intr_md.enq_qdepth;
        path_id = neighbor_router_id;
        session = clone_session;
    }

    table arn_monitor {
        key = { eg_intr_md.egress_port: exact @name("egress_port"); }
        actions = { monitor; @defaultonly NoAction; }
        const default_action = NoAction();
        size = PORTS;
    }

    apply {
        if (arn_monitor.apply().hit) {
            meta.fare.arn_type = 0;
            if (short_of_high == 0) {
                meta.fare.arn_type = enter_congested.execute(eg_intr_md.egress_port);
            } else if (short_of_low != 0) {
                meta.fare.arn_type = leave_congested.execute(eg_intr_md.egress_port);
            }
            if (meta.fare.arn_type != 0) {
                arn_tx_counter.count(eg_intr_md.egress_port);
                meta.mirror.setValid();
                meta.mirror.kind = 1;
                meta.mirror.arn_type = meta.fare.arn_type;
                meta.mirror.arn_path_id = path_id;
                meta.session = (MirrorId_t)session;
                eg_dprsr_md.mirror_type = ARN_MIRROR_TYPE;
            }
        }
    }
}

/* Same names as ArnBuild in include/arn.p4. */
control ArnBuild(inout headers_t hdr, in tna_egress_metadata_t meta,
                 in egress_intrinsic_metadata_t eg_intr_md,
                 inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    action drop() {
        eg_dprsr_md.drop_ctl = 1;
    }

    action encap_v4(mac_addr_t dst_mac, mac_addr_t src_mac, ipv4_addr_t src_addr,
                    ipv4_addr_t dst_addr) {
        hdr.packet_in.setInvalid();
        hdr.ipv6.setInvalid();
        hdr.tcp.setInvalid();
        hdr.bth.setInvalid();   // a RoCEv2 packet's BTH would sit where the ARN goes
        hdr.arn_flow.setInvalid();
        hdr.arn_src4.setInvalid();
        hdr.arn_src6.setInvalid();
        hdr.arn_dst4.setInvalid();
        hdr.arn_dst6.setInvalid();
        hdr.arn_sport.setInvalid();
        hdr.arn_dport.setInvalid();
        hdr.ethernet.setValid();
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.ipv4.setValid();
        hdr.ipv4.version = 4;
        hdr.ipv4.ihl = 5;
        hdr.ipv4.dscp = DSCP_CS6;
        hdr.ipv4.ecn = 0;
        hdr.ipv4.total_len = 20 + 8 + 8;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 0b010;
        hdr.ipv4.frag_offset = 0;
        hdr.ipv4.ttl = 255;
        hdr.ipv4.protocol = IPPROTO_UDP;
        hdr.ipv4.src_addr = src_addr;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.setValid();
        hdr.udp.src_port = ARN_UDP_PORT;
        hdr.udp.dst_port = ARN_UDP_PORT;
        hdr.udp.length = 8 + 8;
        hdr.udp.checksum = 0;
        hdr.arn.setValid();   // filled below, from constants only
        hdr.arn_path.setValid();
        hdr.arn_path.path_id = meta.mirror.arn_path_id;
        /* The payload is cut by the mirror session's max packet length. */
    }

    table arn_encap {
        key = { eg_intr_md.egress_port: exact @name("egress_port"); }
        actions = { encap_v4; @defaultonly drop; }
        const default_action = drop();
        size = PORTS;
    }

    apply {
        if (arn_encap.apply().hit) {
            /* The ARN's first word from constants alone (Tofino fills one container from
             * one kind of source per action): Type 1 with Metric 127, the level
             * docs/CODEPOINTS.md gives a queue at the high mark with the default limit
             * (2 x high), or Type 2 with Metric 0. */
            if (meta.mirror.arn_type == ARN_CONGESTION_DETECTED) {
                hdr.arn.arn_type = ARN_CONGESTION_DETECTED;
                hdr.arn.metric = 127;
            } else {
                hdr.arn.arn_type = ARN_CONGESTION_ELIMINATED;
                hdr.arn.metric = 0;
            }
            hdr.arn.version = 0;
            hdr.arn.rsvd = 0;
            hdr.arn.para_type = ARN_PARA_PATH_ID;
        }
    }
}

control FareEgress(inout headers_t hdr,
                   inout tna_egress_metadata_t meta,
                   in egress_intrinsic_metadata_t eg_intr_md,
                   in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                   inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                   inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    ArnMonitor() arn_monitor;
    ArnBuild() arn_build;

    apply {
        if (meta.mirror.isValid() && meta.mirror.kind == 1 && eg_dprsr_md.mirror_type == 0) {
            arn_build.apply(hdr, meta, eg_intr_md, eg_dprsr_md);
        } else if (eg_intr_md.egress_port != CPU_PORT) {
            arn_monitor.apply(meta, eg_intr_md, eg_dprsr_md);
            if (meta.bridged.isValid() && meta.bridged.kind == 2) {
                eg_dprsr_md.drop_ctl = 1;   // a probe: seen by the monitor, not for the wire
            }
        }
    }
}

control EgressDeparser(packet_out packet,
                       inout headers_t hdr,
                       in tna_egress_metadata_t meta,
                       in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;
    Mirror() mirror;
    FareDeparser() fare_deparser;

    apply {
        if (eg_dprsr_md.mirror_type == ARN_MIRROR_TYPE) {
            mirror.emit<arn_mirror_h>(meta.session, meta.mirror);
        }
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update(
                { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
                  hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
                  hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
                  hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        fare_deparser.apply(packet, hdr);
    }
}

/* Metadata starts at 0 (what v1model gives fare.p4); without it this compiler's
 * metadata-initialization analysis fails on the DPF tables (a compiler bug). */
@pa_auto_init_metadata
#if __TARGET_TOFINO__ == 2
/* Tofino 2: the QP range key in one 32-bit container (range keys take 5 nibbles). */
@pa_container_size("ingress", "meta.fare.dest_qp", 32)
#endif
Pipeline(IngressParser(),
         FareIngress(),
         IngressDeparser(),
         EgressParser(),
         FareEgress(),
         EgressDeparser()) pipe;

Switch(pipe) main;
