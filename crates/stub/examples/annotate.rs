//! NRI plugin: adds an annotation and an environment variable to every new container
//! (only the variable where the runtime applies no annotations, as Docker's own NRI).
use nri_stub::api::{Container, ContainerAdjustment, PodSandbox};
use nri_stub::{Adjustment, Context, CreateContainerResult, Plugin, Stub};

struct Annotate;

#[nri_stub::plugin]
impl Plugin for Annotate {
    async fn create_container(
        &self,
        ctx: &Context,
        _pod: &PodSandbox,
        ctr: &Container,
    ) -> nri_stub::HandlerResult<CreateContainerResult> {
        let mut adjust = ContainerAdjustment::default();
        if ctx
            .runtime()
            .capabilities()
            .applies(Adjustment::Annotations)
        {
            adjust.add_annotation("annotate.example.com/by", ctx.name());
        }
        adjust.add_env("ANNOTATED_CONTAINER", ctr.name.clone());
        Ok(adjust.into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), nri_stub::Error> {
    let stub = Stub::builder(Annotate)
        .name("annotate")
        .index("10")
        .build()?;
    stub.run().await
}
