//! Who may reach a listening Unix socket: the socket file's mode and group,
//! the directory it lives in, and the credentials of each connecting peer.
//!
//! [`bind`] creates the socket with the mode (and group) of a
//! [`SocketAccess`] whatever the process umask, refusing a directory that
//! others can write to; [`PeerCredentials`] reads who connected
//! (`SO_PEERCRED` and `/proc/<pid>/exe`) and [`SocketAccess::admit`] checks
//! them against the allowed uids and gids. The adaptation uses this for the
//! external plugin socket ([`AdaptationBuilder::socket_access`]); nri-hostd
//! for its control socket.
//!
//! ```
//! use nri_adaptation::socket::{self, SocketAccess};
//! use std::os::unix::fs::PermissionsExt;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("run/nri.sock");
//! let listener = socket::bind(&path, &SocketAccess::default())?;
//! let mode = std::fs::metadata(&path)?.permissions().mode();
//! assert_eq!(mode & 0o7777, 0o600);
//! // The directory it created is the owner's only.
//! let dir_mode = std::fs::metadata(path.parent().unwrap())?.permissions().mode();
//! assert_eq!(dir_mode & 0o7777, 0o700);
//! # drop(listener);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`AdaptationBuilder::socket_access`]: crate::AdaptationBuilder::socket_access

use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

/// The mode a socket gets when none is configured: only its owner (the
/// runtime's user, normally root) may connect.
pub const DEFAULT_SOCKET_MODE: u32 = 0o600;

/// Longest path a Unix socket address holds (`sun_path` is 108 bytes with
/// the terminating NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Who may reach a socket: its file mode and group, and which peers are
/// admitted once connected.
///
/// The default is mode 0600, the group of the process, and every peer the
/// mode lets connect.
///
/// ```
/// use nri_adaptation::socket::{PeerCredentials, SocketAccess};
///
/// // Members of group 2000 may connect; root and uid 1000 are admitted,
/// // and so is any peer whose (effective) group is 2000.
/// let access = SocketAccess::default()
///     .mode(0o660)
///     .group(2000)
///     .allow_uids([0, 1000])
///     .allow_gids([2000]);
/// let peer = |uid, gid| PeerCredentials { pid: None, uid, gid, exe: None };
/// assert!(access.admit(&peer(1000, 1000)).is_ok());
/// assert!(access.admit(&peer(1001, 2000)).is_ok());
/// let refused = access.admit(&peer(65534, 65534)).unwrap_err();
/// assert!(refused.to_string().contains("uid 65534"), "{refused}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketAccess {
    /// Permission bits of the socket file (default [`DEFAULT_SOCKET_MODE`]);
    /// at most `0o777`. Connecting needs write permission on it.
    pub mode: u32,
    /// Group (gid) the socket file, and a directory [`bind`] creates, are
    /// given; `None` keeps the process's group.
    pub group: Option<u32>,
    /// Peers with one of these uids are admitted.
    pub allowed_uids: Vec<u32>,
    /// Peers whose group (the effective gid `SO_PEERCRED` reports;
    /// supplementary groups do not count) is one of these are admitted.
    pub allowed_gids: Vec<u32>,
}

impl Default for SocketAccess {
    fn default() -> Self {
        SocketAccess {
            mode: DEFAULT_SOCKET_MODE,
            group: None,
            allowed_uids: Vec::new(),
            allowed_gids: Vec::new(),
        }
    }
}

impl SocketAccess {
    /// Sets the socket file's permission bits (e.g. `0o660`).
    pub fn mode(mut self, mode: u32) -> Self {
        self.mode = mode;
        self
    }

    /// Gives the socket file (and a directory [`bind`] creates) this group.
    pub fn group(mut self, gid: u32) -> Self {
        self.group = Some(gid);
        self
    }

    /// Admits peers with these uids (in addition to earlier ones). Once any
    /// uid or gid is allowed, every other peer is refused.
    pub fn allow_uids(mut self, uids: impl IntoIterator<Item = u32>) -> Self {
        self.allowed_uids.extend(uids);
        self
    }

    /// Admits peers with these (effective) gids.
    pub fn allow_gids(mut self, gids: impl IntoIterator<Item = u32>) -> Self {
        self.allowed_gids.extend(gids);
        self
    }

    /// Whether only listed uids and gids are admitted.
    pub fn restricts_peers(&self) -> bool {
        !self.allowed_uids.is_empty() || !self.allowed_gids.is_empty()
    }

    /// The mode of a directory [`bind`] creates: 0700, or 0750 with a group
    /// (its members must be able to reach the socket).
    pub fn directory_mode(&self) -> u32 {
        if self.group.is_some() {
            0o750
        } else {
            0o700
        }
    }

