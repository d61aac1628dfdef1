//! NRI plugin on the blocking stub (no async runtime): adds an annotation and
//! an environment variable to every new container, and counts the containers
//! it was told about at synchronization.
use nri_stub::api::{
    Container, ContainerAdjustment, ContainerUpdate, Event, EventMask, PodSandbox,
};
use nri_stub::blocking::{Plugin, Stub};
use nri_stub::{CreateContainerResult, HandlerResult};

#[derive(Default)]
struct Annotate {
    synchronized: usize,
}

impl Plugin for Annotate {
    const EVENTS: EventMask = EventMask::from_events(&[Event::CreateContainer]);

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
        adjust.add_annotation("annotate.example.com/blocking", "yes");
        adjust.add_annotation(
            "annotate.example.com/synchronized",
            self.synchronized.to_string(),
        );
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
