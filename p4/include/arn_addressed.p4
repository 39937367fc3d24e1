/* fare: is an ARN for this switch? Architecture independent (tables only), shared by
 * fare.p4 (v1model) and tna/fare_tna.p4: an ARN is received only when sent to one of the
 * switch's own addresses (its link addresses, the ARN multicast group), written by the
 * controller; an ARN to any other node crosses the switch like any packet.
 */
#ifndef FARE_ARN_ADDRESSED_P4
#define FARE_ARN_ADDRESSED_P4

control ArnAddressed(in headers_t hdr, out bool to_switch) {
    action local() { }

    table arn_local_v4 {
        key = { hdr.ipv4.dst_addr: exact @name("dst_addr"); }
        actions = { local; @defaultonly NoAction; }
        const default_action = NoAction();
        size = LOCAL_ADDRESSES;
    }

    table arn_local_v6 {
        key = { hdr.ipv6.dst_addr: exact @name("dst_addr"); }
        actions = { local; @defaultonly NoAction; }
        const default_action = NoAction();
        size = LOCAL_ADDRESSES;
    }

    apply {
        to_switch = false;
        if (hdr.ipv4.isValid()) {
            to_switch = arn_local_v4.apply().hit;
        } else if (hdr.ipv6.isValid()) {
            to_switch = arn_local_v6.apply().hit;
        }
    }
}

#endif