    /// Checks the mode: permission bits only (no set-id or sticky bits).
    pub fn check(&self) -> Result<(), SocketError> {
        if self.mode & !0o777 != 0 {
            return Err(SocketError::InvalidMode(self.mode));
        }
        Ok(())
    }

    /// Admits `peer` if no uids or gids are listed, or if its uid or gid is
    /// listed.
    pub fn admit(&self, peer: &PeerCredentials) -> Result<(), PeerRefused> {
        if !self.restricts_peers()
            || self.allowed_uids.contains(&peer.uid)
            || self.allowed_gids.contains(&peer.gid)
        {
            return Ok(());
        }
        Err(PeerRefused {
            peer: Some(peer.clone()),
            reason: format!(
                "uid {} is not among the allowed uids {:?} and gid {} not among the allowed gids {:?}",
                peer.uid, self.allowed_uids, peer.gid, self.allowed_gids
            ),
        })
    }

    /// Admits the peer of `stream`: reads its credentials and checks them
    /// with [`admit`](Self::admit). A peer whose credentials cannot be read
    /// is refused when uids or gids are listed, and admitted otherwise.
    pub fn admit_stream(
        &self,
        stream: &tokio::net::UnixStream,
    ) -> Result<Option<PeerCredentials>, PeerRefused> {
        match PeerCredentials::of(stream) {
            Ok(peer) => self.admit(&peer).map(|()| Some(peer)),
            Err(e) if self.restricts_peers() => Err(PeerRefused {
                peer: None,
                reason: format!("its credentials cannot be read: {e}"),
            }),
            Err(_) => Ok(None),
        }
    }
}

/// Parses a socket mode written as octal digits: `"0600"`, `"660"` or
/// `"0o660"`, at most `0o777`.
///
/// ```
/// assert_eq!(nri_adaptation::socket::parse_mode("0660").unwrap(), 0o660);
/// assert!(nri_adaptation::socket::parse_mode("0888").is_err());
/// assert!(nri_adaptation::socket::parse_mode("4755").is_err());
/// ```
pub fn parse_mode(text: &str) -> Result<u32, SocketError> {
    let digits = text.trim();
    let digits = digits.strip_prefix("0o").unwrap_or(digits);
    let bad = || SocketError::ModeSyntax(text.to_string());
    if digits.is_empty() || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return Err(bad());
    }
    let mode = u32::from_str_radix(digits, 8).map_err(|_| bad())?;
    SocketAccess::default().mode(mode).check()?;
    Ok(mode)
}

/// Who is at the other end of a Unix connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCredentials {
    /// Its process id (in this process's pid namespace), if the kernel
    /// reported one.
    pub pid: Option<i32>,
    /// Its effective user id when it connected.
    pub uid: u32,
    /// Its effective group id when it connected.
    pub gid: u32,
    /// Its executable (`/proc/<pid>/exe`), read when it was accepted; `None`
    /// if that could not be read.
    pub exe: Option<PathBuf>,
}

impl PeerCredentials {
    /// Reads the credentials of `stream`'s peer (`SO_PEERCRED`).
    pub fn of(stream: &tokio::net::UnixStream) -> io::Result<PeerCredentials> {
        let cred = stream.peer_cred()?;
        let pid = cred.pid().filter(|p| *p > 0);
        Ok(PeerCredentials {
            pid,
            uid: cred.uid(),
            gid: cred.gid(),
            exe: pid.and_then(|p| std::fs::read_link(format!("/proc/{p}/exe")).ok()),
        })
    }
}

impl fmt::Display for PeerCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "pid {pid}")?,
            None => f.write_str("pid unknown")?,
        }
        write!(f, " uid {} gid {}", self.uid, self.gid)?;
        match &self.exe {
            Some(exe) => write!(f, " exe {}", exe.display()),
            None => f.write_str(" exe unknown"),
        }
    }
}

/// A connection refused by [`SocketAccess::admit`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("connection from {} refused: {reason}", self.peer_text())]
pub struct PeerRefused {
    /// The peer, if its credentials could be read.
    pub peer: Option<PeerCredentials>,
    /// Why it was refused.
    pub reason: String,
}

impl PeerRefused {
    /// The peer as [`PeerCredentials`] shows it, or `an unknown peer`.
    pub fn peer_text(&self) -> String {
        self.peer
            .as_ref()
            .map_or_else(|| "an unknown peer".to_string(), |p| p.to_string())
    }
}

