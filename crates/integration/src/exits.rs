//! The queue of container exit notifications.
//!
//! Coalescing per container: at most one notification per container id is
//! pending; a second exit of the same container before the first was
//! delivered replaces the pod and container data of the first (the latest
//! wins) and keeps its place in the queue. The queue therefore never holds
//! more entries than the runtime has containers, and
//! [`Nri::notify_container_exit`](crate::Nri::notify_container_exit) never
//! waits: it takes one short lock and wakes the delivering task.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use nri_api::{Container, PodSandbox};
use tokio::sync::Notify;

/// One pending exit.
pub(crate) type Exit = (PodSandbox, Container);

#[derive(Default)]
struct Pending {
    /// Container ids in arrival order; each id at most once.
    order: VecDeque<String>,
    by_id: HashMap<String, Exit>,
}

/// Pending exits and the signal that wakes their delivering task.
#[derive(Default)]
pub(crate) struct ExitQueue {
    pending: Mutex<Pending>,
    wake: Notify,
}

impl ExitQueue {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues an exit; returns false if it was merged into a pending one.
    pub fn push(&self, pod: PodSandbox, ctr: Container) -> bool {
        let fresh = {
            let mut p = self.pending();
            let id = ctr.id.clone();
            let fresh = p.by_id.insert(id.clone(), (pod, ctr)).is_none();
            if fresh {
                p.order.push_back(id);
            }
            fresh
        };
        self.wake();
        fresh
    }

    /// Puts an exit back at the front (its delivery could not happen now).
    /// A newer exit of the same container queued meanwhile wins.
    pub fn push_front(&self, pod: PodSandbox, ctr: Container) {
        let mut p = self.pending();
        if !p.by_id.contains_key(&ctr.id) {
            p.order.push_front(ctr.id.clone());
            p.by_id.insert(ctr.id.clone(), (pod, ctr));
        }
    }

    /// The oldest pending exit.
    pub fn pop(&self) -> Option<Exit> {
        let mut p = self.pending();
        while let Some(id) = p.order.pop_front() {
            if let Some(exit) = p.by_id.remove(&id) {
                return Some(exit);
            }
        }
        None
    }

    /// Drops the pending exit of `id` (the container is being stopped,
    /// removed or created anew by an explicit call).
    pub fn cancel(&self, id: &str) {
        let mut p = self.pending();
        if p.by_id.remove(id).is_some() {
            p.order.retain(|x| x != id);
        }
    }

    /// Drops every pending exit.
    pub fn clear(&self) {
        let mut p = self.pending();
        p.order.clear();
        p.by_id.clear();
    }

    pub fn len(&self) -> usize {
        self.pending().by_id.len()
    }

    /// Wakes the delivering task (it re-checks the queue and whether it can
    /// deliver). A wake-up while it is busy is remembered.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Waits for the next [`wake`](Self::wake).
    pub async fn woken(&self) {
        self.wake.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(id: &str, exit_code: i32) -> (PodSandbox, Container) {
        (
            PodSandbox::default(),
            Container {
                id: id.into(),
                exit_code,
                ..Default::default()
            },
        )
    }

    #[test]
    fn coalesces_per_container_in_arrival_order() {
        let q = ExitQueue::default();
        let (p, c) = exit("a", 1);
        assert!(q.push(p, c));
        let (p, c) = exit("b", 2);
        assert!(q.push(p, c));
        let (p, c) = exit("a", 3);
        assert!(!q.push(p, c));
        assert_eq!(q.len(), 2);
        let (_, first) = q.pop().unwrap();
        assert_eq!((first.id.as_str(), first.exit_code), ("a", 3));
        assert_eq!(q.pop().unwrap().1.id, "b");
        assert!(q.pop().is_none());
    }

    #[test]
    fn cancel_and_push_front() {
        let q = ExitQueue::default();
        for id in ["a", "b", "c"] {
            let (p, c) = exit(id, 0);
            q.push(p, c);
        }
        q.cancel("b");
        q.cancel("zzz");
        assert_eq!(q.len(), 2);
        let (p, c) = q.pop().unwrap();
        assert_eq!(c.id, "a");
        q.push_front(p, c);
        // A newer exit queued meanwhile is not overwritten.
        let (p, c) = exit("c", 9);
        q.push(p, c);
        let (p, c) = exit("c", 1);
        q.push_front(p, c);
        let ids: Vec<_> = std::iter::from_fn(|| q.pop())
            .map(|(_, c)| (c.id, c.exit_code))
            .collect();
        assert_eq!(ids, [("a".to_string(), 0), ("c".to_string(), 9)]);
    }

    #[tokio::test]
    async fn wake_before_wait_is_not_lost() {
        let q = ExitQueue::default();
        q.wake();
        tokio::time::timeout(std::time::Duration::from_secs(5), q.woken())
            .await
            .unwrap();
    }
}
