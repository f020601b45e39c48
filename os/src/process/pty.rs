//! The pseudo-terminal of a child started with [`super::StdioSpec::Pty`], and what callers do
//! with its master.
//!
//! We open the master with `O_CLOEXEC` (no other child started meanwhile can inherit it), open the
//! slave the same way, set the window size and turn echo off on the terminal before the child
//! starts (case E13: what we write must not come back as output). The child gets the slave as
//! stdin/stdout/stderr and makes it its controlling terminal (`TIOCSCTTY` after `setsid`, see
//! `spawn.rs`); we keep only the master. On Linux termios requests on the master act on the
//! slave, so line discipline checks (`ICANON`) and resizes go through the master.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::fcntl::{open, OFlag};
use nix::pty::{grantpt, posix_openpt, ptsname_r, unlockpt, Winsize};
use nix::sys::stat::Mode;
use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};

/// Longest line (bytes before the terminator) the Linux canonical-mode line discipline accepts;
/// further bytes of the same line are discarded by the kernel without an error (N_TTY_BUF_SIZE
/// is 4096 including the newline).
pub const MAX_CANON_LINE: usize = 4095;

nix::ioctl_write_ptr_bad!(set_winsize, nix::libc::TIOCSWINSZ, Winsize);

/// An opened pair; the slave goes to the child, the master stays with us.
pub(super) struct PtyPair {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

/// Open a PTY pair of `rows` x `cols` with echo off.
pub(super) fn open_pty(rows: u16, cols: u16) -> nix::Result<PtyPair> {
    let master = posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname_r(&master)?;
    let slave = open(name.as_str(), OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC, Mode::empty())?;
    let master = OwnedFd::from(master);
    resize(master.as_fd(), rows, cols)?;
    let mut termios = tcgetattr(&slave)?;
    termios.local_flags.remove(LocalFlags::ECHO | LocalFlags::ECHONL);
    tcsetattr(&slave, SetArg::TCSANOW, &termios)?;
    Ok(PtyPair { master, slave })
}

/// Set the window size on the master; the kernel sends SIGWINCH to the foreground process group
/// of the terminal when the size changes (case P8).
pub fn resize(master: BorrowedFd<'_>, rows: u16, cols: u16) -> nix::Result<()> {
    let size = Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, which is valid for the call.
    unsafe { set_winsize(master.as_raw_fd(), &size) }.map(|_| ())
}

/// True when the terminal is in canonical (line-editing) mode.
pub fn is_canonical(master: BorrowedFd<'_>) -> nix::Result<bool> {
    Ok(tcgetattr(master)?.local_flags.contains(LocalFlags::ICANON))
}

/// The longest line in `data` counting `carried` bytes already written on the current line.
/// Returns `(longest, carried_after)`: line terminators are `\n`, `\r` and Ctrl-D.
pub fn longest_line(carried: usize, data: &[u8]) -> (usize, usize) {
    let mut current = carried;
    let mut longest = carried;
    for b in data {
        if matches!(b, b'\n' | b'\r' | 0x04) {
            current = 0;
        } else {
            current += 1;
            longest = longest.max(current);
        }
    }
    (longest, current)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn longest_line_carries_across_writes() {
        assert_eq!(longest_line(0, b"ab\ncdef"), (4, 4));
        assert_eq!(longest_line(4, b"gh\n"), (6, 0));
        assert_eq!(longest_line(0, b""), (0, 0));
    }

    #[test]
    fn a_fresh_pair_has_echo_off_and_the_size_asked_for() {
        nix::ioctl_read_bad!(get_winsize, nix::libc::TIOCGWINSZ, Winsize);
        let pair = open_pty(30, 100).unwrap();
        let termios = tcgetattr(&pair.slave).unwrap();
        assert!(!termios.local_flags.contains(LocalFlags::ECHO));
        assert!(is_canonical(pair.master.as_fd()).unwrap());
        let mut ws = Winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: TIOCGWINSZ writes one `winsize` into `ws`, which outlives the call.
        unsafe { get_winsize(pair.slave.as_raw_fd(), &mut ws) }.unwrap();
        assert_eq!((ws.ws_row, ws.ws_col), (30, 100), "the test's name promises the size");
    }
}