/// Why a socket cannot be created as asked.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The mode has bits beyond the permission bits.
    #[error("invalid socket mode {0:#o}: only permission bits (at most 0o777) may be given")]
    InvalidMode(u32),
    /// A mode in a configuration is not written in octal digits.
    #[error("invalid socket mode {0:?}: expected octal digits such as \"0600\" or \"0660\"")]
    ModeSyntax(String),
    /// The socket's directory (or one above it) lets others replace the
    /// socket.
    #[error("refusing to listen on {}: {reason}", .socket.display())]
    UnsafeDirectory {
        /// The socket path.
        socket: PathBuf,
        /// Which directory, and what is wrong with it.
        reason: String,
    },
    /// A system call failed.
    #[error("cannot {action} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The system error.
        #[source]
        source: io::Error,
    },
}

impl From<SocketError> for io::Error {
    fn from(e: SocketError) -> io::Error {
        let kind = match &e {
            SocketError::InvalidMode(_) | SocketError::ModeSyntax(_) => io::ErrorKind::InvalidInput,
            SocketError::UnsafeDirectory { .. } => io::ErrorKind::PermissionDenied,
            SocketError::Io { source, .. } => source.kind(),
        };
        io::Error::new(kind, e)
    }
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SocketError + 'a {
    move |source| SocketError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Creates a listening socket at `path` with `access`'s mode and group,
/// replacing a stale socket (or file) there.
///
/// A missing directory (and missing ones above it) is created with
/// [`SocketAccess::directory_mode`] and the group. The directory must then
/// be safe, or nothing is created in it ([`SocketError::UnsafeDirectory`]):
///
/// - the socket's own directory must be owned by root or by this process's
///   user and must not be writable by its group or by others, sticky bit
///   or not: whoever may create entries there could put their own socket
///   in place of ours between two starts, or take the name first;
/// - every directory above it must be owned by root or by this process's
///   user, and may be writable by others only with the sticky bit (as
///   `/tmp` is): otherwise someone else could rename the socket's directory
///   away and put their own in its place.
///
/// The returned listener is non-blocking (ready for
/// `tokio::net::UnixListener::from_std`).
pub fn bind(path: &Path, access: &SocketAccess) -> Result<UnixListener, SocketError> {
    access.check()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if path.file_name().is_none() {
        return Err(SocketError::Io {
            action: "create a socket at",
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "the path has no file name"),
        });
    }
    create_missing_dirs(&dir, access)?;
    check_directory(path, &dir)?;
    if let Some(gid) = access.group {
        let meta = std::fs::metadata(&dir).map_err(io_err("inspect", &dir))?;
        if meta.mode() & 0o010 == 0 {
            tracing::warn!(dir = %dir.display(), gid, mode = format!("{:04o}", meta.mode() & 0o7777),
                "the socket's group cannot enter the socket's directory");
        }
    }
    if access.mode & 0o002 != 0 {
        tracing::warn!(socket = %path.display(), mode = format!("{:04o}", access.mode),
            "the socket's mode lets every user connect");
    }

    // How the socket gets its mode with no moment in which it is reachable
    // under a looser one:
    //
    // - bind(2) creates the socket file with 0777 minus the umask, and the
    //   umask is the process's (dockerd runs with 0); changing it around
    //   the bind would race with every other thread creating files.
    // - fchmod(2) on the socket's descriptor does not change the file bind
    //   created on Linux, so "fchmod before listen" does not help.
    // - chmod(2) after bind at the final path leaves the file there with
    //   the umask's mode until the chmod, for everyone to see (though not
    //   to connect to before listen).
    //
    // So the socket is bound inside a fresh private directory (mode 0700,
    // created by us, next to the final path so that rename(2) stays on one
    // filesystem), given its mode and group there, and then renamed onto
    // the final path in one step, which also replaces a stale socket. Until
    // the rename only this user can reach it; after it, it has its final
    // mode and group.
    let private = make_private_dir(&dir)?;
    let result = bind_in(&private, path, access);
    let _ = std::fs::remove_file(private.join("s"));
    let _ = std::fs::remove_dir(&private);
    result
}

