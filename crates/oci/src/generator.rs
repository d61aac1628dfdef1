//! The [`Generator`]: applies adjustments and updates to a spec.

use std::collections::BTreeMap;
use std::fmt;

use nri_api::{ContainerAdjustment, ContainerUpdate, LinuxResources};
use serde_json::Value;

use crate::error::{AdjustError, BoxError};
use crate::json::{obj_mut, root, Obj};
use crate::{linux, maps, mounts, process, resources};

/// Filters (or rejects) the annotations of an adjustment before they are
/// applied. It sees the keys as the adjustment has them, removal markers
/// included.
pub type AnnotationFilter<'a> =
    Box<dyn Fn(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, BoxError> + 'a>;
/// Resolves a block I/O or RDT class name into the OCI JSON value to store
/// (`linux.resources.blockIO` or `linux.intelRdt`); `null` clears it.
pub type ClassResolver<'a> = Box<dyn Fn(&str) -> Result<Value, BoxError> + 'a>;
/// Checks the adjusted `linux.resources` (`null` when absent).
pub type ResourceChecker<'a> = Box<dyn Fn(&Value) -> Result<(), BoxError> + 'a>;
/// Injects CDI devices, given by fully qualified name, into the spec.
pub type CdiInjector<'a> = Box<dyn FnMut(&mut Value, &[String]) -> Result<(), BoxError> + 'a>;
/// Returns the host mount propagation of a path: `"rshared"`, `"rslave"`
/// or `""`.
pub type PropagationLookup<'a> = Box<dyn Fn(&str) -> Result<String, BoxError> + 'a>;

/// Applies NRI container adjustments and updates to an OCI runtime spec
/// held as JSON.
///
/// The spec is edited in place as a [`serde_json::Value`]: members the
/// generator does not touch — unknown or vendor fields, other platforms'
/// sections, values newer than this crate — are kept exactly as they are.
///
/// Every field follows the rules of the reference Go generator
/// (`github.com/containerd/nri/pkg/runtime-tools/generate`), in its order
/// of application; see the crate documentation for the list and for the
/// few deliberate differences. An error stops the adjustment where it
/// happened: the spec may then be partially adjusted, so work on a copy
/// if it must stay intact.
///
/// # Example
///
/// ```
/// use nri_api::ContainerAdjustment;
/// use nri_oci::Generator;
/// use serde_json::json;
///
/// let mut spec = json!({
///     "ociVersion": "1.2.0",
///     "process": {"args": ["sh"], "env": ["PATH=/bin"], "cwd": "/"},
///     "linux": {"x-vendor-extension": {"keep": true}}
/// });
///
/// let mut adjust = ContainerAdjustment::default();
/// adjust
///     .add_env("GREETING", "hello")
///     .add_annotation("example.com/owner", "team-a")
///     .set_linux_memory_limit(1 << 30);
///
/// Generator::new(&mut spec).adjust(&adjust)?;
///
/// assert_eq!(spec["process"]["env"], json!(["PATH=/bin", "GREETING=hello"]));
/// assert_eq!(spec["annotations"]["example.com/owner"], "team-a");
/// assert_eq!(spec["linux"]["resources"]["memory"], json!({"limit": 1 << 30, "swap": 1 << 30}));
/// assert_eq!(spec["linux"]["x-vendor-extension"], json!({"keep": true}));
/// # Ok::<(), nri_oci::AdjustError>(())
/// ```
pub struct Generator<'a> {
    spec: &'a mut Value,
    annotation_filter: Option<AnnotationFilter<'a>>,
    blockio_resolver: Option<ClassResolver<'a>>,
    rdt_resolver: Option<ClassResolver<'a>>,
    resource_checker: Option<ResourceChecker<'a>>,
    cdi_injector: Option<CdiInjector<'a>>,
    propagation: Option<PropagationLookup<'a>>,
}

impl fmt::Debug for Generator<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("spec", &self.spec)
            .field("annotation_filter", &self.annotation_filter.is_some())
            .field("blockio_resolver", &self.blockio_resolver.is_some())
            .field("rdt_resolver", &self.rdt_resolver.is_some())
            .field("resource_checker", &self.resource_checker.is_some())
            .field("cdi_injector", &self.cdi_injector.is_some())
            .field("propagation", &self.propagation.is_some())
            .finish()
    }
}

