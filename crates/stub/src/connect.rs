//! Where the connection to the runtime comes from.
//!
//! In order: a connection given to the builder; else the socket the runtime handed over
//! in `NRI_PLUGIN_SOCKET` (pre-launched plugins); else a dial of the runtime's socket
//! path. A given or handed-over connection is used by one run only.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::Error;

#[cfg(feature = "async")]
mod connector;
#[cfg(feature = "async")]
pub(crate) use connector::{BoxTrunk, Connector};

pub(super) fn parse_fd(value: &str) -> Result<i32, std::num::ParseIntError> {
    value.parse::<i32>()
}

/// Takes ownership of the socket named by the value of `NRI_PLUGIN_SOCKET`.
pub(crate) fn stream_from_env(value: &str) -> Result<std::os::unix::net::UnixStream, Error> {
    let fd = parse_fd(value).map_err(|e| Error::InvalidSocketEnv {
        value: value.to_string(),
        reason: e.to_string(),
    })?;
    stream_from_fd(fd).map_err(|source| Error::InvalidSocketFd { fd, source })
}

/// Checks that `fd` is an open stream socket and takes ownership of it.
fn stream_from_fd(fd: i32) -> io::Result<std::os::unix::net::UnixStream> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc_ebadf()));
    }
    // SAFETY: the borrow only lives for the checks below, which are plain syscalls on the
    // number; an fd that is not open makes them fail with EBADF.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    check_stream_socket(borrowed)?;
    // SAFETY: the runtime that launched this process handed the descriptor over for the
    // plugin connection: it is open (checked above), a stream socket, owned by nobody
    // else in this process, and the connector takes it at most once.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    rustix::io::fcntl_setfd(owned.as_fd(), rustix::io::FdFlags::CLOEXEC)?;
    let stream = std::os::unix::net::UnixStream::from(owned);
    stream.set_nonblocking(true)?;
    Ok(stream)
}

fn check_stream_socket(fd: BorrowedFd<'_>) -> io::Result<()> {
    let stat = rustix::fs::fstat(fd)?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Socket {
        return Err(io::Error::from(rustix::io::Errno::NOTSOCK));
    }
    if rustix::net::sockopt::socket_type(fd)? != rustix::net::SocketType::STREAM {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a stream socket",
        ));
    }
    Ok(())
}

fn libc_ebadf() -> i32 {
    rustix::io::Errno::BADF.raw_os_error()
}
