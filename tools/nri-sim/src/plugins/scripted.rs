//! In-process plugins whose answers are declared in the scenario
//! (`builtin:`): adjustments, updates, evictions, errors and delays.

use std::collections::BTreeMap;

use nri_adaptation::{BoxError, BuiltinPlugin};
use nri_api::{
    ContainerEviction, CreateContainerRequest, CreateContainerResponse, Event, EventMask,
    StopContainerRequest, StopContainerResponse, UpdateContainerRequest, UpdateContainerResponse,
    ValidateContainerAdjustmentRequest, ValidateContainerAdjustmentResponse,
};

use crate::scenario::{BuiltinSpec, HandlerSpec};

/// The event mask of a declared plugin: its `events`, or the events it has
/// handlers for.
pub fn event_mask(spec: &BuiltinSpec) -> Result<EventMask, String> {
    if !spec.events.is_empty() {
        return EventMask::parse(&spec.events).map_err(|e| {
            format!("{e} (known: CreateContainer, UpdateContainer, StopContainer, ValidateContainerAdjustment, RunPodSandbox, ...)")
        });
    }
    let mut mask = EventMask::EMPTY;
    if spec.create.is_some() {
        mask.set(Event::CreateContainer);
    }
    if spec.update.is_some() {
        mask.set(Event::UpdateContainer);
    }
    if spec.stop.is_some() {
        mask.set(Event::StopContainer);
    }
    if spec.validate.is_some() {
        mask.set(Event::ValidateContainerAdjustment);
    }
    if mask.is_empty() {
        return Err(
            "a builtin plugin needs a handler (create, update, stop, validate) or `events`".into(),
        );
    }
    Ok(mask)
}

/// A declared plugin.
pub struct ScriptedPlugin {
    name: String,
    index: String,
    events: EventMask,
    spec: BuiltinSpec,
    /// Container names to ids, to resolve the names the scenario uses.
    ids: BTreeMap<String, String>,
}

impl ScriptedPlugin {
    /// A plugin `index`-`name` behaving as `spec`; `ids` maps container
    /// names to ids.
    pub fn new(
        name: &str,
        index: &str,
        spec: BuiltinSpec,
        ids: BTreeMap<String, String>,
    ) -> Result<ScriptedPlugin, String> {
        Ok(ScriptedPlugin {
            name: name.into(),
            index: index.into(),
            events: event_mask(&spec)?,
            spec,
            ids,
        })
    }

    fn id(&self, name: &str) -> String {
        self.ids
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())
    }

    /// Whether the handlers apply to container `id` named `name`.
    fn applies(&self, id: &str, name: &str) -> bool {
        self.spec.containers.is_empty()
            || self
                .spec
                .containers
                .iter()
                .any(|c| c == name || c == id || self.id(c) == id)
    }

    async fn prelude(&self, h: &HandlerSpec) -> Result<(), BoxError> {
        if let Some(d) = h.delay {
            tokio::time::sleep(d).await;
        }
        match &h.error {
            Some(e) => Err(e.clone().into()),
            None => Ok(()),
        }
    }

    fn updates(&self, h: &HandlerSpec) -> Vec<nri_api::ContainerUpdate> {
        h.update
            .iter()
            .map(|u| crate::adjust::update(&self.id(&u.container), &u.resources, u.ignore_failure))
            .collect()
    }

    fn evictions(&self, h: &HandlerSpec) -> Vec<ContainerEviction> {
        h.evict
            .iter()
            .map(|(c, reason)| ContainerEviction {
                container_id: self.id(c),
                reason: reason.clone(),
            })
            .collect()
    }
}

fn names(req_ctr: Option<&nri_api::Container>) -> (String, String) {
    req_ctr.map_or_else(Default::default, |c| (c.id.clone(), c.name.clone()))
}

#[nri_adaptation::async_trait]
impl BuiltinPlugin for ScriptedPlugin {
    fn name(&self) -> &str {
        &self.name
    }
    fn index(&self) -> &str {
        &self.index
    }
    fn events(&self) -> EventMask {
        self.events
    }

    async fn create_container(
        &self,
        req: &CreateContainerRequest,
    ) -> Result<CreateContainerResponse, BoxError> {
        let (id, name) = names(req.container.as_ref());
        let Some(h) = self
            .spec
            .create
            .as_ref()
            .filter(|_| self.applies(&id, &name))
        else {
            return Ok(Default::default());
        };
        self.prelude(h).await?;
        let adjust = h
            .adjust
            .as_ref()
            .map(crate::adjust::adjustment)
            .transpose()?;
        Ok(CreateContainerResponse {
            adjust,
            update: self.updates(h),
            evict: self.evictions(h),
        })
    }

