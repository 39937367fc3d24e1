//! The operator's management API against a real FRR peer in namespaces: `fare watch`
//! sees a scripted sequence of changes in order with no gap in its sequence numbers;
//! `fare neighbor shutdown` reaches FRR as Cease / Administrative Shutdown with the
//! message (RFC 8203), `enable` re-establishes, `reset` sends ROUTE-REFRESH and the routes
//! again, `drain` makes FRR see GRACEFUL_SHUTDOWN (RFC 8326); and the TCP listener
//! refuses clients without a certificate of the configured CA, logging each refusal.

use fare_integration::bgp::{have_frr, wait_for, Daemon, Frr, TempFile};
use fare_integration::{fare_bin, have_tool, link, run, Netns};
use serde_json::Value;
use std::io::BufRead;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

const FRR_CONF: &str = "frr defaults datacenter
hostname s1
router bgp 65100
 bgp router-id 10.255.0.100
 no bgp ebgp-requires-policy
 timers bgp 3 9
 neighbor 10.0.1.1 remote-as 65001
 address-family ipv4 unicast
  network 198.51.100.0/24
 exit-address-family
";

const PEER: &str = "10.0.1.2";
const LEARNED: &str = "198.51.100.0/24";
const ORIGINATED: &str = "192.0.2.0/24";

fn agent_config(socket: &std::path::Path, extra: &str) -> String {
    format!(
        "name: leaf1
router_id: 10.255.0.1
asn: 65001
management: {{socket: {}{extra}}}
fare: {{mode: draft}}
dataplane: {{kind: none}}
bgp: {{hold_time: 9, connect_retry_ms: 200, connect_retry_max_ms: 1000}}
neighbors:
  - {{address: {PEER}, remote_as: 65100, interface: e1, bandwidth_gbps: 100}}
prefixes: [{ORIGINATED}]
",
        socket.display()
    )
}

/// `fare ARGS` in `ns`, with its JSON output parsed (Null when it fails).
fn fare_json(ns: &Netns, args: &[&str]) -> Value {
    ns.fare(args)
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice(&o.stdout).ok())
        .unwrap_or(Value::Null)
}

/// The FRR view of our session.
fn frr_neighbor(frr: &Frr) -> Value {
    frr.json("show bgp neighbors 10.0.1.1 json")["10.0.1.1"].clone()
}

