//! The kernel's ephemeral ports (`net.ipv4.ip_local_port_range`, IPv6's too): the ports it
//! gives outgoing connections. The userspace mode's default proxy ports stay clear of them
//! ([`PortRange::clear_of`]), so the node's own connections never hold a proxy port.

use std::io;

use ferry_compile::userspace::PortRange;

/// Where the sysctl is read (the network namespace of the calling thread).
const SYSCTL: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// The ephemeral ports of the calling thread's network namespace.
pub fn ephemeral_ports() -> io::Result<PortRange> {
    let text = std::fs::read_to_string(SYSCTL)?;
    parse(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{SYSCTL}: {:?} is not two ports", text.trim()),
        )
    })
}

/// `32768\t60999` (the sysctl's format: first and last port, whitespace between).
pub fn parse(text: &str) -> Option<PortRange> {
    let mut ports = text.split_whitespace().map(|p| p.parse::<u16>().ok());
    let (first, last) = (ports.next()??, ports.next()??);
    (ports.next().is_none() && first <= last).then_some(PortRange { first, last })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_sysctl() {
        assert_eq!(parse("32768\t60999\n"), Some(PortRange::LINUX_EPHEMERAL));
        assert_eq!(
            parse("1024 65535"),
            Some(PortRange {
                first: 1024,
                last: 65535
            })
        );
        for bad in ["", "1024", "x 2", "2000 1000", "1 2 3", "1 70000"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
