//! Helpers shared by the integration tests: a raw peer that speaks frames by hand.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Generous bound for "this must not hang"; never reached by a correct implementation.
pub const NO_HANG: Duration = Duration::from_secs(10);

pub async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(NO_HANG, f)
        .await
        .expect("operation hung")
}

pub fn header(id: u32, len: u32) -> [u8; 8] {
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&id.to_be_bytes());
    h[4..].copy_from_slice(&len.to_be_bytes());
    h
}

pub fn frame(id: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = header(id, payload.len() as u32).to_vec();
    f.extend_from_slice(payload);
    f
}

pub async fn send_frame(raw: &mut UnixStream, id: u32, payload: &[u8]) {
    raw.write_all(&frame(id, payload)).await.unwrap();
}

/// Reads one frame from the raw end of a trunk.
pub async fn read_frame(raw: &mut UnixStream) -> (u32, Vec<u8>) {
    let mut h = [0u8; 8];
    within(raw.read_exact(&mut h)).await.unwrap();
    let id = u32::from_be_bytes(h[..4].try_into().unwrap());
    let len = u32::from_be_bytes(h[4..].try_into().unwrap()) as usize;
    let mut payload = vec![0u8; len];
    within(raw.read_exact(&mut payload)).await.unwrap();
    (id, payload)
}

/// Deterministic test data.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}
