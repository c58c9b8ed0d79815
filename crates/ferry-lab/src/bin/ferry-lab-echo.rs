//! `ferry-lab-echo --name NAME --listen IP:PORT [--udp]`: the lab's echo pod as a standalone
//! binary (what `ferry lab-pod` does), so ferry-lab's own tests need no ferry binary.

use std::net::SocketAddr;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut name = None;
    let mut listen: Option<SocketAddr> = None;
    let mut udp = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--name" => name = args.next(),
            "--listen" => match args.next().map(|v| v.parse()) {
                Some(Ok(addr)) => listen = Some(addr),
                _ => return usage("--listen needs IP:PORT"),
            },
            "--udp" => udp = true,
            other => return usage(&format!("unexpected argument {other:?}")),
        }
    }
    let (Some(name), Some(listen)) = (name, listen) else {
        return usage("--name and --listen are required");
    };
    let served = if udp {
        ferry_lab::serve_echo_udp(&name, listen)
    } else {
        ferry_lab::serve_echo(&name, listen)
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-lab-echo {name}: {listen}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!(
        "ferry-lab-echo: {problem}\nusage: ferry-lab-echo --name NAME --listen IP:PORT [--udp]"
    );
    ExitCode::from(2)
}