/// Binds `private/s`, sets its mode and group, and renames it to `path`.
fn bind_in(
    private: &Path,
    path: &Path,
    access: &SocketAccess,
) -> Result<UnixListener, SocketError> {
    let temp = private.join("s");
    let listener = if temp.as_os_str().len() <= MAX_SOCKET_PATH {
        UnixListener::bind(&temp).map_err(io_err("bind", &temp))?
    } else {
        // The private directory's path is longer than the final one and no
        // longer fits a socket address: reach it through its descriptor.
        let handle = std::fs::File::open(private).map_err(io_err("open", private))?;
        let short = PathBuf::from(format!("/proc/self/fd/{}/s", handle.as_raw_fd()));
        UnixListener::bind(&short).map_err(io_err("bind", &temp))?
    };
    std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(access.mode))
        .map_err(io_err("set the mode of", &temp))?;
    if let Some(gid) = access.group {
        std::os::unix::fs::chown(&temp, None, Some(gid))
            .map_err(io_err("set the group of", &temp))?;
    }
    std::fs::rename(&temp, path).map_err(io_err("move the socket into place at", path))?;
    listener
        .set_nonblocking(true)
        .map_err(io_err("configure", path))?;
    Ok(listener)
}

/// Creates a fresh directory, mode 0700, in `dir`.
fn make_private_dir(dir: &Path) -> Result<PathBuf, SocketError> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let pid = std::process::id();
    let mut last = None;
    for attempt in 0..32u32 {
        let tag = (seed ^ pid.rotate_left(16)).wrapping_add(attempt.wrapping_mul(0x9e37_79b9));
        let candidate = dir.join(format!(".nri-{:08x}", tag));
        match std::fs::DirBuilder::new().mode(0o700).create(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(io_err("create a private directory", &candidate)(e)),
        }
    }
    Err(SocketError::Io {
        action: "create a private directory in",
        path: dir.to_path_buf(),
        source: last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)),
    })
}

/// Creates `dir` and the missing directories above it with the access's
/// directory mode (set explicitly: the umask only takes bits away) and
/// group.
fn create_missing_dirs(dir: &Path, access: &SocketAccess) -> Result<(), SocketError> {
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur.filter(|d| !d.as_os_str().is_empty()) {
        match std::fs::symlink_metadata(d) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(d),
            Err(e) => return Err(io_err("inspect", d)(e)),
        }
        cur = d.parent();
    }
    let mode = access.directory_mode();
    for d in missing.into_iter().rev() {
        match std::fs::DirBuilder::new().mode(mode).create(d) {
            Ok(()) => {}
            // Created meanwhile by someone else: checked like any other.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err("create the directory", d)(e)),
        }
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode))
            .map_err(io_err("set the mode of", d))?;
        if let Some(gid) = access.group {
            std::os::unix::fs::chown(d, None, Some(gid)).map_err(io_err("set the group of", d))?;
        }
        tracing::info!(dir = %d.display(), mode = format!("{mode:04o}"), "created socket directory");
    }
    Ok(())
}

