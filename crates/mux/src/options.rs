//! Options of a multiplexer.

use crate::frame::{DEFAULT_READ_QUEUE_LEN, GO_READ_BUFFER, MAX_FRAME_PAYLOAD};

/// Options for [`Mux::new`](crate::Mux::new).
///
/// ```
/// use nri_mux::MuxOptions;
///
/// // The runtime side: do not read the trunk before the services are ready.
/// let opts = MuxOptions { blocked_read: true, ..MuxOptions::default() };
/// assert_eq!(opts.read_queue_len, 256);
/// assert_eq!(opts.max_write_frame, 4096);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MuxOptions {
    /// Do not read the trunk until [`Mux::unblock`](crate::Mux::unblock) is called.
    /// Default `false`.
    pub blocked_read: bool,
    /// Number of received frames that may wait unread on one connection; one more closes
    /// the whole mux with [`MuxError::QueueOverflow`](crate::MuxError::QueueOverflow).
    /// Default 256; values below 1 are treated as 1.
    pub read_queue_len: usize,
    /// Largest payload of the first frame of each write; the rest of the write follows in
    /// one frame (split only above `MAX_FRAME_PAYLOAD`). Default 4096, which Go peers
    /// require; values are clamped to `1..=MAX_FRAME_PAYLOAD`.
    pub max_write_frame: usize,
}

impl Default for MuxOptions {
    fn default() -> Self {
        MuxOptions {
            blocked_read: false,
            read_queue_len: DEFAULT_READ_QUEUE_LEN,
            max_write_frame: GO_READ_BUFFER,
        }
    }
}

impl MuxOptions {
    /// The options with every value brought into its valid range.
    pub(crate) fn normalized(&self) -> MuxOptions {
        MuxOptions {
            blocked_read: self.blocked_read,
            read_queue_len: self.read_queue_len.max(1),
            max_write_frame: self.max_write_frame.clamp(1, MAX_FRAME_PAYLOAD),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_reference() {
        let o = MuxOptions::default();
        assert!(!o.blocked_read);
        assert_eq!(o.read_queue_len, 256);
        assert_eq!(o.max_write_frame, 4096);
    }

    #[test]
    fn normalized_clamps_out_of_range_values() {
        let o = MuxOptions {
            blocked_read: true,
            read_queue_len: 0,
            max_write_frame: usize::MAX,
        }
        .normalized();
        assert!(o.blocked_read);
        assert_eq!(o.read_queue_len, 1);
        assert_eq!(o.max_write_frame, MAX_FRAME_PAYLOAD);
        assert_eq!(
            MuxOptions {
                max_write_frame: 0,
                ..MuxOptions::default()
            }
            .normalized()
            .max_write_frame,
            1
        );
    }
}
