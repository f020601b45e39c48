//! Who is at the other end of a connection, as the kernel tells it when the connection is
//! accepted: on the Unix socket the peer's uid and pid (`SO_PEERCRED`); on TCP nothing (the
//! bearer token decides).
//! Identity is never guessed from the peer's process (its parent chain, its open sockets): a
//! process of a run reaches the daemon only through its run's own socket
//! (`spaces_host::supervisor::api`).

/// A connection's peer as accepted.
#[derive(Debug, Clone, Copy)]
pub enum Accepted {
    /// Unix socket: uid and pid, when the kernel gave them.
    Unix(Option<(u32, Option<i32>)>),
    /// TCP.
    Tcp,
}
