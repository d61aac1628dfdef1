//! Write NRI WebAssembly plugins in Rust.
//!
//! A WebAssembly plugin is a WASI preview 1 module that the runtime loads
//! from its plugin directory and calls in-process (see the repository's
//! `docs/wasm.md` for the ABI, which is the reference's). This crate gives
//! the module side: implement [`Plugin`] (every handler has a default that
//! answers an empty reply), then [`export_plugin!`] emits the exports the
//! runtime looks for (`plugin_api_version`, the 18 `plugin_<event>`
//! handlers), with the requests decoded and the replies encoded with the
//! `nri-api` types. [`log`] sends a message to the runtime's log.
//!
//! Build the plugin as a `cdylib` for `wasm32-wasip1`. The module's `malloc`
//! and `free` exports are those of the WASI C library the Rust standard
//! library allocates with; its linker must be told to export them, from
//! the plugin's build script:
//!
//! ```no_run
//! // In build.rs's main:
//! nri_wasm_guest::build::export_allocator();
//! ```
//!
//! ```
//! use nri_wasm_guest::nri_api::{
//!     ContainerAdjustment, CreateContainerRequest, CreateContainerResponse,
//! };
//! use nri_wasm_guest::{export_plugin, log, Level, Plugin};
//!
//! #[derive(Default)]
//! struct Annotate;
//!
//! impl Plugin for Annotate {
//!     fn create_container(
//!         &mut self,
//!         req: CreateContainerRequest,
//!     ) -> Result<CreateContainerResponse, String> {
//!         let name = req.container.map(|c| c.name).unwrap_or_default();
//!         log(Level::Info, format!("annotating {name}"));
//!         let mut adjust = ContainerAdjustment::default();
//!         adjust.add_annotation("example.com/seen-by", "annotate");
//!         Ok(CreateContainerResponse {
//!             adjust: Some(adjust),
//!             ..Default::default()
//!         })
//!     }
//! }
//!
//! export_plugin!(Annotate);
//! # fn main() {
//! #     let mut p = Annotate;
//! #     let reply = p.create_container(Default::default()).unwrap();
//! #     assert_eq!(reply.adjust.unwrap().annotations["example.com/seen-by"], "annotate");
//! # }
//! ```
//!
//! The exports exist only when the crate is built for a WebAssembly
//! target; built for the host, a plugin is an ordinary library whose
//! handlers tests can call.

use nri_api::*;
use prost::Message;

pub use nri_api;
pub use nri_api::log_request::Level;
pub use prost;

/// The plugin API version the exports speak (`plugin_api_version`).
pub const API_VERSION: u64 = 1;

/// Bit 31 of the size half of a handler's result marks an error text.
const ERROR_BIT: u32 = 1 << 31;

