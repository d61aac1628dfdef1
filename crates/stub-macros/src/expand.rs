//! Expansion of `#[plugin]`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{ImplItem, ItemImpl};

use crate::handlers::event_for;

/// Name of the trait method the attribute generates.
const IMPLEMENTED_EVENTS: &str = "implemented_events";

/// Expands `#[plugin]` on `item`; `attr` must be empty.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    if !attr.is_empty() {
        return Err(syn::Error::new_spanned(
            attr,
            "#[nri_stub::plugin] takes no arguments",
        ));
    }
    let mut block: ItemImpl = syn::parse2(item)?;
    if block.trait_.is_none() {
        return Err(syn::Error::new(
            Span::call_site(),
            "#[nri_stub::plugin] must be placed on an `impl nri_stub::Plugin for Type` block",
        ));
    }

    let mut events = Vec::new();
    let mut declares_events = false;
    for item in &block.items {
        if let ImplItem::Fn(method) = item {
            let name = method.sig.ident.to_string();
            if name == IMPLEMENTED_EVENTS {
                declares_events = true;
            } else if let Some(event) = event_for(&name) {
                events.push(format_ident!("{}", event, span = method.sig.ident.span()));
            }
        }
    }

    if !declares_events {
        let generated: ImplItem = syn::parse_quote! {
            fn implemented_events(&self) -> ::nri_stub::EventMask {
                ::nri_stub::__private::mask_of(&[
                    #(::nri_stub::__private::Event::#events),*
                ])
            }
        };
        block.items.push(generated);
    }

    let (impl_generics, _, where_clause) = block.generics.split_for_impl();
    let self_ty = &block.self_ty;
    let marker = quote! {
        impl #impl_generics ::nri_stub::__private::PluginAttribute for #self_ty #where_clause {}
    };
    Ok(quote! {
        #[::nri_stub::async_trait]
        #block
        #marker
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(item: TokenStream) -> String {
        match expand(TokenStream::new(), item) {
            Ok(tokens) => tokens.to_string(),
            Err(err) => panic!("expansion failed: {err}"),
        }
    }

    #[test]
    fn generates_mask_from_handlers() {
        let out = expanded(quote! {
            impl Plugin for P {
                async fn configure(&self) {}
                async fn create_container(&self) {}
                async fn remove_pod_sandbox(&self) {}
            }
        });
        assert!(out.starts_with("# [:: nri_stub :: async_trait]"), "{out}");
        assert!(out.contains("fn implemented_events"));
        assert!(out.contains("Event :: CreateContainer"));
        assert!(out.contains("Event :: RemovePodSandbox"));
        assert!(!out.contains("Event :: Configure"));
        assert_eq!(out.matches("Event ::").count(), 2);
    }

    #[test]
    fn keeps_explicit_implemented_events() {
        let out = expanded(quote! {
            impl Plugin for P {
                fn implemented_events(&self) -> EventMask { EventMask::default() }
                async fn create_container(&self) {}
            }
        });
        assert_eq!(out.matches("fn implemented_events").count(), 1);
        assert!(!out.contains("mask_of"));
    }

    #[test]
    fn rejects_inherent_impl() {
        let err = expand(TokenStream::new(), quote! { impl P { fn f(&self) {} } });
        let message = err.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("must be placed on an `impl nri_stub::Plugin"));
    }

    #[test]
    fn rejects_arguments() {
        let err = expand(quote! { foo }, quote! { impl Plugin for P {} });
        let message = err.err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(message, "#[nri_stub::plugin] takes no arguments");
    }
}
