"""Baseline for fare's install-path benchmark: the PyPI `p4runtime` bindings doing the
writes fare's agent does for N routes with one 4-member WCMP group each (3:3:4:4), then
for the same N groups changed make-before-break (4:4:3:3), in the same order and batch
size: members, profile groups, member counters zeroed, group entries, routes, each phase
in Writes of at most BATCH updates; the change: new members, new profile groups, group
entries modified, old profile groups deleted, old members deleted. Building the requests
is timed with the writes, as it is on fare's side. Everything is deleted again after
(untimed).

usage: install_writer.py ADDR DEVICE_ID ELECTION_ID P4INFO_TXTPB N BATCH
prints JSON: {"install_per_s": .., "change_per_s": ..}
"""
import json
import sys
import time

from p4.v1 import p4runtime_pb2
from p4rt_common import (DELETE, Primary, by_suffix, enc, load_p4info, member_update,
                         route_update)

INSERT = p4runtime_pb2.Update.INSERT
MODIFY = p4runtime_pb2.Update.MODIFY


def main():
    addr, device_id, election = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    p4info_path, n, batch = sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
    info = load_p4info(p4info_path)
    route_v4 = by_suffix(info.tables, "routing.route_v4")
    set_group = by_suffix(info.actions, "routing.set_group")
    wcmp_group = by_suffix(info.tables, "wcmp.wcmp_group")
    selector = by_suffix(info.action_profiles, "wcmp.wcmp_selector")
    set_nexthop = by_suffix(info.actions, "wcmp.set_nexthop")
    counter = by_suffix(info.counters, "wcmp.member_packets")
    session = Primary(addr, device_id, election)

    def write(updates):
        for k in range(0, len(updates), batch):
            session.write(updates[k:k + batch])

    def member(kind, mid, port, counter_index):
        return member_update(selector, set_nexthop, kind, mid, port, 0x02fa4e000001,
                             counter_index)

    def profile_group(kind, gid, mids, weights):
        u = p4runtime_pb2.Update(type=kind)
        pg = u.entity.action_profile_group
        pg.action_profile_id = selector.preamble.id
        pg.group_id = gid
        if kind != DELETE:
            anchor = max(range(len(weights)), key=lambda j: (weights[j], j))
            for j, (mid, w) in enumerate(zip(mids, weights)):
                gm = pg.members.add(member_id=mid, weight=w)
                if j != anchor:
                    gm.watch_port = enc(j + 1)
        return u

    def zero(index):
        u = p4runtime_pb2.Update(type=MODIFY)
        c = u.entity.counter_entry
        c.counter_id = counter.preamble.id
        c.index.index = index
        c.data.SetInParent()
        return u

    def group_entry(kind, gid, pg):
        u = p4runtime_pb2.Update(type=kind)
        t = u.entity.table_entry
        t.table_id = wcmp_group.preamble.id
        m = t.match.add()
        m.field_id = wcmp_group.match_fields[0].id
        m.exact.value = enc(gid)
        if kind != DELETE:
            t.action.action_profile_group_id = pg
        return u

    def route(kind, i, gid):
        return route_update(route_v4, set_group, kind, (12 << 24) | (i << 8), 24, gid)

    old = [[1 + g * 4 + j for j in range(4)] for g in range(n)]
    new = [[1 + 4 * n + g * 4 + j for j in range(4)] for g in range(n)]

    start = time.perf_counter()
    write([member(INSERT, old[g][j], j + 1, 1 + g * 4 + j) for g in range(n) for j in range(4)])
    write([profile_group(INSERT, 1 + g, old[g], (3, 3, 4, 4)) for g in range(n)])
    write([zero(1 + g * 4 + j) for g in range(n) for j in range(4)])
    write([group_entry(INSERT, 1 + g, 1 + g) for g in range(n)])
    write([route(INSERT, g, 1 + g) for g in range(n)])
    t_install = time.perf_counter() - start

    start = time.perf_counter()
    write([member(INSERT, new[g][j], j + 1, 1 + g * 4 + j) for g in range(n) for j in range(4)])
    write([profile_group(INSERT, 1 + n + g, new[g], (4, 4, 3, 3)) for g in range(n)])
    write([group_entry(MODIFY, 1 + g, 1 + n + g) for g in range(n)])
    write([profile_group(DELETE, 1 + g, [], ()) for g in range(n)])
    write([member(DELETE, old[g][j], 0, 0) for g in range(n) for j in range(4)])
    t_change = time.perf_counter() - start

    write([route(DELETE, g, 0) for g in range(n)])
    write([group_entry(DELETE, 1 + g, 0) for g in range(n)])
    write([profile_group(DELETE, 1 + n + g, [], ()) for g in range(n)])
    write([member(DELETE, new[g][j], 0, 0) for g in range(n) for j in range(4)])
    session.close()
    print(json.dumps({"install_per_s": n / t_install, "change_per_s": n / t_change}))


if __name__ == "__main__":
    main()