#[test]
fn mgmt_watch_and_actions_with_frr() {
    let test = "mgmt_watch_and_actions_with_frr";
    if !have_frr(test) {
        return;
    }
    let a = Netns::new("mgwa").unwrap();
    let b = Netns::new("mgwb").unwrap();
    link(&a, "e1", "10.0.1.1/30", &b, "s1", "10.0.1.2/30").unwrap();
    b.sh("ip route add blackhole 198.51.100.0/24").unwrap();
    let socket = std::env::temp_dir().join(format!("fare-mgw-{}.sock", std::process::id()));
    let s = socket.to_str().unwrap().to_string();
    let config = TempFile::new("mgw-agent.yaml", &agent_config(&socket, "")).unwrap();
    let bin = fare_bin().unwrap();
    let bin = bin.to_str().unwrap();
    let _agent = Daemon(
        a.command(bin)
            .args(["agent", "--config", config.path()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(
        wait_for(Duration::from_secs(20), || (!fare_json(
            &a,
            &["show", "info", "--json", "--socket", &s]
        )
        .is_null())
        .then_some(()))
        .is_some(),
        "agent did not answer"
    );

    // Watch from before the peer exists: the snapshot, then every change.
    let mut watch = Daemon(
        a.command(bin)
            .args(["watch", "--json", "--socket", &s])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (tx, events) = mpsc::channel::<Value>();
    let stdout = watch.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(v) = serde_json::from_str(&line) {
                if tx.send(v).is_err() {
                    return;
                }
            }
        }
    });
    let first = events
        .recv_timeout(Duration::from_secs(10))
        .expect("snapshot");
    assert_eq!(first["type"], "snapshot", "{first}");
    assert_eq!(first["resync"], false);
    let originated = first["routes"].as_array().unwrap();
    assert!(
        originated
            .iter()
            .any(|r| r["prefix"] == ORIGINATED && r["source"] == "local"),
        "{first}"
    );

    // The script: the peer comes up and sends its prefix, a bandwidth is set, the
    // neighbor is shut down.
    let frr = Frr::start(&b, FRR_CONF).unwrap();
    let up = wait_for(Duration::from_secs(30), || {
        let n = fare_json(&a, &["show", "neighbor", PEER, "--json", "--socket", &s]);
        (n["state"] == "Established").then_some(n)
    })
    .unwrap_or_else(|| panic!("no session: {}", frr.vtysh("show bgp summary")));
    assert_eq!(up["admin_down"], false, "{up}");
    let route = wait_for(Duration::from_secs(20), || {
        let r = fare_json(&a, &["show", "route", LEARNED, "--json", "--socket", &s]);
        (!r["group"].is_null()).then_some(r)
    })
    .unwrap_or_else(|| panic!("no group for {LEARNED}"));
    // One path from FRR (no Path Bandwidth community: none in the path), its group one
    // member via the peer; an address in the prefix finds the same route.
    assert_eq!(route["routes"][0]["paths"][0]["neighbor"], PEER, "{route}");
    assert_eq!(route["group"]["members"][0]["via"], PEER, "{route}");
    let by_addr = fare_json(
        &a,
        &["show", "route", "198.51.100.7", "--json", "--socket", &s],
    );
    assert_eq!(by_addr["prefix"], LEARNED, "{by_addr}");
    let set = a
        .fare(&["set", "bandwidth", "--neighbor", PEER, "40", "--socket", &s])
        .unwrap();
    assert!(set.status.success(), "{set:?}");
    let shut = fare_json(
        &a,
        &[
            "neighbor",
            "shutdown",
            PEER,
            "--message",
            "maintenance 42",
            "--json",
            "--socket",
            &s,
        ],
    );
    assert_eq!(shut["admin_down"], true, "{shut}");
    assert_eq!(shut["shutdown_message"], "maintenance 42", "{shut}");

    // Collect until the shutdown's session event and the learned route's withdrawal.
    let mut seen: Vec<Value> = vec![first.clone()];
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let is_down =
        |e: &Value| e["type"] == "session" && e["admin_down"] == true && e["state"] == "Idle";
    let is_gone =
        |e: &Value| e["type"] == "route" && e["prefix"] == LEARNED && e["withdrawn"] == true;
    while !(seen.iter().any(is_down) && seen.iter().any(is_gone)) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match events.recv_timeout(left) {
            Ok(e) => seen.push(e),
            Err(_) => panic!("watch stopped short: {seen:#?}"),
        }
    }
    // No gap, no repeat: snapshot at S, then S+1, S+2...
    let seqs: Vec<u64> = seen.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    for w in seqs.windows(2) {
        assert_eq!(w[1], w[0] + 1, "sequence {seqs:?}");
    }
    let at = |what: &str, f: &dyn Fn(&Value) -> bool| -> usize {
        seen.iter()
            .position(f)
            .unwrap_or_else(|| panic!("no {what} event in {seen:#?}"))
    };
    let established = at("Established", &|e| {
        e["type"] == "session" && e["neighbor"] == PEER && e["state"] == "Established"
    });
    let group = at("group", &|e| {
        e["type"] == "group" && e["prefix"] == LEARNED && e["removed"] == false
    });
    let learned = at("route learned", &|e| {
        e["type"] == "route" && e["prefix"] == LEARNED && e["withdrawn"] == false
    });
    let bandwidth = at("bandwidth", &|e| {
        e["type"] == "bandwidth" && e["neighbor"] == PEER && e["bandwidth_gbps"] == 40.0
    });
    let down = at("shutdown", &is_down);
    let removed = at("group removed", &|e| {
        e["type"] == "group" && e["prefix"] == LEARNED && e["removed"] == true
    });
    let withdrawn = at("withdrawn", &is_gone);
    // Within a decision round the group is installed before its route is reported.
    assert!(
        established < group && group < learned && learned < bandwidth && bandwidth < down,
        "order: established {established}, group {group}, route {learned}, bandwidth \
         {bandwidth}, shutdown {down}: {seen:#?}"
    );
    assert!(down < removed && down < withdrawn, "{seen:#?}");
    assert_eq!(seen[down]["state"], "Idle", "{}", seen[down]);
    drop(watch);

    // FRR got Cease / Administrative Shutdown with the message.
    let n = wait_for(Duration::from_secs(10), || {
        let n = frr_neighbor(&frr);
        (n["bgpState"] != "Established" && n["lastShutdownDescription"].is_string()).then_some(n)
    })
    .unwrap_or_else(|| panic!("FRR: {}", frr_neighbor(&frr)));
    assert_eq!(n["lastShutdownDescription"], "maintenance 42", "{n}");
    assert_eq!(
        n["lastNotificationReason"], "Cease/Administrative Shutdown",
        "{n}"
    );
    // It stays down: FRR's reconnects are refused while shut down.
    std::thread::sleep(Duration::from_secs(3));
    assert_ne!(frr_neighbor(&frr)["bgpState"], "Established");

    // Enable: the session comes back.
    let en = a
        .fare(&["neighbor", "enable", PEER, "--socket", &s])
        .unwrap();
    assert!(en.status.success(), "{en:?}");
    assert!(
        wait_for(Duration::from_secs(30), || (frr_neighbor(&frr)["bgpState"]
            == "Established")
            .then_some(()))
        .is_some(),
        "not re-established: {}",
        frr_neighbor(&frr)
    );
    let orig = || frr.json(&format!("show bgp ipv4 unicast {ORIGINATED} json"));
    assert!(
        wait_for(Duration::from_secs(20), || orig()["paths"][0]
            .is_object()
            .then_some(()))
        .is_some(),
        "FRR lacks {ORIGINATED}"
    );

    // Soft reset: FRR receives one ROUTE-REFRESH and our routes again.
    let stats = |k: &str| frr_neighbor(&frr)["messageStats"][k].as_u64().unwrap_or(0);
    let (rr0, up0) = (stats("routeRefreshRecv"), stats("updatesRecv"));
    let reset = a
        .fare(&["neighbor", "reset", PEER, "--socket", &s])
        .unwrap();
    assert!(reset.status.success(), "{reset:?}");
    assert!(
        wait_for(Duration::from_secs(10), || (stats("routeRefreshRecv")
            == rr0 + 1
            && stats("updatesRecv") > up0)
            .then_some(()))
        .is_some(),
        "route refresh {rr0} -> {}, updates {up0} -> {}",
        stats("routeRefreshRecv"),
        stats("updatesRecv")
    );

    // Drain: FRR sees GRACEFUL_SHUTDOWN (65535:0) on our route; undrain removes it.
    let gshut = || {
        orig()["paths"][0]["community"]["list"]
            .as_array()
            .is_some_and(|l| l.iter().any(|c| c == "gracefulShutdown"))
    };
    assert!(!gshut(), "{}", orig());
    let d = fare_json(&a, &["drain", PEER, "--json", "--socket", &s]);
    assert_eq!(d["neighbors"], serde_json::json!([PEER]), "{d}");
    assert!(
        wait_for(Duration::from_secs(10), || gshut().then_some(())).is_some(),
        "no graceful-shutdown at FRR: {}",
        orig()
    );
    let n = fare_json(&a, &["show", "neighbor", PEER, "--json", "--socket", &s]);
    assert_eq!(n["drained"], true, "{n}");
    let undo = a.fare(&["drain", PEER, "--undo", "--socket", &s]).unwrap();
    assert!(undo.status.success(), "{undo:?}");
    assert!(
        wait_for(Duration::from_secs(10), || (!gshut()).then_some(())).is_some(),
        "graceful-shutdown stays: {}",
        orig()
    );
    let _ = std::fs::remove_file(&socket);
}

