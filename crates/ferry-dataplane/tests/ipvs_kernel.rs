//! IPVS mode against a real IPVS kernel: the tests in `guest` run inside the qemu guest of
//! `ferry-lab/vm/ipvs-vm` (Debian's stock kernel), each in a network namespace of its own; the
//! one test outside boots the guest once and runs them there. As root:
//! `cargo test -p ferry-dataplane --test ipvs_kernel -- --include-ignored --nocapture`.

#[allow(dead_code)] // only `in_new_netns` is used here
mod support;

#[path = "ipvs_kernel/applier.rs"]
mod applier;
#[path = "ipvs_kernel/client.rs"]
mod client;
#[path = "ipvs_kernel/node.rs"]
mod node;

/// Boots the guest once and runs every other test of this file there (outside the guest they
/// skip; inside it this one returns at once).
#[test]
#[ignore = "needs root: qemu IPVS guest"]
fn ipvs_tests_pass_in_the_guest() {
    ferry_lab::vm::run_guest_tests("");
}

/// Helpers of the tests that run in the guest.
mod guest {
    use std::collections::BTreeSet;
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::process::Command;
    use std::time::Duration;

    use ferry_compile::ipvs::VirtualAddress;
    use ferry_model::Protocol;

    use crate::support::in_new_netns;

    /// Runs `f` in a fresh namespace of the guest; does nothing outside it.
    pub fn in_guest_netns(f: impl FnOnce() + Send + 'static) {
        if !ferry_lab::vm::in_guest() {
            eprintln!("skipped: runs inside the IPVS guest (ipvs_tests_pass_in_the_guest)");
            return;
        }
        in_new_netns(f);
    }

    pub fn sh(cmd: &str) -> String {
        let out = Command::new("sh").args(["-c", cmd]).output().expect("sh");
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn va(proto: Protocol, addr: &str) -> VirtualAddress {
        let s: SocketAddr = addr.parse().expect("socket address");
        VirtualAddress {
            protocol: proto,
            ip: s.ip(),
            port: s.port(),
        }
    }

    /// `ipvsadm -Ln`'s blocks (a service line and its real server lines, sorted), trailing
    /// spaces trimmed, as a set: ipvsadm lists services in hash order and a service's real
    /// servers newest first.
    pub fn blocks(text: &str) -> BTreeSet<Vec<String>> {
        let mut out = BTreeSet::new();
        let mut cur: Vec<String> = Vec::new();
        for line in text.lines().skip(3) {
            if !line.starts_with("  ->") && !cur.is_empty() {
                cur[1..].sort();
                out.insert(std::mem::take(&mut cur));
            }
            cur.push(line.trim_end().to_owned());
        }
        if !cur.is_empty() {
            cur[1..].sort();
            out.insert(cur);
        }
        out
    }

    /// Pods of the node (this namespace) behind veths, each answering its name over TCP on
    /// port 8080 (IPv4 and IPv6): pod `i` is 10.0.i.5 and fd00:i::5; deleted on drop.
    pub struct Pods(Vec<String>);

    impl Drop for Pods {
        fn drop(&mut self) {
            for ns in &self.0 {
                let _ = Command::new("ip").args(["netns", "del", ns]).status();
            }
        }
    }

    pub fn pods(n: u8) -> Pods {
        let mut names = Vec::new();
        sh("ip link set lo up");
        for i in 1..=n {
            let ns = format!("ferry-ipvs-pod{i}-{}", std::process::id());
            sh(&format!(
                "ip netns add {ns} && ip link add vpod{i} type veth peer name eth0 netns {ns} \
                 && ip addr add 10.0.{i}.1/24 dev vpod{i} \
                 && ip addr add fd00:{i}::1/64 dev vpod{i} nodad && ip link set vpod{i} up \
                 && ip -n {ns} link set lo up && ip -n {ns} addr add 10.0.{i}.5/24 dev eth0 \
                 && ip -n {ns} addr add fd00:{i}::5/64 dev eth0 nodad \
                 && ip -n {ns} link set eth0 up && ip -n {ns} route add default via 10.0.{i}.1 \
                 && ip -n {ns} -6 route add default via fd00:{i}::1"
            ));
            let path = format!("/run/netns/{ns}");
            let name = format!("pod{i}");
            std::thread::spawn(move || {
                let f = std::fs::File::open(path).expect("netns file");
                nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
                let l = TcpListener::bind("[::]:8080").expect("listen");
                for mut s in l.incoming().flatten() {
                    let name = name.clone();
                    std::thread::spawn(move || {
                        let _ = s.write_all(name.as_bytes());
                        // Keep the connection open until the client closes it.
                        let _ = s.read(&mut [0u8; 16]);
                    });
                }
            });
            names.push(ns);
        }
        std::thread::sleep(Duration::from_millis(200));
        Pods(names)
    }

    /// Connects and reads the pod's name (the connection stays open while the stream lives).
    pub fn ask(addr: &str) -> Result<(String, TcpStream), std::io::Error> {
        let mut s =
            TcpStream::connect_timeout(&addr.parse().expect("address"), Duration::from_secs(2))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        let mut buf = [0u8; 16];
        let n = s.read(&mut buf)?;
        Ok((String::from_utf8_lossy(&buf[..n]).into_owned(), s))
    }
}
