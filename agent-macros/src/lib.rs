//! `#[interrupt]`: declares an interrupt kind in one place. Use it through agent-core
//! (`#[agent_core::interrupt(type = "...", summary = "...")]`); this crate has no other API.
//!
//! On `impl InterruptKind for Kind { ... }` it adds the kind's constants to the impl, and
//! emits the kind's `Interrupt` trait-object impl (async-trait expanded, registered with
//! typetag under the wire name, for decoding) and its registration for listing and
//! self-checks. The wire name is written once, in the attribute. Misuses are compile errors
//! that say what to write instead.

#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{ToTokens, quote_spanned};
use syn::spanned::Spanned;
use syn::{Error, ImplItem, Item, ItemImpl, LitStr, Result};

/// What `agent interrupts list` shows and what the kind is called on the wire.
struct Args {
    type_name: LitStr,
    summary: LitStr,
    example: Option<LitStr>,
}

const USAGE: &str = "write #[agent_core::interrupt(type = \"my_kind\", summary = \"what it does\")] \
                     (optionally example = r#\"{\"type\":\"my_kind\",...}\"#)";

const ON_AN_IMPL: &str =
    "#[agent_core::interrupt] goes on an `impl InterruptKind for YourKind { ... }` block";

/// The longest wire name: it names marker files (`<type>_<i>.complete`) next to other names.
const TYPE_MAX: usize = 64;

/// Declare an interrupt kind: see agent-core's `interrupt` re-export for the documentation.
#[proc_macro_attribute]
pub fn interrupt(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args.into(), item.into())
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

fn expand(
    args: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> Result<proc_macro2::TokenStream> {
    let item: Item = syn::parse2(item).map_err(|e| Error::new(e.span(), ON_AN_IMPL))?;
    let Item::Impl(imp) = item else {
        let what = match &item {
            Item::Struct(_) | Item::Enum(_) => {
                "#[agent_core::interrupt] goes on the kind's `impl InterruptKind for YourKind { ... }` \
                 block, not on the type: keep only #[derive(Debug, Serialize, Deserialize)] here"
            }
            _ => ON_AN_IMPL,
        };
        return Err(Error::new(first_token_span(&item), what));
    };
    let args = parse_args(args)?;
    check_impl(&imp)?;
    Ok(emit(&args, &imp))
}

fn first_token_span(item: &Item) -> Span {
    item.to_token_stream()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |t| t.span())
}

fn parse_args(args: proc_macro2::TokenStream) -> Result<Args> {
    let mut type_name: Option<LitStr> = None;
    let mut summary: Option<LitStr> = None;
    let mut example: Option<LitStr> = None;
    let parser = syn::meta::parser(|meta| {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        let slot = match key.as_str() {
            "type" => &mut type_name,
            "summary" => &mut summary,
            "example" => &mut example,
            "name" => {
                return Err(meta.error(
                    "the wire name is given as `type = \"my_kind\"` (it is the payload's \"type\")",
                ));
            }
            _ => {
                return Err(meta.error(format!(
                    "unknown key `{}`: the keys are `type`, `summary` and `example`",
                    meta.path.to_token_stream()
                )));
            }
        };
        if slot.is_some() {
            return Err(meta.error(format!("`{key}` is given twice")));
        }
        let value: LitStr = meta.value()?.parse().map_err(|e| {
            Error::new(
                e.span(),
                format!("`{key}` takes a string literal: {key} = \"...\""),
            )
        })?;
        *slot = Some(value);
        Ok(())
    });
    syn::parse::Parser::parse2(parser, args)?;
    let missing = |key: &str| Error::new(Span::call_site(), format!("missing `{key}`: {USAGE}"));
    let type_name = type_name.ok_or_else(|| missing("type"))?;
    let summary = summary.ok_or_else(|| missing("summary"))?;
    check_type_name(&type_name)?;
    if summary.value().trim().is_empty() || summary.value().contains('\n') {
        return Err(Error::new(
            summary.span(),
            "`summary` is one non-empty line: `agent interrupts list` shows it beside the type",
        ));
    }
    if let Some(example) = &example {
        check_example(example, &type_name.value())?;
    }
    Ok(Args {
        type_name,
        summary,
        example,
    })
}