/// openssl in `dir`: a CA, a certificate it signs (`name`, SAN `san`; no SAN: no
/// extensions, openssl's X.509 version 1).
fn openssl_ca(dir: &std::path::Path, ca: &str) {
    let d = dir.to_str().unwrap();
    let out = run(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            &format!("/CN={ca}"),
            "-keyout",
            &format!("{d}/{ca}.key"),
            "-out",
            &format!("{d}/{ca}.pem"),
        ],
    )
    .unwrap();
    assert!(out.status.success(), "{out:?}");
}

fn openssl_cert(dir: &std::path::Path, ca: &str, name: &str, san: &str) {
    let d = dir.to_str().unwrap();
    let ext = dir.join(format!("{name}.ext"));
    std::fs::write(&ext, format!("subjectAltName={san}\n")).unwrap();
    let ext = ext.to_str().unwrap();
    let extfile: &[&str] = if san.is_empty() {
        &[]
    } else {
        &["-extfile", ext]
    };
    let req = run(
        "openssl",
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{d}/{name}.key"),
            "-out",
            &format!("{d}/{name}.csr"),
        ],
    )
    .unwrap();
    assert!(req.status.success(), "{req:?}");
    let (csr, ca_pem, ca_key, out) = (
        format!("{d}/{name}.csr"),
        format!("{d}/{ca}.pem"),
        format!("{d}/{ca}.key"),
        format!("{d}/{name}.pem"),
    );
    let mut args = vec![
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca_pem,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        &out,
    ];
    args.extend_from_slice(extfile);
    let sign = run("openssl", &args).unwrap();
    assert!(sign.status.success(), "{sign:?}");
}

