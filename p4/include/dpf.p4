/* fare: Deterministic Path Forwarding at the ingress (draft-wang-idr-dpf §2.2.3).
 * Architecture independent (tables only): fare.p4 and tna/fare_tna.p4 both use it.
 *
 * flow_color    the controller's flow rules, first match wins (P4Runtime priority):
 *               ternary DSCP / protocol / addresses, ranges on L4 ports and the RoCEv2
 *               destination QP. A match gives the packet a color.
 * color_group   (route group, color) -> the group of that color of the route, for the
 *               route's active colors only. Packets without a color, or whose color the
 *               route lacks, keep the route's group.
 * group_fallback group -> the group to use when every member of it is removed (ARN):
 *               a color group falls back to its route's group, a route group to its
 *               backup color's group. Wcmp resubmits the packet once onto it
 *               (meta.dpf_fallback), before BGP has moved anything.
 */
#ifndef FARE_DPF_P4
#define FARE_DPF_P4

/* Width of the QP range key: the BTH's 24-bit DestQP, unless an architecture's compiler
 * limits range keys (p4c's Tofino backend: 5 nibbles, so fare_tna.p4 sets 20); a QP beyond
 * the key's width then counts as no QP (qp_valid 0) and matches only rules without a QP
 * range. */
#ifndef DPF_QP_RANGE_BITS
#define DPF_QP_RANGE_BITS 24
#endif

control Dpf(in headers_t hdr, inout metadata_t meta) {
    action set_color(bit<32> color) {
        meta.color = color;
    }

    action no_color() {
        meta.color = 0;
    }

    table flow_color {
        key = {
            meta.ip_version:  ternary @name("ip_version");
            meta.dscp:        ternary @name("dscp");
            meta.ip_protocol: ternary @name("protocol");
            meta.src_addr:    ternary @name("src_addr");
            meta.dst_addr:    ternary @name("dst_addr");
            meta.l4_valid:    ternary @name("l4_valid");
            meta.l4_src_port: range   @name("src_port");
            meta.l4_dst_port: range   @name("dst_port");
            meta.qp_valid:    ternary @name("qp_valid");
            meta.dest_qp[DPF_QP_RANGE_BITS - 1:0]: range @name("dest_qp");
        }
        actions = { set_color; @defaultonly no_color; }
        const default_action = no_color();
        size = FLOW_RULE_SIZE;
    }

    action use_group(bit<16> group_id) {
        meta.group_id = group_id;
    }

    table color_group {
        key = {
            meta.group_id: exact @name("group_id");
            meta.color:    exact @name("color");
        }
        actions = { use_group; @defaultonly NoAction; }
        const default_action = NoAction();
        size = COLOR_GROUP_SIZE;
    }

    action set_fallback(bit<16> group_id) {
        meta.fallback_group = group_id;
    }

    table group_fallback {
        key = { meta.group_id: exact @name("group_id"); }
        actions = { set_fallback; @defaultonly NoAction; }
        const default_action = NoAction();
        size = COLOR_GROUP_SIZE;
    }

    apply {
        meta.color = 0;
        meta.fallback_group = 0;
        /* What flow_color reads, gathered before the fallback check (unused on that pass)
         * and written once on each path, not zeroed first: on Tofino each rewrite of a
         * field behind another, or behind the check, is one more stage. */
        if (hdr.ipv4.isValid()) {
            meta.ip_version = 4;
            meta.dscp = hdr.ipv4.dscp;
            meta.ip_protocol = hdr.ipv4.protocol;
            meta.src_addr = (bit<128>)hdr.ipv4.src_addr;
            meta.dst_addr = (bit<128>)hdr.ipv4.dst_addr;
        } else if (hdr.ipv6.isValid()) {
            meta.ip_version = 6;
            meta.dscp = hdr.ipv6.dscp;
            meta.ip_protocol = hdr.ipv6.next_hdr;
            meta.src_addr = hdr.ipv6.src_addr;
            meta.dst_addr = hdr.ipv6.dst_addr;
        } else {
            meta.ip_version = 0;
            meta.dscp = 0;
            meta.ip_protocol = 0;
            meta.src_addr = 0;
            meta.dst_addr = 0;
        }
        if (hdr.udp.isValid() || hdr.tcp.isValid()) {
            meta.l4_valid = 1;
        } else {
            meta.l4_valid = 0;
        }
        if (hdr.bth.isValid()) {
            meta.dest_qp = hdr.bth.dest_qp;
#if DPF_QP_RANGE_BITS < 24
            if (hdr.bth.dest_qp[23:DPF_QP_RANGE_BITS] != 0) {
                meta.qp_valid = 0;   // beyond the key: matches no QP range, as if no BTH
            } else {
                meta.qp_valid = 1;
            }
#else
            meta.qp_valid = 1;
#endif
        } else {
            meta.qp_valid = 0;
            meta.dest_qp = 0;
        }
        if (meta.dpf_fallback == 1) {
            /* Resubmitted: every member of the first choice was removed. */
            meta.group_id = meta.fallback_target;
            return;
        }
        flow_color.apply();
        if (meta.color != 0) {
            color_group.apply();
        }
        group_fallback.apply();
    }
}

#endif
