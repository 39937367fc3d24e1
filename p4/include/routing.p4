/* fare: longest-prefix routes -> WCMP group. Architecture independent. */
#ifndef FARE_ROUTING_P4
#define FARE_ROUTING_P4

control Routing(in headers_t hdr, inout metadata_t meta) {
    /* group_id names a row of the wcmp group table; spray = 1 sprays per packet, 0 hashes
     * the 5-tuple (per flow); flowlet_gap_us > 0 (with spray = 0) is flowlet mode. */
    action set_group(bit<16> group_id, bit<1> spray, bit<32> flowlet_gap_us) {
        meta.group_id = group_id;
        meta.spray = spray;
        meta.flowlet_gap = flowlet_gap_us;
        meta.routed = 1;
    }

    action no_route() {
        meta.routed = 0;
    }

    table route_v4 {
        key = { hdr.ipv4.dst_addr: lpm @name("dst_addr"); }
        actions = { set_group; @defaultonly no_route; }
        const default_action = no_route();
        size = ROUTE_V4_SIZE;
    }

    table route_v6 {
        key = { hdr.ipv6.dst_addr: lpm @name("dst_addr"); }
        actions = { set_group; @defaultonly no_route; }
        const default_action = no_route();
        size = ROUTE_V6_SIZE;
    }

    apply {
        meta.routed = 0;
        meta.flowlet_gap = 0;
        if (hdr.ipv4.isValid()) {
            route_v4.apply();
        } else if (hdr.ipv6.isValid()) {
            route_v6.apply();
        }
    }
}

#endif