fn p_of(dir: &std::path::Path, f: &str) -> String {
    dir.join(f).to_str().unwrap().to_string()
}

const SECRET: &str = "tls-s3cret";

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn mgmt_tls_requires_a_client_certificate_of_the_ca() {
    let test = "mgmt_tls_requires_a_client_certificate_of_the_ca";
    if !have_tool(test, "openssl") {
        return;
    }
    let dir = Dir(std::env::temp_dir().join(format!("fare-mgtls-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    openssl_ca(&dir.0, "ca");
    openssl_ca(&dir.0, "other");
    openssl_cert(&dir.0, "ca", "server", "IP:127.0.0.1");
    openssl_cert(&dir.0, "ca", "client", "DNS:operator");
    openssl_cert(&dir.0, "other", "stranger", "DNS:stranger");
    openssl_cert(&dir.0, "ca", "old", "");
    let text = run(
        "openssl",
        &["x509", "-noout", "-text", "-in", &p_of(&dir.0, "old.pem")],
    )
    .unwrap()
    .stdout;
    assert!(
        String::from_utf8_lossy(&text).contains("Version: 1 (0x0)"),
        "openssl made no v1 certificate"
    );
    let p = |f: &str| dir.0.join(f).to_str().unwrap().to_string();

    let a = Netns::new("mgtls").unwrap();
    let socket = dir.0.join("agent.sock");
    let tls = format!(
        ", address: 127.0.0.1:50051, tls: {{cert: {}, key: {}, client_ca: {}}}",
        p("server.pem"),
        p("server.key"),
        p("ca.pem")
    );
    let config = TempFile::new(
        "mgtls-agent.yaml",
        &format!(
            "name: tls1\nrouter_id: 10.255.0.9\nasn: 65009\nmanagement: {{socket: {}{tls}}}\n\
             dataplane: {{kind: none}}\nneighbors: [{{address: 10.0.0.99, remote_as: 65100, \
             passive: true, md5_password: {SECRET}}}]\n",
            socket.display()
        ),
    )
    .unwrap();
    let log = dir.0.join("agent.log");
    let bin = fare_bin().unwrap();
    let _agent = Daemon(
        a.command(bin.to_str().unwrap())
            .args(["--log-json", "agent", "--config", config.path()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let tcp = |extra: &[&str]| {
        let mut args = vec!["show", "info", "--json", "--address", "127.0.0.1:50051"];
        args.extend_from_slice(extra);
        // A refused client exits non-zero: its output is the result, not an error.
        a.command(bin.to_str().unwrap())
            .args(&args)
            .output()
            .unwrap()
    };
    let ca = p("ca.pem");
    let (cert, key) = (p("client.pem"), p("client.key"));
    let ok = wait_for(Duration::from_secs(20), || {
        let o = tcp(&["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key]);
        o.status.success().then_some(o)
    })
    .expect("a client with a certificate of the CA is served");
    let info: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(info["name"], "tls1", "{info}");

    // The configuration over TCP: the MD5 password is not in it.
    let config = a
        .command(bin.to_str().unwrap())
        .args(["show", "config", "--json", "--address", "127.0.0.1:50051"])
        .args(["--tls-ca", &ca, "--tls-cert", &cert, "--tls-key", &key])
        .output()
        .unwrap();
    assert!(config.status.success(), "{config:?}");
    let yaml = serde_json::from_slice::<Value>(&config.stdout).unwrap()["yaml"].clone();
    let yaml = yaml.as_str().unwrap();
    assert!(!yaml.contains(SECRET), "{yaml}");
    assert!(yaml.contains("md5_password: <redacted>"), "{yaml}");

    // Each refusal is one line on stderr, exit 1, nothing on stdout.
    let refused_line = |o: &std::process::Output, why: &str| {
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        assert!(o.stdout.is_empty(), "{o:?}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            format!("fare: connecting to 127.0.0.1:50051: {why}\n")
        );
    };
    let none = tcp(&["--tls-ca", &ca]);
    refused_line(
        &none,
        "the server refused this client: it requires a client certificate (--tls-cert and \
         --tls-key)",
    );
    let (cert2, key2) = (p("stranger.pem"), p("stranger.key"));
    let other = tcp(&["--tls-ca", &ca, "--tls-cert", &cert2, "--tls-key", &key2]);
    refused_line(
        &other,
        "the server refused this client's certificate: unknown issuer",
    );
    // A v1 certificate of the right CA: refused by the client before it connects.
    let (cert3, key3) = (p("old.pem"), p("old.key"));
    let old = tcp(&["--tls-ca", &ca, "--tls-cert", &cert3, "--tls-key", &key3]);
    refused_line(
        &old,
        "TLS: the client certificate is X.509 version 1; the agent accepts version 3 only \
         (sign it with extensions, e.g. `openssl x509 -req ... -extfile`)",
    );

    // openssl's client with the v1 certificate: the agent refuses it and says why.
    let s_client = a
        .command("openssl")
        .args(["s_client", "-connect", "127.0.0.1:50051", "-CAfile", &ca])
        .args(["-cert", &cert3, "-key", &key3])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!s_client.stdout.is_empty(), "{s_client:?}");

    // Each refusal is logged: event, client address, and the reason.
    let refused = wait_for(Duration::from_secs(5), || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let list: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["fields"]["message"] == "management API: client refused")
            .collect();
        (list.len() >= 3).then_some(list)
    })
    .unwrap_or_else(|| {
        panic!(
            "refusals not logged: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    for r in &refused {
        assert_eq!(r["level"], "WARN", "{r}");
        let peer: std::net::SocketAddr = r["fields"]["peer"].as_str().unwrap().parse().unwrap();
        assert_eq!(peer.ip().to_string(), "127.0.0.1", "{r}");
        assert!(r["fields"]["reason"].is_string(), "{r}");
    }
    assert!(
        refused.iter().any(|r| r["fields"]["reason"]
            == "an X.509 version 1 client certificate: only version 3 is accepted"),
        "{refused:?}"
    );
    // A wrong file is an input error naming it (exit 2).
    let missing = tcp(&["--tls-ca", "/nonexistent/ca.pem"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/ca.pem"));
}
