//! `UnixTrunk` registers its socket with the event loop for reading only, and
//! for writing only while a write waits for buffer space. Checked in the kernel's
//! own view: the epoll registrations listed in `/proc/self/fdinfo`.
//!
//! One test in its own process, so that no other test's sockets show up in
//! the listing.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::Poll;

use nri_mux::UnixTrunk;
use tokio::io::AsyncWriteExt;

const EPOLLIN: u32 = 0x1;
const EPOLLOUT: u32 = 0x4;

/// The socket inode behind descriptor `fd` (`socket:[INODE]`).
fn socket_inode(fd: i32) -> u64 {
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
    let target = target.to_string_lossy();
    let inode = target
        .strip_prefix("socket:[")
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or_else(|| panic!("fd {fd} is {target}"));
    inode.parse().unwrap()
}

/// The event masks of every epoll registration, in every epoll instance of this
/// process, of a descriptor whose file is the socket `inode`. (mio keeps two
/// descriptors of its epoll instance: identical listings count once.)
fn epoll_masks(inode: u64) -> Vec<u32> {
    let mut seen = std::collections::HashSet::new();
    let mut masks = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let is_epoll = std::fs::read_link(entry.path())
            .is_ok_and(|t| t.to_string_lossy().contains("eventpoll"));
        if !is_epoll {
            continue;
        }
        let info_path = format!("/proc/self/fdinfo/{}", entry.file_name().to_string_lossy());
        let Ok(info) = std::fs::read_to_string(info_path) else {
            continue;
        };
        // tfd:        4 events: 80000019 data:                4  pos:0 ino:19e191 sdev:9
        for line in info.lines().filter(|l| l.starts_with("tfd:")) {
            let field = |name: &str| {
                line.split_whitespace()
                    .skip_while(|w| *w != name)
                    .nth(1)
                    .map(str::to_owned)
            };
            let ino = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("ino:"))
                .and_then(|i| u64::from_str_radix(i, 16).ok());
            if ino != Some(inode) || !seen.insert(line.to_owned()) {
                continue;
            }
            let mask = field("events:").and_then(|m| u32::from_str_radix(&m, 16).ok());
            masks.push(mask.unwrap());
        }
    }
    masks
}

/// Polls `fut` once: `Some(output)` if it completed.
async fn poll_once<F: std::future::Future + Unpin>(mut fut: F) -> Option<F::Output> {
    std::future::poll_fn(|cx| match Pin::new(&mut fut).poll(cx) {
        Poll::Ready(out) => Poll::Ready(Some(out)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

#[tokio::test(flavor = "current_thread")]
async fn readable_only_and_writable_only_while_a_write_waits() {
    // A plain tokio socket: registered for writing too (the wake-ups UnixTrunk avoids).
    let (x, _y) = UnixStream::pair().unwrap();
    x.set_nonblocking(true).unwrap();
    let plain = tokio::net::UnixStream::from_std(x).unwrap();
    let masks = epoll_masks(socket_inode(plain.as_raw_fd()));
    assert_eq!(masks.len(), 1, "{masks:x?}");
    assert_ne!(masks[0] & EPOLLOUT, 0, "{masks:x?}");

    let (a, mut b) = UnixStream::pair().unwrap();
    let inode = socket_inode(a.as_raw_fd());
    let mut trunk = UnixTrunk::new(a).unwrap();
    let masks = epoll_masks(inode);
    assert_eq!(masks.len(), 1, "{masks:x?}");
    assert_ne!(masks[0] & EPOLLIN, 0, "{masks:x?}");
    assert_eq!(masks[0] & EPOLLOUT, 0, "registered for writing: {masks:x?}");

    // Nobody reads: a large write fills the socket buffer and waits.
    let data = vec![7u8; 4 << 20];
    let mut write = Box::pin(trunk.write_all(&data));
    assert!(poll_once(write.as_mut()).await.is_none());
    let masks = epoll_masks(inode);
    assert_eq!(masks.len(), 2, "{masks:x?}");
    let writing = masks.iter().filter(|m| *m & EPOLLOUT != 0).count();
    assert_eq!(
        writing, 1,
        "one registration for the waiting write: {masks:x?}"
    );

    // A reader on another thread lets the write finish.
    let reader = std::thread::spawn(move || {
        let mut sink = Vec::new();
        b.read_to_end(&mut sink).unwrap();
        sink
    });
    write.await.unwrap();
    let masks = epoll_masks(inode);
    assert_eq!(masks.len(), 1, "write registration left behind: {masks:x?}");
    assert_eq!(masks[0] & EPOLLOUT, 0, "{masks:x?}");
    trunk.shutdown().await.unwrap();
    let got = reader.join().unwrap();
    assert!(got == data, "{} bytes arrived of {}", got.len(), data.len());
}