/// The handlers of a plugin. Each gets the decoded request and returns the
/// reply, or an error whose text the runtime reports as the plugin's error.
/// Every handler has a default that answers an empty reply; Configure's
/// empty reply subscribes the plugin to every event.
#[allow(unused_variables)]
pub trait Plugin {
    /// Configure: the runtime's name and version, the plugin's
    /// configuration (its conf.d file). Return the events to subscribe to
    /// (0: all).
    fn configure(&mut self, req: ConfigureRequest) -> Result<ConfigureResponse, String> {
        Ok(ConfigureResponse::default())
    }
    /// Synchronize: the runtime's pods and containers (one message).
    fn synchronize(&mut self, req: SynchronizeRequest) -> Result<SynchronizeResponse, String> {
        Ok(SynchronizeResponse::default())
    }
    /// Shutdown: the runtime stops.
    fn shutdown(&mut self, req: Empty) -> Result<Empty, String> {
        Ok(Empty::default())
    }
    /// RunPodSandbox.
    fn run_pod_sandbox(
        &mut self,
        req: RunPodSandboxRequest,
    ) -> Result<RunPodSandboxResponse, String> {
        Ok(RunPodSandboxResponse::default())
    }
    /// UpdatePodSandbox.
    fn update_pod_sandbox(
        &mut self,
        req: UpdatePodSandboxRequest,
    ) -> Result<UpdatePodSandboxResponse, String> {
        Ok(UpdatePodSandboxResponse::default())
    }
    /// PostUpdatePodSandbox.
    fn post_update_pod_sandbox(
        &mut self,
        req: PostUpdatePodSandboxRequest,
    ) -> Result<PostUpdatePodSandboxResponse, String> {
        Ok(PostUpdatePodSandboxResponse::default())
    }
    /// StopPodSandbox.
    fn stop_pod_sandbox(
        &mut self,
        req: StopPodSandboxRequest,
    ) -> Result<StopPodSandboxResponse, String> {
        Ok(StopPodSandboxResponse::default())
    }
    /// RemovePodSandbox.
    fn remove_pod_sandbox(
        &mut self,
        req: RemovePodSandboxRequest,
    ) -> Result<RemovePodSandboxResponse, String> {
        Ok(RemovePodSandboxResponse::default())
    }
    /// CreateContainer: return the adjustment of the new container and
    /// updates of others.
    fn create_container(
        &mut self,
        req: CreateContainerRequest,
    ) -> Result<CreateContainerResponse, String> {
        Ok(CreateContainerResponse::default())
    }
    /// PostCreateContainer.
    fn post_create_container(
        &mut self,
        req: PostCreateContainerRequest,
    ) -> Result<PostCreateContainerResponse, String> {
        Ok(PostCreateContainerResponse::default())
    }
    /// StartContainer.
    fn start_container(
        &mut self,
        req: StartContainerRequest,
    ) -> Result<StartContainerResponse, String> {
        Ok(StartContainerResponse::default())
    }
    /// PostStartContainer.
    fn post_start_container(
        &mut self,
        req: PostStartContainerRequest,
    ) -> Result<PostStartContainerResponse, String> {
        Ok(PostStartContainerResponse::default())
    }
    /// UpdateContainer.
    fn update_container(
        &mut self,
        req: UpdateContainerRequest,
    ) -> Result<UpdateContainerResponse, String> {
        Ok(UpdateContainerResponse::default())
    }
    /// PostUpdateContainer.
    fn post_update_container(
        &mut self,
        req: PostUpdateContainerRequest,
    ) -> Result<PostUpdateContainerResponse, String> {
        Ok(PostUpdateContainerResponse::default())
    }
    /// StopContainer.
    fn stop_container(
        &mut self,
        req: StopContainerRequest,
    ) -> Result<StopContainerResponse, String> {
        Ok(StopContainerResponse::default())
    }
    /// RemoveContainer.
    fn remove_container(
        &mut self,
        req: RemoveContainerRequest,
    ) -> Result<RemoveContainerResponse, String> {
        Ok(RemoveContainerResponse::default())
    }
    /// StateChange: events of runtimes that have no dedicated handler for
    /// them (the WebAssembly runtimes of this project and of the reference
    /// call the dedicated handlers).
    fn state_change(&mut self, req: StateChangeEvent) -> Result<Empty, String> {
        Ok(Empty::default())
    }
    /// ValidateContainerAdjustment: accept or reject the merged adjustment.
    fn validate_container_adjustment(
        &mut self,
        req: ValidateContainerAdjustmentRequest,
    ) -> Result<ValidateContainerAdjustmentResponse, String> {
        Ok(ValidateContainerAdjustmentResponse::default())
    }
}

/// Sends `msg` to the runtime's log at `level`, through the host's
/// `env.log` function. Built for the host (tests), writes it to standard
/// error.
pub fn log(level: Level, msg: impl Into<String>) {
    let req = LogRequest {
        msg: msg.into(),
        level: level as i32,
    };
    host_log(&req);
}

#[cfg(target_family = "wasm")]
fn host_log(req: &LogRequest) {
    #[link(wasm_import_module = "env")]
    extern "C" {
        #[link_name = "log"]
        fn nri_host_log(ptr: u32, len: u32) -> u64;
    }
    let bytes = req.encode_to_vec();
    // SAFETY: the host reads `len` bytes at `ptr` of this module's memory
    // during the call; `bytes` lives across it. The reply (an empty
    // message) needs no buffer.
    unsafe {
        nri_host_log(bytes.as_ptr() as usize as u32, bytes.len() as u32);
    }
}

