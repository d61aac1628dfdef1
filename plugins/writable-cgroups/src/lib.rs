//! Mounts `/sys/fs/cgroup` read-write in annotated containers: the plugin type [`plugin::WritableCgroups`], the host check [`mountinfo::host_has_nsdelegate`] and command line [`cli::Args`], for running it in-process (the `nri-writable-cgroups` program is a thin `main` over this).

pub mod cgroups;
pub mod cli;
pub mod mountinfo;
pub mod plugin;
