//! The deprecated StateChange transport for plugins older than NRI v0.12,
//! which lack the dedicated notification RPCs.

use std::sync::atomic::Ordering;

use nri_api::{EventMask, StateChangeResponse};

use super::remote::Remote;
use super::{Plugin, Rpc};
use crate::adaptation_error::PluginError;

impl Plugin {
    /// Delivers `req` through StateChange and reports the deprecation once
    /// per plugin and event.
    pub(super) async fn state_change<R: Rpc>(
        &self,
        remote: &Remote,
        req: &R,
    ) -> Result<R::Response, PluginError> {
        let event = req.state_change();
        let timeout = self.request_timeout();
        self.measured(R::METHOD, || async {
            remote
                .call::<_, StateChangeResponse>(
                    nri_api::service::plugin::STATE_CHANGE,
                    &event,
                    timeout,
                )
                .await
                .map_err(PluginError::from)
        })
        .await?;
        let bit = EventMask::bit(R::EVENT);
        if self.warned.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            tracing::warn!(
                plugin = %self.name,
                "plugin {} uses deprecated StateChange instead of a dedicated {} RPC call; \
                 please update it to a newer version of NRI",
                self.name,
                R::METHOD
            );
        }
        Ok(R::Response::default())
    }
}