#[cfg(not(target_family = "wasm"))]
fn host_log(req: &LogRequest) {
    eprintln!("{:?}: {}", req.level(), req.msg);
}

/// Decodes a request, runs a handler, encodes its reply: the body of every
/// export. `request` is the host's buffer (empty for an empty request).
/// The result is the reply's bytes, or the error's text.
pub fn handle<Q, A>(
    request: &[u8],
    handler: impl FnOnce(Q) -> Result<A, String>,
) -> Result<Vec<u8>, String>
where
    Q: Message + Default,
    A: Message,
{
    let req = Q::decode(request).map_err(|e| format!("invalid request: {e}"))?;
    handler(req).map(|reply| reply.encode_to_vec())
}

/// Packs a handler's outcome as the ABI wants it: `pointer << 32 | size`,
/// bit 31 of the size set for an error text; 0 for an empty reply. `alloc`
/// gives a buffer the host frees with the module's `free`.
pub fn pack(outcome: Result<Vec<u8>, String>, alloc: impl FnOnce(&[u8]) -> u32) -> u64 {
    let (bytes, error) = match outcome {
        Ok(bytes) => (bytes, false),
        Err(text) => (text.into_bytes(), true),
    };
    if bytes.is_empty() && !error {
        return 0;
    }
    let (bytes, error) = if bytes.len() >= ERROR_BIT as usize {
        (b"reply too large".to_vec(), true)
    } else {
        (bytes, error)
    };
    let ptr = alloc(&bytes);
    let size = bytes.len() as u32 | if error { ERROR_BIT } else { 0 };
    (u64::from(ptr) << 32) | u64::from(size)
}

/// What [`export_plugin!`] expands to; not an API of its own.
#[doc(hidden)]
pub mod __private {
    pub use crate::{handle, pack, Plugin};

    /// The request bytes the host put at `ptr` (allocated with the
    /// module's `malloc`, freed by the host).
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must be memory the host wrote the request to.
    #[cfg(target_family = "wasm")]
    pub unsafe fn request<'a>(ptr: u32, len: u32) -> &'a [u8] {
        if len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(ptr as usize as *const u8, len as usize)
    }

    /// Copies `bytes` into a buffer from the C library's `malloc`, which
    /// the host gives back with the module's `free`.
    #[cfg(target_family = "wasm")]
    pub fn alloc(bytes: &[u8]) -> u32 {
        extern "C" {
            fn malloc(size: usize) -> *mut u8;
        }
        // SAFETY: a fresh buffer of `bytes.len()` bytes; aborting on
        // failure, as Rust's allocation does.
        unsafe {
            let p = malloc(bytes.len());
            if p.is_null() {
                std::process::abort();
            }
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
            p as usize as u32
        }
    }
}