fn default_propagation<'a>() -> Option<PropagationLookup<'a>> {
    if cfg!(target_os = "linux") {
        Some(Box::new(|path: &str| {
            crate::propagation::host_mount_propagation(path).map_err(BoxError::from)
        }))
    } else {
        None
    }
}

impl<'a> Generator<'a> {
    /// A generator editing `spec`, with no filters, resolvers, checker or
    /// injector. On Linux, mount propagation is checked against
    /// `/proc/self/mountinfo`; elsewhere it is not checked.
    pub fn new(spec: &'a mut Value) -> Self {
        Generator {
            spec,
            annotation_filter: None,
            blockio_resolver: None,
            rdt_resolver: None,
            resource_checker: None,
            cdi_injector: None,
            propagation: default_propagation(),
        }
    }

    /// Filters the adjustment's annotations before they are applied; an
    /// error fails the adjustment with
    /// `failed to adjust annotations in OCI Spec: <error>`.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use nri_api::ContainerAdjustment;
    /// use nri_oci::Generator;
    /// use serde_json::json;
    ///
    /// let mut spec = json!({});
    /// let mut adjust = ContainerAdjustment::default();
    /// adjust.add_annotation("keep", "1").add_annotation("internal.drop", "2");
    /// Generator::new(&mut spec)
    ///     .with_annotation_filter(|a: &BTreeMap<String, String>| {
    ///         Ok(a.iter()
    ///             .filter(|(k, _)| !k.starts_with("internal."))
    ///             .map(|(k, v)| (k.clone(), v.clone()))
    ///             .collect())
    ///     })
    ///     .adjust(&adjust)?;
    /// assert_eq!(spec, json!({"annotations": {"keep": "1"}}));
    /// # Ok::<(), nri_oci::AdjustError>(())
    /// ```
    pub fn with_annotation_filter<F>(mut self, filter: F) -> Self
    where
        F: Fn(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, BoxError> + 'a,
    {
        self.annotation_filter = Some(Box::new(filter));
        self
    }

    /// Resolves block I/O class names into `linux.resources.blockIO`
    /// values. Without a resolver, block I/O classes are ignored.
    pub fn with_blockio_resolver<F>(mut self, resolver: F) -> Self
    where
        F: Fn(&str) -> Result<Value, BoxError> + 'a,
    {
        self.blockio_resolver = Some(Box::new(resolver));
        self
    }

    /// Resolves RDT class names into `linux.intelRdt` values. Without a
    /// resolver, RDT classes are ignored.
    ///
    /// ```
    /// use nri_api::{opt, ContainerAdjustment};
    /// use nri_oci::Generator;
    /// use serde_json::json;
    ///
    /// let mut spec = json!({"linux": {}});
    /// let mut adjust = ContainerAdjustment::default();
    /// adjust.linux_resources_mut().rdt_class = opt("gold");
    /// Generator::new(&mut spec)
    ///     .with_rdt_resolver(|class| match class {
    ///         "gold" => Ok(json!({"closID": "gold"})),
    ///         other => Err(format!("unknown RDT class {other:?}").into()),
    ///     })
    ///     .adjust(&adjust)?;
    /// assert_eq!(spec["linux"]["intelRdt"], json!({"closID": "gold"}));
    /// # Ok::<(), nri_oci::AdjustError>(())
    /// ```
    pub fn with_rdt_resolver<F>(mut self, resolver: F) -> Self
    where
        F: Fn(&str) -> Result<Value, BoxError> + 'a,
    {
        self.rdt_resolver = Some(Box::new(resolver));
        self
    }

    /// Checks `linux.resources` after resource adjustments (and after each
    /// update); an error fails with
    /// `failed to adjust resources in OCI Spec: <error>`.
    pub fn with_resource_checker<F>(mut self, checker: F) -> Self
    where
        F: Fn(&Value) -> Result<(), BoxError> + 'a,
    {
        self.resource_checker = Some(Box::new(checker));
        self
    }

    /// Injects CDI devices into the spec. It gets the whole spec and the
    /// device names in adjustment order; its error is returned as is.
    /// Without an injector, CDI devices are ignored (with a warning).
    pub fn with_cdi_injector<F>(mut self, injector: F) -> Self
    where
        F: FnMut(&mut Value, &[String]) -> Result<(), BoxError> + 'a,
    {
        self.cdi_injector = Some(Box::new(injector));
        self
    }

    /// Replaces the host mount propagation lookup used to check mounts
    /// with the `rshared` and `rslave` options.
    pub fn with_mount_propagation_lookup<F>(mut self, lookup: F) -> Self
    where
        F: Fn(&str) -> Result<String, BoxError> + 'a,
    {
        self.propagation = Some(Box::new(lookup));
        self
    }

    /// Turns the host mount propagation check off: `rshared` and `rslave`
    /// mounts then only raise the rootfs propagation.
    pub fn without_mount_propagation_check(mut self) -> Self {
        self.propagation = None;
        self
    }

    /// The spec being edited.
    pub fn spec(&self) -> &Value {
        self.spec
    }

    /// Applies a (merged) container adjustment.
    ///
    /// Fields are applied in the reference order: annotations, env, args,
    /// hooks, CDI devices, devices, cgroups path, OOM score adjustment,
    /// I/O priority, scheduler, seccomp policy, namespaces, sysctl,
    /// network devices, memory policy, resources, block I/O class, RDT
    /// class, RDT, mounts, rlimits. The first error stops the adjustment.
    pub fn adjust(&mut self, adjust: &ContainerAdjustment) -> Result<(), AdjustError> {
        self.adjust_annotations(&adjust.annotations)?;
        let r = root(self.spec)?;
        process::adjust_env(r, &adjust.env)?;
        process::adjust_args(r, &adjust.args)?;
        if let Some(hooks) = &adjust.hooks {
            maps::adjust_hooks(r, hooks)?;
        }
        self.inject_cdi_devices(adjust)?;

        let empty = Default::default();
        let l = adjust.linux.as_ref().unwrap_or(&empty);
        let r = root(self.spec)?;
        linux::adjust_devices(r, &l.devices)?;
        linux::adjust_cgroups_path(r, &l.cgroups_path)?;
        if let Some(oom) = &l.oom_score_adj {
            process::set_oom_score_adj(r, oom.value)?;
        }
        if let Some(p) = &l.io_priority {
            process::set_io_priority(r, p)?;
        }
        if let Some(s) = &l.scheduler {
            process::set_scheduler(r, s)?;
        }
        if let Some(s) = &l.seccomp_policy {
            linux::set_seccomp(r, s)?;
        }
        linux::adjust_namespaces(r, &l.namespaces)?;
        maps::adjust_sysctl(r, &l.sysctl)?;
        maps::adjust_net_devices(r, &l.net_devices)?;
        if let Some(m) = &l.memory_policy {
            linux::set_memory_policy(r, m)?;
        }
        if let Some(res) = &l.resources {
            self.apply_resources(res)?;
        }
        let r = root(self.spec)?;
        if let Some(rdt) = &l.rdt {
            linux::adjust_rdt(r, rdt)?;
        }
        mounts::adjust_mounts(r, &adjust.mounts, self.propagation.as_ref())?;
        process::adjust_rlimits(r, &adjust.rlimits)?;
        Ok(())
    }

    /// Applies a container update: its Linux resources, block I/O class
    /// and RDT class, by the same rules as the resources of an
    /// adjustment. The container id is not looked at; the caller picks
    /// the spec.
    ///
    /// ```
    /// use nri_api::ContainerUpdate;
    /// use nri_oci::Generator;
    /// use serde_json::json;
    ///
    /// let mut spec = json!({"linux": {"resources": {"cpu": {"shares": 2}}}});
    /// let mut update = ContainerUpdate::for_container("ctr-1");
    /// update.set_linux_cpu_shares(512).set_linux_pid_limits(-1);
    /// Generator::new(&mut spec).apply_update(&update)?;
    /// assert_eq!(spec["linux"]["resources"], json!({"cpu": {"shares": 512}, "pids": {}}));
    /// # Ok::<(), nri_oci::AdjustError>(())
    /// ```
    pub fn apply_update(&mut self, update: &ContainerUpdate) -> Result<(), AdjustError> {
        match update.linux.as_ref().and_then(|l| l.resources.as_ref()) {
            Some(res) => self.apply_resources(res),
            None => Ok(()),
        }
    }

    /// Applies Linux resources (of an adjustment or an update): the
    /// resources themselves, then the resource checker, then the block
    /// I/O class and the RDT class.
    pub fn apply_resources(&mut self, res: &LinuxResources) -> Result<(), AdjustError> {
        let r = root(self.spec)?;
        resources::adjust_resources(r, res)?;
        if let Some(check) = &self.resource_checker {
            let current = r
                .get("linux")
                .and_then(|l| l.get("resources"))
                .unwrap_or(&Value::Null);
            check(current).map_err(AdjustError::Resources)?;
        }
        if let Some(class) = &res.blockio_class {
            self.adjust_blockio_class(&class.value)?;
        }
        if let Some(class) = &res.rdt_class {
            self.adjust_rdt_class(&class.value)?;
        }
        Ok(())
    }

    fn adjust_annotations(
        &mut self,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(), AdjustError> {
        let filtered;
        let annotations = match &self.annotation_filter {
            Some(filter) => {
                filtered = filter(annotations).map_err(AdjustError::Annotations)?;
                &filtered
            }
            None => annotations,
        };
        maps::adjust_string_map(root(self.spec)?, "", "annotations", annotations)
    }

    fn inject_cdi_devices(&mut self, adjust: &ContainerAdjustment) -> Result<(), AdjustError> {
        if adjust.cdi_devices.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = adjust.cdi_devices.iter().map(|d| d.name.clone()).collect();
        match &mut self.cdi_injector {
            Some(inject) => inject(self.spec, &names).map_err(AdjustError::CdiDevices),
            None => {
                tracing::warn!(devices = ?names, "no CDI device injector, CDI devices ignored");
                Ok(())
            }
        }
    }

    fn adjust_blockio_class(&mut self, class: &str) -> Result<(), AdjustError> {
        let Some(resolve) = &self.blockio_resolver else {
            tracing::warn!(
                class,
                "no block I/O class resolver, block I/O class ignored"
            );
            return Ok(());
        };
        let value = if class.is_empty() {
            Value::Null
        } else {
            resolve(class).map_err(AdjustError::BlockIoClass)?
        };
        let linux = obj_mut(root(self.spec)?, "", "linux")?;
        let res = obj_mut(linux, "linux", "resources")?;
        set_or_clear(res, "blockIO", value);
        Ok(())
    }

    fn adjust_rdt_class(&mut self, class: &str) -> Result<(), AdjustError> {
        let Some(resolve) = &self.rdt_resolver else {
            tracing::warn!(class, "no RDT class resolver, RDT class ignored");
            return Ok(());
        };
        let value = if class.is_empty() {
            Value::Null
        } else {
            resolve(class).map_err(AdjustError::RdtClass)?
        };
        let linux = obj_mut(root(self.spec)?, "", "linux")?;
        set_or_clear(linux, "intelRdt", value);
        Ok(())
    }
}

fn set_or_clear(parent: &mut Obj, key: &str, value: Value) {
    if value.is_null() {
        parent.remove(key);
    } else {
        parent.insert(key.to_string(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nri_api::{opt, CdiDevice, LinuxDevice};
    use serde_json::json;
    use std::cell::RefCell;

    #[test]
    fn cdi_injector_runs_after_env_and_before_devices() {
        let mut spec = json!({"process": {"env": []}});
        let mut adjust = ContainerAdjustment::default();
        adjust
            .add_env("A", "1")
            .add_cdi_device(CdiDevice {
                name: "v.com/gpu=0".into(),
            })
            .add_cdi_device(CdiDevice {
                name: "v.com/gpu=1".into(),
            })
            .add_device(LinuxDevice {
                path: "/dev/x".into(),
                r#type: "c".into(),
                ..Default::default()
            });
        let seen = RefCell::new(Vec::new());
        Generator::new(&mut spec)
            .with_cdi_injector(|s, names| {
                seen.borrow_mut().push((s.clone(), names.to_vec()));
                Ok(())
            })
            .adjust(&adjust)
            .unwrap();
        let seen = seen.into_inner();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].0, json!({"process": {"env": ["A=1"]}}));
        assert_eq!(seen[0].1, ["v.com/gpu=0", "v.com/gpu=1"]);
        assert!(spec["linux"]["devices"].is_array());
    }

    #[test]
    fn errors_carry_the_reference_texts() {
        let mut spec = json!({});
        let mut adjust = ContainerAdjustment::default();
        adjust.add_annotation("a", "b");
        let err = Generator::new(&mut spec)
            .with_annotation_filter(|_| Err("nope".into()))
            .adjust(&adjust)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to adjust annotations in OCI Spec: nope"
        );

        let mut adjust = ContainerAdjustment::default();
        adjust.add_cdi_device(CdiDevice { name: "x".into() });
        let err = Generator::new(&mut spec)
            .with_cdi_injector(|_, _| Err("cdi broke".into()))
            .adjust(&adjust)
            .unwrap_err();
        assert_eq!(err.to_string(), "cdi broke");

        let mut adjust = ContainerAdjustment::default();
        adjust.linux_resources_mut().blockio_class = opt("x");
        adjust.linux_resources_mut().rdt_class = opt("y");
        let err = Generator::new(&mut spec)
            .with_blockio_resolver(|c| Err(format!("no {c}").into()))
            .adjust(&adjust)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to adjust BlockIO class in OCI Spec: no x"
        );
        let err = Generator::new(&mut spec)
            .with_rdt_resolver(|c| Err(format!("no {c}").into()))
            .adjust(&adjust)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to adjust RDT class in OCI Spec: no y"
        );

        let err = Generator::new(&mut spec)
            .with_resource_checker(|_| Err("too big".into()))
            .adjust(&adjust)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to adjust resources in OCI Spec: too big"
        );
        assert!(std::error::Error::source(&err).is_some());
    }

    #[test]
    fn classes_resolve_clear_and_null() {
        let mut spec = json!({"linux": {"resources": {"blockIO": {"weight": 1}}, "intelRdt": {"closID": "x"}}});
        let resolver = |class: &str| -> Result<Value, BoxError> {
            Ok(match class {
                "null" => Value::Null,
                c => json!({"name": c}),
            })
        };
        let mut update = ContainerUpdate::for_container("c");
        update
            .set_linux_blockio_class("gold")
            .set_linux_rdt_class("null");
        Generator::new(&mut spec)
            .with_blockio_resolver(resolver)
            .with_rdt_resolver(resolver)
            .apply_update(&update)
            .unwrap();
        assert_eq!(
            spec,
            json!({"linux": {"resources": {"blockIO": {"name": "gold"}}}})
        );
        let mut update = ContainerUpdate::for_container("c");
        update.set_linux_blockio_class("");
        Generator::new(&mut spec)
            .with_blockio_resolver(resolver)
            .apply_update(&update)
            .unwrap();
        assert_eq!(spec, json!({"linux": {"resources": {}}}));
        // Without resolvers classes are ignored.
        update.set_linux_blockio_class("gold");
        Generator::new(&mut spec).apply_update(&update).unwrap();
        assert_eq!(spec, json!({"linux": {"resources": {}}}));
    }

    #[test]
    fn resource_checker_sees_the_adjusted_resources() {
        let mut spec = json!({});
        let seen = RefCell::new(Vec::new());
        let mut update = ContainerUpdate::for_container("c");
        update.set_linux_memory_limit(100);
        let mut g = Generator::new(&mut spec).with_resource_checker(|r| {
            seen.borrow_mut().push(r.clone());
            Ok(())
        });
        g.apply_update(&update).unwrap();
        g.apply_resources(&LinuxResources::default()).unwrap();
        g.apply_update(&ContainerUpdate::default()).unwrap();
        drop(g);
        assert_eq!(
            seen.into_inner(),
            [
                json!({"memory": {"limit": 100, "swap": 100}}),
                json!({"memory": {"limit": 100, "swap": 100}})
            ]
        );
        let mut bare = json!({});
        let seen = RefCell::new(None);
        Generator::new(&mut bare)
            .with_resource_checker(|r| {
                *seen.borrow_mut() = Some(r.clone());
                Ok(())
            })
            .apply_resources(&LinuxResources::default())
            .unwrap();
        assert_eq!(seen.into_inner(), Some(Value::Null));
    }

    #[test]
    fn propagation_lookup_can_be_replaced_or_disabled() {
        let mut adjust = ContainerAdjustment::default();
        adjust.add_mount(nri_api::Mount {
            destination: "/m".into(),
            source: "/src".into(),
            options: vec!["rshared".into()],
            ..Default::default()
        });
        let mut spec = json!({});
        Generator::new(&mut spec)
            .with_mount_propagation_lookup(|p| {
                assert_eq!(p, "/src");
                Ok("rshared".into())
            })
            .adjust(&adjust)
            .unwrap();
        assert_eq!(spec["linux"]["rootfsPropagation"], "rshared");
        let mut spec = json!({});
        Generator::new(&mut spec)
            .without_mount_propagation_check()
            .adjust(&adjust)
            .unwrap();
        assert_eq!(spec["mounts"][0]["destination"], "/m");
        let g = Generator::new(&mut spec);
        assert!(format!("{g:?}").contains("annotation_filter: false"));
        assert_eq!(g.spec()["mounts"][0]["source"], "/src");
    }
}
