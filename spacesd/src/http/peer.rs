//! Who is at the other end of a connection, for [`super::auth`]: on the Unix socket the peer's
//! uid and pid (`SO_PEERCRED`), on loopback TCP the process holding the client's socket (its
//! inode from `/proc/net/tcp`, then the open files of the processes this daemon's runs and
//! commands hold). Either way the answer is which run's or command's tree holds the peer, if one
//! does (`spaces_codespace::process::held`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use spaces_codespace::process::held::{self, Holder};

/// A connection's peer as accepted.
#[derive(Debug, Clone, Copy)]
pub enum Accepted {
    /// Unix socket: uid and pid, when the kernel gave them.
    Unix(Option<(u32, Option<i32>)>),
    /// TCP: the client's address and ours.
    Tcp { peer: SocketAddr, local: SocketAddr },
}

/// Which tree holds the peer of `accepted` (reads `/proc`: call it off the runtime's threads).
pub fn holder(accepted: Accepted) -> Holder {
    match accepted {
        Accepted::Unix(Some((_, Some(pid)))) => held::holder_of(pid),
        Accepted::Unix(_) => Holder::Unknown,
        Accepted::Tcp { .. } if !held::any() => Holder::Nobody,
        Accepted::Tcp { peer, local } => match tcp_inode(peer, local) {
            Some(inode) => held::socket_holder(inode),
            // No socket table to read (a restricted /proc): the token alone decides.
            None if !std::path::Path::new("/proc/net/tcp").exists() => Holder::Nobody,
            None => Holder::Unknown,
        },
    }
}

/// The inode of the client's end of a loopback TCP connection: the line of `/proc/net/tcp`
/// (or `tcp6`) whose local address is `peer` and remote address `local`.
fn tcp_inode(peer: SocketAddr, local: SocketAddr) -> Option<u64> {
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(l), Some(r), Some(inode)) = (fields.get(1), fields.get(2), fields.get(9)) else { continue };
            if same(parse(l), peer) && same(parse(r), local) {
                return inode.parse().ok();
            }
        }
    }
    None
}

/// An address as `/proc/net/tcp{,6}` prints it: `HEX:PORT`, the address as the kernel's
/// 32-bit words in host byte order.
fn parse(field: &str) -> Option<SocketAddr> {
    let (addr, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok().map(u32::to_ne_bytes);
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether `a` is `b` (an IPv4 address and its IPv4-mapped IPv6 form are the same).
fn same(a: Option<SocketAddr>, b: SocketAddr) -> bool {
    let canon = |s: SocketAddr| SocketAddr::new(s.ip().to_canonical(), s.port());
    a.is_some_and(|a| canon(a) == canon(b))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_addresses_read_back() {
        if cfg!(target_endian = "little") {
            assert_eq!(parse("0100007F:1F90"), Some("127.0.0.1:8080".parse().unwrap()));
            assert_eq!(parse("00000000000000000000000001000000:0050"), Some("[::1]:80".parse().unwrap()));
        }
    }

    #[test]
    fn a_connection_of_this_process_is_found_by_its_inode() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        let inode = tcp_inode(peer, listener.local_addr().unwrap()).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&client);
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert_eq!(link.display().to_string(), format!("socket:[{inode}]"));
    }
}