/// Lowercase snake case: the name is typed by operators and names marker files.
fn check_type_name(lit: &LitStr) -> Result<()> {
    let name = lit.value();
    let ok = name.len() <= TYPE_MAX
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::new(
            lit.span(),
            format!(
                "`type` must be lowercase snake case (a-z, 0-9, '_', starting with a letter, at \
                 most {TYPE_MAX} characters), like \"containerd_restart\": it is the payload's \
                 \"type\" and names the kind's marker files"
            ),
        ))
    }
}

/// The example is a JSON object of this kind; whether its fields fit the kind is checked at
/// startup and by `agent_core::testing::assert_kind`.
fn check_example(lit: &LitStr, type_name: &str) -> Result<()> {
    let value: serde_json::Value = serde_json::from_str(&lit.value())
        .map_err(|e| Error::new(lit.span(), format!("`example` is not valid JSON: {e}")))?;
    match value.get("type") {
        Some(serde_json::Value::String(t)) if t == type_name => Ok(()),
        _ => Err(Error::new(
            lit.span(),
            format!(
                "`example` must be a JSON object with \"type\": \"{type_name}\", like \
                 r#\"{{\"type\":\"{type_name}\"}}\"#"
            ),
        )),
    }
}

const RUN_SIGNATURE: &str =
    "async fn run(&self, cx: &InterruptContext) -> Result<(), InterruptError>";

fn check_impl(imp: &ItemImpl) -> Result<()> {
    let Some((trait_path, _)) = &imp.trait_ else {
        return Err(Error::new(
            imp.self_ty.span(),
            "#[agent_core::interrupt] goes on `impl InterruptKind for YourKind { ... }`, not on \
             an inherent impl",
        ));
    };
    if trait_path
        .segments
        .last()
        .is_none_or(|s| s.ident != "InterruptKind")
    {
        return Err(Error::new(
            trait_path.span(),
            "#[agent_core::interrupt] goes on `impl InterruptKind for YourKind { ... }`",
        ));
    }
    if !imp.generics.params.is_empty() {
        return Err(Error::new(
            imp.generics.span(),
            "an interrupt kind cannot be generic: declare one concrete type per wire name",
        ));
    }
    for attr in &imp.attrs {
        let segments = &attr.path().segments;
        if segments.first().is_some_and(|s| s.ident == "typetag")
            || segments.last().is_some_and(|s| s.ident == "async_trait")
        {
            return Err(Error::new_spanned(
                attr,
                format!(
                    "remove #[{}]: #[agent_core::interrupt] registers the kind with typetag \
                     under its `type` itself, and `async fn run` needs no macro",
                    attr.path().to_token_stream().to_string().replace(' ', "")
                ),
            ));
        }
    }
    let mut run = None;
    for item in &imp.items {
        match item {
            ImplItem::Const(c) => {
                return Err(Error::new(
                    c.ident.span(),
                    format!(
                        "remove `const {}`: #[agent_core::interrupt] defines TYPE, SUMMARY and \
                         EXAMPLE from its `type`, `summary` and `example`",
                        c.ident
                    ),
                ));
            }
            ImplItem::Fn(f) if f.sig.ident.to_string().starts_with("typetag_") => {
                return Err(Error::new(
                    f.sig.ident.span(),
                    "remove #[typetag::serde]: #[agent_core::interrupt] already registers the \
                     kind with typetag under its `type`",
                ));
            }
            ImplItem::Fn(f) if f.sig.ident == "run" => run = Some(f),
            _ => {}
        }
    }
    let Some(run) = run else {
        return Err(Error::new(
            imp.self_ty.span(),
            format!("an interrupt kind needs `{RUN_SIGNATURE}`"),
        ));
    };
    if run.sig.asyncness.is_none() {
        return Err(Error::new(
            run.sig.fn_token.span(),
            format!("`run` is an async fn: write `{RUN_SIGNATURE}`"),
        ));
    }
    if !returns_unit_result(&run.sig.output) {
        return Err(Error::new_spanned(
            &run.sig.output,
            format!(
                "`run` returns `Result<(), InterruptError>`: a failed operation is an `Err` \
                 (`cx.operation(..).await?`), never an `Ok` value. Write `{RUN_SIGNATURE}`"
            ),
        ));
    }
    Ok(())
}

