//! `nri-plugin-wasm-logger`: a WebAssembly NRI plugin written in Rust on
//! `nri-wasm-guest`. It logs every request it gets through the runtime's
//! log (`WASM: Got create container request`, ...) and changes nothing: the
//! reference's `wasm` sample plugin, ported.
//!
//! Build the module with
//! `cargo build --release --target wasm32-wasip1 -p nri-plugin-wasm-logger`
//! (`nri_plugin_wasm_logger.wasm`) and install it in the runtime's plugin
//! directory as `NN-name`, mode 0755.
//!
//! ```
//! use nri_plugin_wasm_logger::WasmLogger;
//! use nri_wasm_guest::Plugin;
//!
//! let mut p = WasmLogger;
//! // Configure answers no events: the plugin gets all of them.
//! assert_eq!(p.configure(Default::default()).unwrap().events, 0);
//! ```

use nri_wasm_guest::nri_api::*;
use nri_wasm_guest::{export_plugin, log, Level, Plugin};

/// The plugin: no state, no configuration.
#[derive(Debug, Default)]
pub struct WasmLogger;

fn got(what: &str) {
    log(Level::Info, format!("WASM: Got {what} request"));
}

impl Plugin for WasmLogger {
    fn configure(&mut self, _: ConfigureRequest) -> Result<ConfigureResponse, String> {
        got("configure");
        Ok(ConfigureResponse::default())
    }
    fn synchronize(&mut self, _: SynchronizeRequest) -> Result<SynchronizeResponse, String> {
        got("synchronize");
        Ok(SynchronizeResponse::default())
    }
    fn shutdown(&mut self, _: Empty) -> Result<Empty, String> {
        got("shutdown");
        Ok(Empty::default())
    }
    fn state_change(&mut self, req: StateChangeEvent) -> Result<Empty, String> {
        let event = Event::try_from(req.event)
            .map(|e| e.as_str_name().to_string())
            .unwrap_or_else(|_| req.event.to_string());
        log(
            Level::Info,
            format!("WASM: Got state change request with event: {event}"),
        );
        Ok(Empty::default())
    }
    fn run_pod_sandbox(
        &mut self,
        _: RunPodSandboxRequest,
    ) -> Result<RunPodSandboxResponse, String> {
        got("run pod sandbox");
        Ok(RunPodSandboxResponse::default())
    }
    fn update_pod_sandbox(
        &mut self,
        _: UpdatePodSandboxRequest,
    ) -> Result<UpdatePodSandboxResponse, String> {
        got("update pod sandbox");
        Ok(UpdatePodSandboxResponse::default())
    }
    fn post_update_pod_sandbox(
        &mut self,
        _: PostUpdatePodSandboxRequest,
    ) -> Result<PostUpdatePodSandboxResponse, String> {
        got("post update pod sandbox");
        Ok(PostUpdatePodSandboxResponse::default())
    }
    fn stop_pod_sandbox(
        &mut self,
        _: StopPodSandboxRequest,
    ) -> Result<StopPodSandboxResponse, String> {
        got("stop pod sandbox");
        Ok(StopPodSandboxResponse::default())
    }
    fn remove_pod_sandbox(
        &mut self,
        _: RemovePodSandboxRequest,
    ) -> Result<RemovePodSandboxResponse, String> {
        got("remove pod sandbox");
        Ok(RemovePodSandboxResponse::default())
    }
    fn create_container(
        &mut self,
        _: CreateContainerRequest,
    ) -> Result<CreateContainerResponse, String> {
        got("create container");
        Ok(CreateContainerResponse::default())
    }
    fn post_create_container(
        &mut self,
        _: PostCreateContainerRequest,
    ) -> Result<PostCreateContainerResponse, String> {
        got("post create container");
        Ok(PostCreateContainerResponse::default())
    }
    fn start_container(
        &mut self,
        _: StartContainerRequest,
    ) -> Result<StartContainerResponse, String> {
        got("start container");
        Ok(StartContainerResponse::default())
    }
    fn post_start_container(
        &mut self,
        _: PostStartContainerRequest,
    ) -> Result<PostStartContainerResponse, String> {
        got("post start container");
        Ok(PostStartContainerResponse::default())
    }
    fn update_container(
        &mut self,
        _: UpdateContainerRequest,
    ) -> Result<UpdateContainerResponse, String> {
        got("update container");
        Ok(UpdateContainerResponse::default())
    }
    fn post_update_container(
        &mut self,
        _: PostUpdateContainerRequest,
    ) -> Result<PostUpdateContainerResponse, String> {
        got("post update container");
        Ok(PostUpdateContainerResponse::default())
    }
    fn stop_container(&mut self, _: StopContainerRequest) -> Result<StopContainerResponse, String> {
        got("stop container");
        Ok(StopContainerResponse::default())
    }
    fn remove_container(
        &mut self,
        _: RemoveContainerRequest,
    ) -> Result<RemoveContainerResponse, String> {
        got("remove container");
        Ok(RemoveContainerResponse::default())
    }
    fn validate_container_adjustment(
        &mut self,
        _: ValidateContainerAdjustmentRequest,
    ) -> Result<ValidateContainerAdjustmentResponse, String> {
        got("validate container adjustment");
        Ok(ValidateContainerAdjustmentResponse::default())
    }
}

export_plugin!(WasmLogger);
