//! One frontend's endpoint slots (`frontend . slot : endpoint` in an endpoint map), held
//! compactly: an address and a port per endpoint, 20 bytes where the same element as an
//! [`Element`] takes 128. At 10 000 Services × 10 endpoints the endpoint maps are 100 000 of
//! the installed ruleset's 120 000 elements; their [`Element`]s are made when they are read
//! (a full sync's stream, a delta, `ferry rules`).

use std::net::{IpAddr, SocketAddr};

use ferry_model::Protocol;

use super::element::{Element, Key, Value};

/// A frontend as the maps key it: what an endpoint map's slots (and session affinity's
/// records) are keyed by, before the slot number (or the endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Frontend {
    /// `address . protocol . port`: a ClusterIP, external or load-balancer IP.
    Ip(IpAddr, Protocol, u16),
    /// `protocol . port`: a node port.
    NodePort(Protocol, u16),
}

/// The slots of one frontend in one endpoint map: slot `i` holds `endpoints[i]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slots {
    /// The endpoint map.
    pub map: &'static str,
    /// The frontend.
    pub frontend: Frontend,
    /// The endpoints, in slot order.
    pub endpoints: Box<[(IpAddr, u16)]>,
}

impl Slots {
    /// The slots of `frontend` in `map`, for `endpoints` in slot order.
    pub fn new(map: &'static str, frontend: Frontend, endpoints: &[SocketAddr]) -> Self {
        Self {
            map,
            frontend,
            endpoints: endpoints.iter().map(|e| (e.ip(), e.port())).collect(),
        }
    }

    /// The key of slot `i`.
    pub fn key(&self, i: u32) -> Key {
        match self.frontend {
            Frontend::Ip(ip, protocol, port) => Key::FrontendSlot(ip, protocol, port, i),
            Frontend::NodePort(protocol, port) => Key::NodePortSlot(protocol, port, i),
        }
    }

    /// The map's elements, in slot order.
    pub fn elements(&self) -> impl Iterator<Item = Element> + '_ {
        (0u32..).zip(self.endpoints.iter()).map(|(i, (ip, port))| {
            let value = Value::Endpoint(SocketAddr::new(*ip, *port));
            Element::new(self.map, self.key(i), Some(value))
        })
    }

    /// The endpoint addresses.
    pub fn addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.endpoints.iter().map(|(ip, _)| *ip)
    }
}