/// `-> Result<(), ...>`, however `Result` is spelled.
fn returns_unit_result(output: &syn::ReturnType) -> bool {
    let syn::ReturnType::Type(_, ty) = output else {
        return false;
    };
    let syn::Type::Path(path) = ty.as_ref() else {
        return false;
    };
    let Some(last) = path.path.segments.last() else {
        return false;
    };
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return false;
    };
    last.ident == "Result"
        && matches!(
            args.args.first(),
            Some(syn::GenericArgument::Type(syn::Type::Tuple(t))) if t.elems.is_empty()
        )
}

fn emit(args: &Args, imp: &ItemImpl) -> proc_macro2::TokenStream {
    let Args {
        type_name,
        summary,
        example,
    } = args;
    let kind = &imp.self_ty;
    let span = type_name.span();
    // Without `example`, the listed example is `{"type":"<type>"}`: right only for a kind
    // without fields. A kind with fields has a size; a kind without has none, so a constant
    // says which at compile time (the struct itself is out of the attribute's sight).
    let needs_example = example.is_none().then(|| {
        let name = type_name.value();
        let message = LitStr::new(
            &format!(
                "#[agent_core::interrupt(type = \"{name}\", ...)] needs `example`: the kind has \
                 fields, and the default example {{{{\"type\":\"{name}\"}}}} shows none of them \
                 (and does not decode when one is required). Add example = \
                 r#\"{{{{\"type\":\"{name}\",...}}}}\"#, the payload in its canonical form"
            ),
            span,
        );
        quote_spanned! {span=>
            const _: () = ::core::assert!(::core::mem::size_of::<#kind>() == 0, #message);
        }
    });
    let example = example.clone().unwrap_or_else(|| {
        LitStr::new(
            &format!("{{\"type\":\"{}\"}}", type_name.value()),
            type_name.span(),
        )
    });
    // The user's impl, with the constants the attribute declares.
    let mut imp = imp.clone();
    imp.items.extend([
        syn::parse_quote_spanned!(span=> const TYPE: &'static str = #type_name;),
        syn::parse_quote_spanned!(span=> const SUMMARY: &'static str = #summary;),
        syn::parse_quote_spanned!(span=> const EXAMPLE: &'static str = #example;),
    ]);
    quote_spanned! {span=>
        #imp

        #needs_example

        impl ::agent_core::__private::Declared for #kind {}

        const _: () = {
            // typetag's expansion names `typetag::...`; the kind's crate need not depend on it.
            use ::agent_core::typetag;

            ::agent_core::__private::inventory::submit! {
                ::agent_core::__private::InterruptDescriptor::new::<#kind>(::core::module_path!())
            }

            #[typetag::serde(name = #type_name)]
            #[::agent_core::async_trait]
            impl ::agent_core::Interrupt for #kind {
                fn validate_payload(&self) -> ::core::result::Result<(), ::agent_core::BoxError> {
                    <Self as ::agent_core::InterruptKind>::validate(self)
                }

                async fn run_operations(
                    &self,
                    cx: &::agent_core::InterruptContext,
                ) -> ::core::result::Result<(), ::agent_core::InterruptError> {
                    <Self as ::agent_core::InterruptKind>::run(self, cx).await
                }
            }
        };
    }
}
