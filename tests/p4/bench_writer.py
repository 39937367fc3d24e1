"""Baseline for fare's P4Runtime write benchmark: the PyPI `p4runtime` bindings writing the
same entities fare's Rust client writes (route entries; action-profile members and groups),
in the same batch sizes, timed the same way (Write RPC round trips only).

usage: bench_writer.py ADDR DEVICE_ID ELECTION_ID P4INFO_TXTPB ROUTES GROUPS BATCH ID_BASE
prints JSON: {"routes_per_s": .., "members_groups_per_s": .., "delete_per_s": ..}
"""
import json
import sys
import time

from p4.v1 import p4runtime_pb2
from p4rt_common import Primary, by_suffix, load_p4info, member_update, route_update


def main():
    addr, device_id, election = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    p4info_path, n_routes, n_groups, batch = sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    base = int(sys.argv[8])
    info = load_p4info(p4info_path)
    route_v4 = by_suffix(info.tables, "routing.route_v4")
    set_group = by_suffix(info.actions, "routing.set_group")
    selector = by_suffix(info.action_profiles, "wcmp.wcmp_selector")
    set_nexthop = by_suffix(info.actions, "wcmp.set_nexthop")
    session = Primary(addr, device_id, election)
    write = session.write

    def route_update_i(kind, i):
        return route_update(route_v4, set_group, kind, (11 << 24) | i, 32, 1 + i % 1000)

    def timed(updates):
        start = time.perf_counter()
        for k in range(0, len(updates), batch):
            write(updates[k:k + batch])
        return time.perf_counter() - start

    t_routes = timed([route_update_i(p4runtime_pb2.Update.INSERT, i) for i in range(n_routes)])
    t_delete = timed([route_update_i(p4runtime_pb2.Update.DELETE, i) for i in range(n_routes)])

    updates = []
    for g in range(n_groups):
        group = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        pg = group.entity.action_profile_group
        pg.action_profile_id = selector.preamble.id
        pg.group_id = base + g
        for j, w in enumerate((3, 3, 4, 4)):
            mid = base + g * 4 + j
            updates.append(member_update(selector, set_nexthop, p4runtime_pb2.Update.INSERT,
                                         mid, j + 1, 0x02fa000000fe, 1))
            pg.members.add(member_id=mid, weight=w)
        pg.max_size = 14
        updates.append(group)
    t_groups = timed(updates)
    session.close()
    print(json.dumps({
        "routes_per_s": n_routes / t_routes,
        "delete_per_s": n_routes / t_delete,
        "members_groups_per_s": len(updates) / t_groups,
    }))


if __name__ == "__main__":
    main()