/// Exports a [`Plugin`] with the WebAssembly plugin ABI:
/// `plugin_api_version` and one `plugin_<event>` per handler. The plugin
/// is created on the first call, with `Default` or with the given
/// expression, and lives as long as the module's instance.
///
/// ```
/// # use nri_wasm_guest::{export_plugin, Plugin};
/// struct Counter {
///     seen: u64,
/// }
/// impl Plugin for Counter {}
/// export_plugin!(Counter, Counter { seen: 0 });
/// # fn main() {}
/// ```
///
/// Emits nothing when not built for a WebAssembly target.
#[macro_export]
macro_rules! export_plugin {
    ($ty:ty) => {
        $crate::export_plugin!($ty, <$ty as ::core::default::Default>::default());
    };
    ($ty:ty, $init:expr) => {
        #[cfg(target_family = "wasm")]
        mod __nri_wasm_guest_exports {
            use super::*;
            use $crate::__private::Plugin as _;

            ::std::thread_local! {
                static PLUGIN: ::std::cell::RefCell<::core::option::Option<$ty>> =
                    const { ::std::cell::RefCell::new(::core::option::Option::None) };
            }

            fn call<Q, A>(
                ptr: u32,
                len: u32,
                handler: impl FnOnce(&mut $ty, Q) -> ::core::result::Result<A, ::std::string::String>,
            ) -> u64
            where
                Q: $crate::prost::Message + ::core::default::Default,
                A: $crate::prost::Message,
            {
                // SAFETY: the host wrote the request there.
                let request = unsafe { $crate::__private::request(ptr, len) };
                let outcome = PLUGIN.with(|slot| {
                    let mut slot = slot.borrow_mut();
                    let plugin = slot.get_or_insert_with(|| $init);
                    $crate::__private::handle(request, |q| handler(plugin, q))
                });
                $crate::__private::pack(outcome, $crate::__private::alloc)
            }

            #[no_mangle]
            pub extern "C" fn plugin_api_version() -> u64 {
                $crate::API_VERSION
            }

            $crate::__export_handlers! {
                plugin_configure => configure,
                plugin_synchronize => synchronize,
                plugin_shutdown => shutdown,
                plugin_run_pod_sandbox => run_pod_sandbox,
                plugin_update_pod_sandbox => update_pod_sandbox,
                plugin_post_update_pod_sandbox => post_update_pod_sandbox,
                plugin_stop_pod_sandbox => stop_pod_sandbox,
                plugin_remove_pod_sandbox => remove_pod_sandbox,
                plugin_create_container => create_container,
                plugin_post_create_container => post_create_container,
                plugin_start_container => start_container,
                plugin_post_start_container => post_start_container,
                plugin_update_container => update_container,
                plugin_post_update_container => post_update_container,
                plugin_stop_container => stop_container,
                plugin_remove_container => remove_container,
                plugin_state_change => state_change,
                plugin_validate_container_adjustment => validate_container_adjustment,
            }
        }
    };
}

/// One export per handler; part of [`export_plugin!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __export_handlers {
    ($($export:ident => $method:ident,)*) => {
        $(
            #[no_mangle]
            pub extern "C" fn $export(ptr: u32, len: u32) -> u64 {
                call(ptr, len, |p, q| p.$method(q))
            }
        )*
    };
}

/// For the plugin's build script.
pub mod build {
    /// Tells the linker to export the C library's `malloc` and `free`, which
    /// the runtime uses to hand requests to the module and take replies
    /// back. Call it from the plugin's `build.rs`; it does nothing unless
    /// the target is WebAssembly.
    pub fn export_allocator() {
        if std::env::var("CARGO_CFG_TARGET_FAMILY").is_ok_and(|f| f.split(',').any(|f| f == "wasm"))
        {
            println!("cargo:rustc-link-arg-cdylib=--export=malloc");
            println!("cargo:rustc-link-arg-cdylib=--export=free");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_and_errors_are_packed_as_the_abi_says() {
        let reply = CreateContainerResponse {
            adjust: Some(ContainerAdjustment {
                annotations: [("a".to_string(), "b".to_string())].into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let encoded = reply.encode_to_vec();
        let packed = pack(Ok(encoded.clone()), |b| {
            assert_eq!(b, encoded.as_slice());
            0x1234
        });
        assert_eq!(packed, (0x1234 << 32) | encoded.len() as u64);
        let packed = pack(Err("no".into()), |b| {
            assert_eq!(b, b"no");
            0x10
        });
        assert_eq!(packed, (0x10 << 32) | (1 << 31) | 2);
        // An empty reply needs no buffer.
        assert_eq!(pack(Ok(Vec::new()), |_| panic!("allocated")), 0);
    }

    #[test]
    fn requests_are_decoded_and_bad_ones_refused() {
        let req = ConfigureRequest {
            runtime_name: "rt".into(),
            ..Default::default()
        };
        let out = handle(&req.encode_to_vec(), |q: ConfigureRequest| {
            assert_eq!(q.runtime_name, "rt");
            Ok(ConfigureResponse {
                events: 5,
                ..Default::default()
            })
        })
        .unwrap();
        assert_eq!(ConfigureResponse::decode(out.as_slice()).unwrap().events, 5);
        let err = handle(&[0xff, 0xff], |_: ConfigureRequest| {
            Ok(ConfigureResponse::default())
        })
        .unwrap_err();
        assert!(err.starts_with("invalid request"), "{err}");
        // An empty request is the default message.
        let out = handle(&[], |q: Empty| Ok(q)).unwrap();
        assert!(out.is_empty());
    }
}
