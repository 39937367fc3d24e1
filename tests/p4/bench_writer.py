"""Baseline for fare's P4Runtime write benchmark: the PyPI `p4runtime` bindings writing the
same entities fare's Rust client writes (route entries; action-profile members and groups),
in the same batch sizes, timed the same way (Write RPC round trips only).

usage: bench_writer.py ADDR DEVICE_ID ELECTION_ID P4INFO_TXTPB ROUTES GROUPS BATCH ID_BASE
prints JSON: {"routes_per_s": .., "members_groups_per_s": .., "delete_per_s": ..}
"""
import json
import queue
import sys
import threading
import time

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc


def by_suffix(items, suffix):
    for item in items:
        if item.preamble.name == suffix or item.preamble.name.endswith("." + suffix):
            return item
    raise SystemExit("P4Info has no " + suffix)


def param_id(action, name):
    return next(p.id for p in action.params if p.name == name)


def enc(v):
    n = max(1, (v.bit_length() + 7) // 8)
    return v.to_bytes(n, "big")


def main():
    addr, device_id, election = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    p4info_path, n_routes, n_groups, batch = sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    base = int(sys.argv[8])
    info = p4info_pb2.P4Info()
    with open(p4info_path) as f:
        text_format.Merge(f.read(), info)
    route_v4 = by_suffix(info.tables, "routing.route_v4")
    set_group = by_suffix(info.actions, "routing.set_group")
    selector = by_suffix(info.action_profiles, "wcmp.wcmp_selector")
    set_nexthop = by_suffix(info.actions, "wcmp.set_nexthop")

    stub = p4runtime_pb2_grpc.P4RuntimeStub(grpc.insecure_channel(addr))
    requests = queue.Queue()
    arb = p4runtime_pb2.StreamMessageRequest()
    arb.arbitration.device_id = device_id
    arb.arbitration.election_id.low = election
    requests.put(arb)
    stream = stub.StreamChannel(iter(requests.get, None))
    first = next(stream)
    if first.arbitration.status.code != 0:
        raise SystemExit("not primary: %s" % first.arbitration.status)
    threading.Thread(target=lambda: [None for _ in stream], daemon=True).start()

    eid = p4runtime_pb2.Uint128(low=election)

    def write(updates):
        req = p4runtime_pb2.WriteRequest(device_id=device_id, election_id=eid)
        req.updates.extend(updates)
        stub.Write(req)

    def route_update(kind, i):
        u = p4runtime_pb2.Update(type=kind)
        t = u.entity.table_entry
        t.table_id = route_v4.preamble.id
        m = t.match.add()
        m.field_id = route_v4.match_fields[0].id
        m.lpm.value = enc((11 << 24) | i)
        m.lpm.prefix_len = 32
        if kind != p4runtime_pb2.Update.DELETE:
            a = t.action.action
            a.action_id = set_group.preamble.id
            a.params.add(param_id=param_id(set_group, "group_id"), value=enc(1 + i % 1000))
            a.params.add(param_id=param_id(set_group, "spray"), value=enc(1))
        return u

    def timed(updates):
        start = time.perf_counter()
        for k in range(0, len(updates), batch):
            write(updates[k:k + batch])
        return time.perf_counter() - start

    t_routes = timed([route_update(p4runtime_pb2.Update.INSERT, i) for i in range(n_routes)])
    t_delete = timed([route_update(p4runtime_pb2.Update.DELETE, i) for i in range(n_routes)])

    updates = []
    for g in range(n_groups):
        group = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        pg = group.entity.action_profile_group
        pg.action_profile_id = selector.preamble.id
        pg.group_id = base + g
        for j, w in enumerate((3, 3, 4, 4)):
            mid = base + g * 4 + j
            u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
            m = u.entity.action_profile_member
            m.action_profile_id = selector.preamble.id
            m.member_id = mid
            a = m.action
            a.action_id = set_nexthop.preamble.id
            for name, v in (("port", j + 1), ("dst_mac", 0x020000000000 + j + 1),
                            ("src_mac", 0x02fa000000fe), ("arn_slot", 0), ("member_index", 1)):
                a.params.add(param_id=param_id(set_nexthop, name), value=enc(v))
            updates.append(u)
            pg.members.add(member_id=mid, weight=w)
        pg.max_size = 14
        updates.append(group)
    t_groups = timed(updates)
    requests.put(None)
    print(json.dumps({
        "routes_per_s": n_routes / t_routes,
        "delete_per_s": n_routes / t_delete,
        "members_groups_per_s": len(updates) / t_groups,
    }))


if __name__ == "__main__":
    main()
