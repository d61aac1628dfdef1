//! Command-line conventions shared with the Go plugins (single-dash long flags,
//! Go boolean and duration syntax, the plugin name default, logging set-up),
//! from [`nri_plugin_util`].

pub use nri_plugin_util::{
    go_args, init_logging, parse_duration, parse_go_bool, plugin_name, ShortFlags,
};
