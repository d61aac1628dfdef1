//! NRI plugin on the blocking stub (no async runtime): adds an annotation and
//! an environment variable to every new container, and counts the containers
//! it was told about at synchronization.
use nri_stub::api::{
    Container, ContainerAdjustment, ContainerUpdate, Event, EventMask, PodSandbox,
};
use nri_stub::blocking::{Plugin, Stub};
use nri_stub::{Adjustment, ConfigureInfo, CreateContainerResult, HandlerResult};

#[derive(Default)]
struct Annotate {
    synchronized: usize,
    /// The runtime applies annotations (Docker's own NRI does not).
    annotations: bool,
}

impl Plugin for Annotate {
    const EVENTS: EventMask = EventMask::from_events(&[Event::CreateContainer]);

    fn configure(&mut self, info: &ConfigureInfo) -> HandlerResult<EventMask> {
        self.annotations = info.runtime.capabilities().applies(Adjustment::Annotations);
        Ok(EventMask::default())
    }

    fn synchronize(
        &mut self,
        _pods: &[PodSandbox],
        containers: &[Container],
    ) -> HandlerResult<Vec<ContainerUpdate>> {
        self.synchronized = containers.len();
        Ok(Vec::new())
    }

    fn create_container(
        &mut self,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        if self.annotations {
            adjust.add_annotation("annotate.example.com/blocking", "yes");
            adjust.add_annotation(
                "annotate.example.com/synchronized",
                self.synchronized.to_string(),
            );
        }
        adjust.add_env("ANNOTATED_CONTAINER", ctr.name.clone());
        Ok(adjust.into())
    }
}

fn main() -> Result<(), nri_stub::Error> {
    let mut stub = Stub::builder(Annotate::default())
        .name("annotate-blocking")
        .index("10")
        .build()?;
    stub.run()
}
