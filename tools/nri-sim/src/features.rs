//! The optional parts of nri-sim (cargo features, off by default so that the
//! first build is quick) and the error a user gets when asking for one that
//! is not built in.
//!
//! | feature | what it adds |
//! |---------|--------------|
//! | `wasm`  | WebAssembly plugins (`wasm:` in a scenario, `.wasm` modules in a plugin directory), on wasmtime |
//! | `otel`  | `serve --otlp-endpoint`: OpenTelemetry export of the NRI spans |
//! | `samples` | the sample plugins other than `ulimit-adjuster` (which the demo runs), for `- sample: NAME` and `replay --sample NAME` |
//!
//! ```
//! let text = nri_sim::features::not_built_in("wasm", "a WebAssembly plugin (x.wasm)");
//! assert!(text.contains("--features wasm"));
//! ```

/// Whether nri-sim was built with `feature` (one of the table above).
pub fn enabled(feature: &str) -> bool {
    (feature == "wasm" && cfg!(feature = "wasm"))
        || (feature == "otel" && cfg!(feature = "otel"))
        || (feature == "samples" && cfg!(feature = "samples"))
}

/// The message for `what` needing `feature` in a build without it: names
/// the feature and the cargo commands that build it in.
pub fn not_built_in(feature: &str, what: &str) -> String {
    format!(
        "{what} needs nri-sim's `{feature}` feature, which this build does not have; \
         in the nri-rs workspace run `cargo run --release -p nri-sim --features {feature} -- ...`, \
         or install it with `cargo install --locked --path tools/nri-sim --features {feature}`"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_feature_and_the_commands() {
        let m = not_built_in("otel", "`--otlp-endpoint`");
        assert!(
            m.starts_with("`--otlp-endpoint` needs nri-sim's `otel` feature"),
            "{m}"
        );
        assert!(
            m.contains("cargo run --release -p nri-sim --features otel"),
            "{m}"
        );
        assert!(
            m.contains("cargo install --locked --path tools/nri-sim --features otel"),
            "{m}"
        );
        assert!(!enabled("nonexistent"));
    }
}
