//! Launching a plugin from the plugin directory: a socket pair, the child
//! gets its end as file descriptor 3 and exactly the three NRI variables.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use nri_api::plugin::{PLUGIN_IDX_ENV, PLUGIN_NAME_ENV, PLUGIN_SOCKET_ENV, PLUGIN_SOCKET_FD};
use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
use tokio::net::UnixStream;

use crate::adaptation_error::Error;
use crate::discover::Discovered;
use crate::plugin::remote::Remote;
use crate::plugin::{Backend, Plugin, PluginKind, Settings};
use crate::restart::Launched;

/// The first bytes of a WebAssembly module (`\0asm`, version 1).
const WASM_MAGIC: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/// Whether the file at `path` starts with the WebAssembly magic (`\0asm`,
/// version 1), the test the adaptation applies to the files of its plugin
/// directory: such a file is loaded as a WebAssembly plugin instead of
/// being executed. Unreadable files are not WebAssembly.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let module = dir.path().join("10-logger");
/// std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
/// assert!(nri_adaptation::is_wasm_file(&module));
/// assert!(!nri_adaptation::is_wasm_file(&dir.path().join("missing")));
/// ```
pub fn is_wasm_file(path: &Path) -> bool {
    let mut buf = [0u8; 8];
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    // One read, zero-padded, as the reference checks.
    match file.read(&mut buf) {
        Ok(n) => n == buf.len() && buf == WASM_MAGIC,
        Err(_) => false,
    }
}

/// Starts the plugin process and returns the runtime's end of its socket.
pub(crate) fn launch(plugin: &Discovered) -> Result<(UnixStream, Child), Error> {
    let name = plugin.name();
    let (local, peer) = socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| Error::SocketPair {
        plugin: name.clone(),
        source: e.into(),
    })?;
    let local = to_tokio(local).map_err(|source| Error::LocalConnection {
        plugin: name.clone(),
        source,
    })?;

    let peer_fd = peer.as_raw_fd();
    let mut cmd = Command::new(&plugin.path);
    cmd.env_clear()
        .env(PLUGIN_NAME_ENV, &plugin.base)
        .env(PLUGIN_IDX_ENV, &plugin.idx)
        .env(PLUGIN_SOCKET_ENV, PLUGIN_SOCKET_FD.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the forked child before exec and only
    // makes async-signal-safe system calls (dup2, fcntl) on file
    // descriptors; it allocates nothing and takes no locks. `peer_fd` stays
    // open in the parent until after `spawn` returns (`peer` is dropped
    // below), so it is valid in the child. dup2 onto fd 3 yields a
    // descriptor without close-on-exec; if the peer already is fd 3, dup2
    // would be a no-op, so its close-on-exec flag is cleared instead.
    unsafe {
        cmd.pre_exec(move || {
            if peer_fd == PLUGIN_SOCKET_FD {
                if libc::fcntl(peer_fd, libc::F_SETFD, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(peer_fd, PLUGIN_SOCKET_FD) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|source| Error::Launch {
        plugin: name.clone(),
        source,
    })?;
    drop(peer);
    tracing::info!(plugin = %name, pid = child.id(), "launched plugin");
    Ok((local, child))
}

/// Launches a plugin of the plugin directory and registers and configures
/// it. On failure its process is killed and reaped.
pub(crate) async fn start(settings: &Arc<Settings>, d: Discovered) -> Result<Launched, Error> {
    if is_wasm_file(&d.path) {
        return start_wasm(settings, d).await;
    }
    let (trunk, child) = launch(&d)?;
    let pending = Remote::connect(trunk, Some((&d.idx, &d.base)), Some(child), settings)?;
    let (remote, _, _) = pending.register(settings.registration_timeout).await?;
    let closed = Box::pin(remote.closed());
    let plugin = Arc::new(Plugin::new(
        &d.idx,
        &d.base,
        PluginKind::Launched,
        Backend::Remote(remote),
        settings.clone(),
    ));
    settings.metrics.record_plugin_registration(&plugin.name);
    if let Err(e) = plugin.configure(d.config).await {
        plugin.stop().await;
        return Err(e);
    }
    Ok(Launched { plugin, closed })
}

/// Loads a WebAssembly plugin of the plugin directory and configures it.
/// Its identity comes from the file name; there is no registration.
#[cfg(feature = "wasm")]
async fn start_wasm(settings: &Arc<Settings>, d: Discovered) -> Result<Launched, Error> {
    use crate::plugin::wasm::Wasm;
    tracing::info!(plugin = %d.name(), path = %d.path.display(), "found WASM plugin");
    let (path, name, options) = (d.path.clone(), d.name(), settings.wasm.clone());
    let loaded =
        tokio::task::spawn_blocking(move || nri_wasm::WasmPlugin::load(&path, &name, &options))
            .await
            .map_err(|e| nri_wasm::WasmError::Instantiate {
                plugin: d.name(),
                message: e.to_string(),
            })
            .and_then(|r| r)
            .map_err(|source| Error::WasmLoad {
                path: d.path.display().to_string(),
                source: Box::new(source),
            })?;
    let wasm = Wasm::new(loaded);
    let closed = Box::pin(wasm.closed());
    let plugin = Arc::new(Plugin::new(
        &d.idx,
        &d.base,
        PluginKind::Launched,
        Backend::Wasm(wasm),
        settings.clone(),
    ));
    if let Err(e) = plugin.configure(d.config).await {
        plugin.stop().await;
        return Err(e);
    }
    Ok(Launched { plugin, closed })
}

/// Without the `wasm` feature, WebAssembly plugins are refused (and the
/// adaptation skips them with a warning), as the reference built with
/// `nri_no_wasm`.
#[cfg(not(feature = "wasm"))]
async fn start_wasm(_settings: &Arc<Settings>, d: Discovered) -> Result<Launched, Error> {
    Err(Error::WasmUnsupported(d.path.display().to_string()))
}

fn to_tokio(fd: OwnedFd) -> io::Result<UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true)?;
    UnixStream::from_std(std)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasm_magic_is_detected() {
        let tmp = tempfile::tempdir().unwrap();
        let wasm = tmp.path().join("10-w");
        std::fs::write(
            &wasm,
            [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0xff],
        )
        .unwrap();
        let short = tmp.path().join("10-s");
        std::fs::write(&short, [0x00, 0x61]).unwrap();
        assert!(is_wasm_file(&wasm));
        assert!(!is_wasm_file(&short));
        assert!(!is_wasm_file(&tmp.path().join("missing")));
    }
}
