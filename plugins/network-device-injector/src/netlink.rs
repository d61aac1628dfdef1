//! Moving network devices between the host's and a pod's network namespace (rtnetlink).
//!
//! Work in the pod's namespace runs on a short-lived thread that entered it, with a
//! netlink socket opened there; the rest of the process stays in the host namespace.

use std::fs::File;
use std::future::Future;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

use futures_util::TryStreamExt;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::{Handle, LinkUnspec};
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};

use crate::netdevice::NetDevice;

/// A netlink operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// A network namespace could not be opened or entered.
    #[error("network namespace {path:?}: {source}")]
    Namespace {
        /// The namespace file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No netlink socket could be set up.
    #[error("netlink connection: {0}")]
    Connection(#[source] std::io::Error),
    /// The device does not exist.
    #[error("failed to find link {0:?}")]
    NotFound(String),
    /// A request was refused.
    #[error("failed to {action}: {source}")]
    Request {
        /// What was tried.
        action: String,
        /// The kernel's answer.
        #[source]
        source: rtnetlink::Error,
    },
    /// The thread working in the pod's namespace panicked.
    #[error("network namespace worker failed")]
    Worker,
}

type Result<T> = std::result::Result<T, NetlinkError>;

fn open_ns(path: &Path) -> Result<File> {
    File::open(path).map_err(|source| NetlinkError::Namespace {
        path: path.display().to_string(),
        source,
    })
}

/// Runs `f` with a netlink connection of the calling thread's network namespace.
fn with_netlink<T, F, Fut>(f: F) -> Result<T>
where
    F: FnOnce(Handle) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(NetlinkError::Connection)?;
    rt.block_on(async move {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(NetlinkError::Connection)?;
        let task = tokio::spawn(conn);
        let result = f(handle).await;
        task.abort();
        result
    })
}

/// Runs `f` with a netlink connection in the network namespace `ns`.
fn in_netns<T, F, Fut>(ns: &File, ns_path: &Path, f: F) -> Result<T>
where
    T: Send,
    F: FnOnce(Handle) -> Fut + Send,
    Fut: Future<Output = Result<T>>,
{
    std::thread::scope(|s| {
        s.spawn(|| {
            move_into_link_name_space(ns.as_fd(), Some(LinkNameSpaceType::Network)).map_err(
                |e| NetlinkError::Namespace {
                    path: ns_path.display().to_string(),
                    source: e.into(),
                },
            )?;
            with_netlink(f)
        })
        .join()
        .unwrap_or(Err(NetlinkError::Worker))
    })
}

async fn link_by_name(h: &Handle, name: &str) -> Result<LinkMessage> {
    let found = h
        .link()
        .get()
        .match_name(name.to_string())
        .execute()
        .try_next()
        .await;
    match found {
        Ok(Some(link)) => Ok(link),
        _ => Err(NetlinkError::NotFound(name.to_string())),
    }
}

async fn set(h: &Handle, msg: LinkMessage, action: impl Into<String>) -> Result<()> {
    h.link()
        .set(msg)
        .execute()
        .await
        .map_err(|source| NetlinkError::Request {
            action: action.into(),
            source,
        })
}

fn is_up(link: &LinkMessage) -> bool {
    link.header.flags.contains(LinkFlags::Up)
}

fn alias(link: &LinkMessage) -> Option<String> {
    link.attributes.iter().find_map(|a| match a {
        LinkAttribute::IfAlias(alias) if !alias.is_empty() => Some(alias.clone()),
        _ => None,
    })
}

fn temp_name(index: u32) -> String {
    format!("temp_{index}")
}