/// Refuses a socket directory that others could write to (see [`bind`]).
fn check_directory(socket: &Path, dir: &Path) -> Result<(), SocketError> {
    let real = std::fs::canonicalize(dir).map_err(io_err("resolve", dir))?;
    let me = rustix::process::geteuid().as_raw();
    let unsafe_dir = |reason: String| SocketError::UnsafeDirectory {
        socket: socket.to_path_buf(),
        reason,
    };
    let mut cur = Some(real.as_path());
    let mut own = true;
    while let Some(d) = cur {
        let meta = std::fs::metadata(d).map_err(io_err("inspect", d))?;
        let mode = meta.mode() & 0o7777;
        let what = if own {
            format!("its directory {}", d.display())
        } else {
            format!("{} (above its directory)", d.display())
        };
        if own && !meta.is_dir() {
            return Err(unsafe_dir(format!("{what} is not a directory")));
        }
        if meta.uid() != 0 && meta.uid() != me {
            return Err(unsafe_dir(format!(
                "{what} is owned by uid {}, neither root nor this process's uid {me}",
                meta.uid()
            )));
        }
        let sticky = mode & 0o1000 != 0;
        let writable = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (_, true) => Some("others"),
            (true, false) => Some("its group"),
            (false, false) => None,
        };
        if let Some(who) = writable {
            if own {
                return Err(unsafe_dir(format!(
                    "{what} is writable by {who} (mode {mode:04o}); use a directory only its owner can write to"
                )));
            }
            if !sticky {
                return Err(unsafe_dir(format!(
                    "{what} is writable by {who} without the sticky bit (mode {mode:04o})"
                )));
            }
        }
        own = false;
        cur = d.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_as_octal_and_stay_permission_bits() {
        assert_eq!(parse_mode("0600").unwrap(), 0o600);
        assert_eq!(parse_mode("660").unwrap(), 0o660);
        assert_eq!(parse_mode("0o640").unwrap(), 0o640);
        for bad in ["", "rw", "0x1ff", "8", "-600"] {
            assert!(
                matches!(parse_mode(bad), Err(SocketError::ModeSyntax(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            parse_mode("1777"),
            Err(SocketError::InvalidMode(0o1777))
        ));
        let err = SocketAccess::default().mode(0o4600).check().unwrap_err();
        assert!(err.to_string().contains("0o4600"), "{err}");
    }

    #[test]
    fn the_allow_list_admits_listed_uids_and_gids_only() {
        let peer = |uid, gid| PeerCredentials {
            pid: Some(42),
            uid,
            gid,
            exe: Some("/usr/bin/plugin".into()),
        };
        let open = SocketAccess::default();
        assert!(open.admit(&peer(65534, 65534)).is_ok());
        let uids = SocketAccess::default().allow_uids([0]);
        assert!(uids.admit(&peer(0, 5)).is_ok());
        let refused = uids.admit(&peer(1000, 0)).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "connection from pid 42 uid 1000 gid 0 exe /usr/bin/plugin refused: \
             uid 1000 is not among the allowed uids [0] and gid 0 not among the allowed gids []"
        );
        let gids = SocketAccess::default().allow_gids([7]);
        assert!(gids.admit(&peer(1000, 7)).is_ok());
        assert!(gids.admit(&peer(7, 1000)).is_err());
    }

    #[test]
    fn peer_credentials_of_a_connection_are_this_process() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (a, _b) = tokio::net::UnixStream::pair().unwrap();
            let peer = PeerCredentials::of(&a).unwrap();
            assert_eq!(peer.pid, Some(std::process::id() as i32));
            assert_eq!(peer.uid, rustix::process::geteuid().as_raw());
            assert_eq!(peer.gid, rustix::process::getegid().as_raw());
            assert_eq!(peer.exe, Some(std::env::current_exe().unwrap()));
            let shown = peer.to_string();
            assert!(
                shown.starts_with(&format!("pid {} uid ", std::process::id())),
                "{shown}"
            );
        });
    }

    #[test]
    fn unsafe_directories_are_refused_and_nothing_is_created_in_them() {
        let tmp = tempfile::tempdir().unwrap();
        for (mode, words) in [
            (0o777, "writable by others"),
            (0o1777, "writable by others"),
            (0o775, "writable by its group"),
        ] {
            let dir = tmp.path().join(format!("d{mode:o}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let path = dir.join("nri.sock");
            let err = bind(&path, &SocketAccess::default()).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, SocketError::UnsafeDirectory { .. }), "{text}");
            assert!(text.contains(words), "{text}");
            assert!(text.contains(&format!("{mode:04o}")), "{text}");
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "{text}");
        }
        // A directory above that others may write to, without the sticky bit.
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = bind(&open.join("sub/nri.sock"), &SocketAccess::default()).unwrap_err();
        assert!(err.to_string().contains("without the sticky bit"), "{err}");
        // With the sticky bit, as /tmp: fine, the created directory is 0700.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let path = open.join("sub2/nri.sock");
        let _l = bind(&path, &SocketAccess::default()).unwrap();
        let meta = std::fs::metadata(open.join("sub2")).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o700);
    }

    #[test]
    fn a_stale_socket_is_replaced_and_no_private_directory_is_left() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nri.sock");
        let first = bind(&path, &SocketAccess::default()).unwrap();
        drop(first);
        let ino = std::fs::metadata(&path).unwrap().ino();
        let second = bind(&path, &SocketAccess::default().mode(0o640)).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_ne!(meta.ino(), ino);
        assert_eq!(meta.mode() & 0o7777, 0o640);
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("nri.sock")]);
        std::os::unix::net::UnixStream::connect(&path).unwrap();
        drop(second);
    }

    #[test]
    fn a_path_at_the_address_limit_is_bound_through_its_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().as_os_str().len() + 1;
        let path = tmp.path().join("s".repeat(MAX_SOCKET_PATH - base));
        assert_eq!(path.as_os_str().len(), MAX_SOCKET_PATH);
        let listener = bind(&path, &SocketAccess::default()).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()));
        assert_eq!(meta.mode() & 0o7777, 0o600);
        std::os::unix::net::UnixStream::connect(&path).unwrap();
        drop(listener);
    }

    #[test]
    fn the_configured_group_is_given_to_the_socket_and_its_new_directory() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: giving files another group needs root");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("run/nri.sock");
        let gid = 65534;
        let access = SocketAccess::default().mode(0o660).group(gid);
        let _l = bind(&path, &access).unwrap();
        let sock = std::fs::metadata(&path).unwrap();
        assert_eq!((sock.mode() & 0o7777, sock.gid()), (0o660, gid));
        let dir = std::fs::metadata(tmp.path().join("run")).unwrap();
        assert_eq!((dir.mode() & 0o7777, dir.gid()), (0o750, gid));
    }
}
