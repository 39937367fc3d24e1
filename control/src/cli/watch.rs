//! `fare watch [--json] [--count N]`: follow a running agent: a snapshot of its sessions,
//! routes, groups, bandwidths and ARN removals, then every change as it happens, in order.
//! It exits 0 only after `--count` events; a stream the agent ends (it stopped) exits 1.

use super::conn::Conn;
use fare_agent::mgmt::json::watch_event_json;
use fare_agent::mgmt::pb::{self, watch_event::Event};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// One JSON object per line (`{"seq", "type", ...}`; the keys: configuration.md).
    #[arg(long)]
    pub json: bool,
    /// Stop after this many events (the snapshot counts as one).
    #[arg(long)]
    pub count: Option<u64>,
}

pub fn run(args: Args, conn: &Conn) -> anyhow::Result<()> {
    conn.run(async |mut c| {
        let mut stream = c.watch(pb::WatchRequest {}).await?.into_inner();
        let mut seen = 0u64;
        let mut last: Option<u64> = None;
        while let Some(ev) = stream.message().await? {
            // Sequence numbers go up by one; a snapshot (first, or resync) restarts them.
            let snapshot = matches!(ev.event, Some(Event::Snapshot(_)));
            if let (Some(l), false) = (last, snapshot) {
                if ev.seq != l + 1 {
                    anyhow::bail!("watch: event {} after {l}: events were lost", ev.seq);
                }
            }
            last = Some(ev.seq);
            let line = if args.json {
                serde_json::to_string(&watch_event_json(&ev))?
            } else {
                event_text(&ev)
            };
            crate::outln!("{line}")?;
            seen += 1;
            if args.count.is_some_and(|n| seen >= n) {
                return Ok(());
            }
        }
        // A script must tell this from a `--count` that was reached: exit 1.
        anyhow::bail!(
            "watch: the agent ended the stream after {seen} events (it stopped or restarted)"
        )
    })
}

fn event_text(ev: &pb::WatchEvent) -> String {
    let body = match &ev.event {
        Some(Event::Snapshot(s)) => format!(
            "{}snapshot: {} sessions, {} routes, {} groups, {} bandwidths, {} ARN removals",
            if s.resync { "resync " } else { "" },
            s.sessions.len(),
            s.routes.len(),
            s.groups.len(),
            s.bandwidths.len(),
            s.arn.len()
        ),
        Some(Event::Session(s)) => {
            let mut t = format!("session {} {}", s.neighbor, s.state);
            if s.admin_down {
                t.push_str(" (shut down)");
            }
            if s.drained {
                t.push_str(" (drained)");
            }
            if !s.last_error.is_empty() {
                t.push_str(&format!(" last error: {}", s.last_error));
            }
            t
        }
        Some(Event::Route(r)) => {
            let route = r.route.clone().unwrap_or_default();
            if r.withdrawn {
                format!("route {} ({}) withdrawn", route.prefix, route.source)
            } else {
                let paths: Vec<String> = route
                    .paths
                    .iter()
                    .map(|p| match p.path_bandwidth_gbps {
                        Some(g) => format!("{} {g} Gbps", p.neighbor),
                        None => p.neighbor.clone(),
                    })
                    .collect();
                format!(
                    "route {} ({}) via {}",
                    route.prefix,
                    route.source,
                    paths.join(", ")
                )
            }
        }
        Some(Event::Group(g)) => {
            let group = g.group.clone().unwrap_or_default();
            if g.removed {
                format!("group {} removed", group.prefix)
            } else {
                let members: Vec<String> = group
                    .members
                    .iter()
                    .map(|m| format!("{}x{}", m.via, m.weight))
                    .collect();
                format!(
                    "group {} {}: {}",
                    group.prefix,
                    group.mode,
                    members.join(" ")
                )
            }
        }
        Some(Event::Bandwidth(b)) => match b.bandwidth_gbps {
            Some(g) => format!("bandwidth {} {g} Gbps", b.neighbor),
            None => format!("bandwidth {} unknown", b.neighbor),
        },
        Some(Event::Arn(a)) => match (a.removed, a.share) {
            (true, _) => format!("arn {} member {} removed", a.prefix, a.via),
            (false, Some(s)) => format!("arn {} member {} share {s}", a.prefix, a.via),
            (false, None) => format!("arn {} member {} restored", a.prefix, a.via),
        },
        None => "unknown event".to_string(),
    };
    format!("{:>6} {body}", ev.seq)
}
