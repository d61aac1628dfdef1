//! Rolling upgrades: a new external connection taking over the plugin with
//! the same name and index (`AdaptationBuilder::replace_same_identity`).

use std::sync::Arc;

use crate::adaptation::Inner;
use crate::plugin::{Plugin, PluginKind};

impl Inner {
    /// Adds a synchronized external plugin. With `replace_same_identity`,
    /// a connected external plugin of the same index and name is swapped
    /// out while no lifecycle call runs (so every event reaches exactly one
    /// of them), then gets Shutdown and is closed.
    ///
    /// The caller holds the plugin-sync lock; the lifecycle lock is taken
    /// after it, the order every runtime call follows.
    pub(crate) async fn add_or_replace(&self, plugin: Arc<Plugin>) {
        if !self.settings.policies.replace_same_identity {
            self.add_plugin(plugin);
            return;
        }
        let old = {
            let _lifecycle = self.lifecycle.lock().await;
            self.swap_in(plugin.clone())
        };
        self.retire(&plugin, old);
    }

    /// Adds `plugin`, taking out the plugin it replaces (returned), if any.
    /// The caller holds the lifecycle lock (or replacement is off).
    pub(crate) fn swap_in(&self, plugin: Arc<Plugin>) -> Option<Arc<Plugin>> {
        if !self.settings.policies.replace_same_identity {
            self.add_plugin(plugin);
            return None;
        }
        let old = self.take_plugin(|p| {
            p.kind == PluginKind::External
                && p.idx == plugin.idx
                && p.base == plugin.base
                && !p.is_closed()
        });
        self.add_plugin(plugin);
        old
    }

    /// Shuts down and closes the plugin `plugin` replaced, in the background.
    pub(crate) fn retire(&self, plugin: &Plugin, old: Option<Arc<Plugin>>) {
        if let Some(old) = old {
            tracing::info!(plugin = %plugin.name, "new connection replaces the plugin");
            tokio::spawn(async move {
                old.shutdown().await;
                old.stop().await;
            });
        }
    }
}