    async fn update_container(
        &self,
        req: &UpdateContainerRequest,
    ) -> Result<UpdateContainerResponse, BoxError> {
        let (id, name) = names(req.container.as_ref());
        let Some(h) = self
            .spec
            .update
            .as_ref()
            .filter(|_| self.applies(&id, &name))
        else {
            return Ok(Default::default());
        };
        self.prelude(h).await?;
        let mut update = self.updates(h);
        if let Some(r) = &h.resources {
            update.push(crate::adjust::update(&id, r, false));
        }
        Ok(UpdateContainerResponse {
            update,
            evict: self.evictions(h),
        })
    }

    async fn stop_container(
        &self,
        req: &StopContainerRequest,
    ) -> Result<StopContainerResponse, BoxError> {
        let (id, name) = names(req.container.as_ref());
        let Some(h) = self.spec.stop.as_ref().filter(|_| self.applies(&id, &name)) else {
            return Ok(Default::default());
        };
        self.prelude(h).await?;
        Ok(StopContainerResponse {
            update: self.updates(h),
        })
    }

    async fn validate_container_adjustment(
        &self,
        req: &ValidateContainerAdjustmentRequest,
    ) -> Result<ValidateContainerAdjustmentResponse, BoxError> {
        let Some(v) = &self.spec.validate else {
            return Ok(Default::default());
        };
        if let Some(reason) = &v.reject {
            return Err(reason.clone().into());
        }
        for required in &v.required_plugins {
            if !req.plugins.iter().any(|p| &p.name == required) {
                return Err(format!("required plugin {required:?} did not take part").into());
            }
        }
        Ok(Default::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{AdjustSpec, ValidateSpec};

    fn plugin(spec: BuiltinSpec) -> ScriptedPlugin {
        let ids = [("app".to_string(), "ctr-app".to_string())].into();
        ScriptedPlugin::new("p", "10", spec, ids).unwrap()
    }

    fn create_req(id: &str, name: &str) -> CreateContainerRequest {
        CreateContainerRequest {
            container: Some(nri_api::Container {
                id: id.into(),
                name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn mask_from_handlers_or_names() {
        let spec = BuiltinSpec {
            create: Some(HandlerSpec::default()),
            ..Default::default()
        };
        assert_eq!(event_mask(&spec).unwrap(), Event::CreateContainer.into());
        let spec = BuiltinSpec {
            events: vec!["StopContainer".into()],
            ..Default::default()
        };
        assert_eq!(event_mask(&spec).unwrap(), Event::StopContainer.into());
        assert!(event_mask(&BuiltinSpec::default()).is_err());
        let bad = BuiltinSpec {
            events: vec!["Explode".into()],
            ..Default::default()
        };
        assert!(event_mask(&bad).is_err());
    }

    #[tokio::test]
    async fn create_answers_as_declared_for_matching_containers() {
        let p = plugin(BuiltinSpec {
            containers: vec!["app".into()],
            create: Some(HandlerSpec {
                adjust: Some(AdjustSpec {
                    annotations: [("k".to_string(), "v".to_string())].into(),
                    ..Default::default()
                }),
                evict: [("app".to_string(), "too big".to_string())].into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let r = p
            .create_container(&create_req("ctr-app", "app"))
            .await
            .unwrap();
        assert_eq!(r.adjust.unwrap().annotations["k"], "v");
        assert_eq!(r.evict[0].container_id, "ctr-app");
        let r = p
            .create_container(&create_req("other", "other"))
            .await
            .unwrap();
        assert!(r.adjust.is_none());
    }

    #[tokio::test]
    async fn errors_and_rejections() {
        let p = plugin(BuiltinSpec {
            create: Some(HandlerSpec {
                error: Some("nope".into()),
                ..Default::default()
            }),
            validate: Some(ValidateSpec {
                reject: Some("no hooks".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let e = p.create_container(&create_req("a", "a")).await.unwrap_err();
        assert_eq!(e.to_string(), "nope");
        let e = p
            .validate_container_adjustment(&Default::default())
            .await
            .unwrap_err();
        assert_eq!(e.to_string(), "no hooks");
    }
}