/// Moves the host device `dev.name` into the network namespace at `ns_path`, where it
/// is renamed `dev.new_name`, remembers its host name (as its alias), gets the MTU and
/// address asked for, and is brought up. On failure the device is moved back.
pub fn inject(dev: &NetDevice, ns_path: &Path) -> Result<()> {
    let ns = open_ns(ns_path)?;
    let ns_fd = ns.as_raw_fd();
    let host_name = dev.name.clone();
    // Host side: down, temporary name (no clash in the pod), into the pod.
    let (temp, was_up) = with_netlink(|h| async move {
        let link = link_by_name(&h, &host_name).await?;
        let index = link.header.index;
        let was_up = is_up(&link);
        set(
            &h,
            LinkUnspec::new_with_index(index).down().build(),
            format!("set {host_name:?} down"),
        )
        .await?;
        let temp = temp_name(index);
        let moved = async {
            set(
                &h,
                LinkUnspec::new_with_index(index).name(temp.clone()).build(),
                format!("rename {host_name:?} to {temp:?}"),
            )
            .await?;
            set(
                &h,
                LinkUnspec::new_with_index(index).setns_by_fd(ns_fd).build(),
                format!("move {temp:?} to the pod's network namespace"),
            )
            .await
        }
        .await;
        if let Err(err) = moved {
            let _ = set(
                &h,
                LinkUnspec::new_with_index(index)
                    .name(host_name.clone())
                    .build(),
                "",
            )
            .await;
            if was_up {
                let _ = set(&h, LinkUnspec::new_with_index(index).up().build(), "").await;
            }
            return Err(err);
        }
        Ok((temp, was_up))
    })?;

    // Pod side: alias, name, MTU, up, address.
    let configured = in_netns(&ns, ns_path, |h| {
        let (temp, dev) = (temp.clone(), dev.clone());
        async move {
            let index = link_by_name(&h, &temp).await?.header.index;
            let alias = LinkUnspec::new_with_index(index)
                .append_extra_attribute(LinkAttribute::IfAlias(dev.name.clone()))
                .build();
            set(&h, alias, format!("set alias of {temp:?}")).await?;
            set(
                &h,
                LinkUnspec::new_with_index(index)
                    .name(dev.new_name.clone())
                    .build(),
                format!("rename {temp:?} to {:?}", dev.new_name),
            )
            .await?;
            if dev.mtu > 0 {
                set(
                    &h,
                    LinkUnspec::new_with_index(index).mtu(dev.mtu).build(),
                    format!("set MTU of {:?} to {}", dev.new_name, dev.mtu),
                )
                .await?;
            }
            set(
                &h,
                LinkUnspec::new_with_index(index).up().build(),
                format!("set {:?} up", dev.new_name),
            )
            .await?;
            if let Some((ip, prefix)) = dev.address {
                h.address()
                    .add(index, ip, prefix)
                    .execute()
                    .await
                    .map_err(|source| NetlinkError::Request {
                        action: format!("add address {ip}/{prefix} to {:?}", dev.new_name),
                        source,
                    })?;
            }
            Ok(())
        }
    });
    if let Err(err) = configured {
        tracing::warn!(device = %dev.name, "moving device back to the host after: {err}");
        let restore = move_out(&ns, ns_path, &temp, &dev.name)
            .or_else(|_| move_out(&ns, ns_path, &dev.new_name, &dev.name));
        if let Err(undo) = restore {
            tracing::error!(device = %dev.name, "failed to move device back to the host: {undo}");
        } else if was_up {
            let name = dev.name.clone();
            let _ = with_netlink(|h| async move {
                let index = link_by_name(&h, &name).await?.header.index;
                set(&h, LinkUnspec::new_with_index(index).up().build(), "").await
            });
        }
        return Err(err);
    }
    Ok(())
}

/// Moves the device `dev.new_name` out of the network namespace at `ns_path` back to
/// the host, under its host name (its alias, else `dev.name`). It is left down.
pub fn release(dev: &NetDevice, ns_path: &Path) -> Result<()> {
    let ns = open_ns(ns_path)?;
    move_out(&ns, ns_path, &dev.new_name, &dev.name)
}

fn move_out(ns: &File, ns_path: &Path, pod_name: &str, fallback_host_name: &str) -> Result<()> {
    let host_ns = open_ns(Path::new("/proc/self/ns/net"))?;
    let host_fd = host_ns.as_raw_fd();
    let (temp, host_name) = in_netns(ns, ns_path, |h| {
        let pod_name = pod_name.to_string();
        async move {
            let link = link_by_name(&h, &pod_name).await?;
            let index = link.header.index;
            let host_name = alias(&link);
            set(
                &h,
                LinkUnspec::new_with_index(index).down().build(),
                format!("set {pod_name:?} down"),
            )
            .await?;
            let temp = temp_name(index);
            set(
                &h,
                LinkUnspec::new_with_index(index).name(temp.clone()).build(),
                format!("rename {pod_name:?} to {temp:?}"),
            )
            .await?;
            if let Err(err) = set(
                &h,
                LinkUnspec::new_with_index(index)
                    .setns_by_fd(host_fd)
                    .build(),
                format!("move {temp:?} to the host network namespace"),
            )
            .await
            {
                let _ = set(
                    &h,
                    LinkUnspec::new_with_index(index)
                        .name(pod_name.clone())
                        .build(),
                    "",
                )
                .await;
                return Err(err);
            }
            Ok((temp, host_name))
        }
    })?;
    let host_name = host_name.unwrap_or_else(|| fallback_host_name.to_string());
    with_netlink(|h| async move {
        let index = link_by_name(&h, &temp).await?.header.index;
        set(
            &h,
            LinkUnspec::new_with_index(index)
                .name(host_name.clone())
                .build(),
            format!("restore {temp:?} to its name {host_name:?}"),
        )
        .await
    })
}
