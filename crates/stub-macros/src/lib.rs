//! Procedural macros for [`nri-stub`](https://docs.rs/nri-stub).
//!
//! Use them through `nri_stub::plugin`; this crate is an implementation detail of
//! `nri-stub` and its generated code refers to `::nri_stub`.

mod expand;
mod handlers;

use proc_macro::TokenStream;

/// Marks an `impl nri_stub::Plugin for T` block.
///
/// The attribute
/// * derives `implemented_events()` from the handler methods present in the block
///   (unless the block defines `implemented_events` itself), so the stub subscribes the
///   plugin to exactly the events it handles, and
/// * applies `#[nri_stub::async_trait]`, so handlers are written as plain `async fn`s.
///
/// See the `nri-stub` crate documentation for a complete example.
#[proc_macro_attribute]
pub fn plugin(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
