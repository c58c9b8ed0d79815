use ferry_model::{Protocol, ServiceName, ServicePortName};

use super::*;

/// `n` Services of `per_service` ports each (`p0`, `p1` …), TCP.
fn service_ports(n: usize, per_service: usize) -> Vec<ServicePortName> {
    (0..n)
        .flat_map(|i| {
            (0..per_service).map(move |p| ServicePortName {
                service: ServiceName::new("scale", format!("svc-{i:05}")),
                port: format!("p{p}"),
                protocol: Protocol::Tcp,
            })
        })
        .collect()
}

/// The drills' failure: 10 000 Services with the default range (10 000 ports then) while the
/// node's own outgoing connections held a few ports of it (each found busy when its listener
/// opened). Now: all of them, and room for 9 000 service ports more.
#[test]
fn the_default_range_serves_ten_thousand_services_with_room_to_spare() {
    let mut ports = ProxyPorts::new(PortRange::DEFAULT);
    for busy in [PortRange::DEFAULT.first, PortRange::DEFAULT.last] {
        ports.mark_unusable(busy);
    }
    let mut names = service_ports(10_000, 1);
    names.extend(
        service_ports(9_000, 2)
            .into_iter()
            .filter(|n| n.port == "p1"),
    );
    let failed: Vec<_> = names.iter().filter_map(|n| ports.assign(n).err()).collect();
    assert!(
        failed.is_empty(),
        "{} without a port: {}",
        failed.len(),
        failed[0]
    );
    assert_eq!(ports.len(), 19_000);
}

/// An explicit range too small: the service ports left over are named, each in its own error,
/// and the ones that got a port keep it.
#[test]
fn a_small_range_names_every_service_port_left_without_a_port() {
    let range = PortRange::parse("20000+9").expect("range");
    let mut ports = ProxyPorts::new(range);
    let names = service_ports(6, 2);
    let failed: Vec<RangeExhausted> = names.iter().filter_map(|n| ports.assign(n).err()).collect();
    assert_eq!((ports.len(), failed.len()), (10, 2));
    assert_eq!(
        failed[0].to_string(),
        "Service scale/svc-00005 port \"p0\" (tcp) got no proxy port: all 10 ports of portRange \
         20000-20009 are taken (set portRange to a larger range)"
    );
    // Freed by a deleted Service: the next one gets its port once its listener is closed
    // (before, a listener opening on it would find it busy).
    ports.release(&names[0]);
    assert!(ports.assign(&names[10]).is_err());
    ports.closed();
    assert!(ports.assign(&names[10]).is_ok());
    assert!(ports.get(&names[1]).is_some());
}

#[test]
fn the_default_range_stays_clear_of_the_ephemeral_ports() {
    let r = |first, last| PortRange { first, last };
    // Linux's default ephemeral ports: the default itself, 19 740 ports.
    assert_eq!(
        PortRange::clear_of(PortRange::LINUX_EPHEMERAL),
        PortRange::DEFAULT
    );
    assert!(!PortRange::DEFAULT.overlaps(PortRange::LINUX_EPHEMERAL));
    assert_eq!(PortRange::DEFAULT.size(), 19_740);
    // The drills' old default (40000-49999) lay inside them.
    assert!(r(40000, 49999).overlaps(PortRange::LINUX_EPHEMERAL));
    // (ephemeral ports, the default chosen, whether it still overlaps them)
    for (ephemeral, want, overlaps) in [
        // Ephemeral ports down to 15000: the ports above them are the larger stretch.
        (r(15000, 45000), r(45001, 65535), false),
        // Up to the top: what is left of the default window.
        (r(21000, 65535), r(10260, 20999), false),
        (r(1024, 12000), r(32768, 65535), false),
        // A narrow range elsewhere leaves the default whole.
        (r(61000, 65535), PortRange::DEFAULT, false),
        // No stretch of 10 000 ports left: the default, overlapping (the caller says so).
        (r(20000, 65535), PortRange::DEFAULT, true),
        (r(1024, 65535), PortRange::DEFAULT, true),
    ] {
        let got = PortRange::clear_of(ephemeral);
        assert_eq!(got, want, "ephemeral {ephemeral}");
        assert!(got.size() >= PortRange::MIN_DEFAULT_SIZE, "{got}");
        assert_eq!(got.overlaps(ephemeral), overlaps, "ephemeral {ephemeral}");
    }
}

#[test]
fn empty_and_zero_ask_for_the_default() {
    for v in ["", " ", "0-0"] {
        assert!(PortRange::is_default(v), "{v:?}");
    }
    assert!(!PortRange::is_default("20000-20009"));
}
