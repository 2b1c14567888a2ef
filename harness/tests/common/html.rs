//! HTML pages read back as a browser would: html5ever, the parser Servo
//! uses, builds the DOM and names every parse error (a stray end tag, text
//! where a table allows none, a missing doctype). A page the harness writes
//! must parse with none, and tests find elements in the DOM rather than
//! matching bytes, so a harmless change of whitespace breaks nothing.
//!
//! Included by path (`#[path = "common/html.rs"] mod html;`) by the tests that
//! read pages, so the other test binaries do not compile it.
#![allow(dead_code)]

use html5ever::driver::ParseOpts;
use html5ever::tendril::TendrilSink;
use html5ever::tokenizer::TokenizerOpts;
use html5ever::tree_builder::TreeBuilderOpts;
use markup5ever_rcdom::{Handle, NodeData, RcDom};

/// A parsed page: its document and the parser's errors, exact (with where
/// and why), in the order met.
pub struct Page {
    pub document: Handle,
    pub errors: Vec<String>,
}

pub fn parse(html: &str) -> Page {
    let opts = ParseOpts {
        tokenizer: TokenizerOpts {
            exact_errors: true,
            ..Default::default()
        },
        tree_builder: TreeBuilderOpts {
            exact_errors: true,
            ..Default::default()
        },
    };
    let dom = html5ever::parse_document(RcDom::default(), opts).one(html);
    let errors = dom.errors.borrow().iter().map(|e| e.to_string()).collect();
    Page {
        document: dom.document.clone(),
        errors,
    }
}

/// Panics naming every parse error (and the page, cut short) if there is one.
pub fn assert_parses(html: &str) -> Page {
    let page = parse(html);
    assert!(
        page.errors.is_empty(),
        "the page has HTML parse errors: {:#?}\n--- page (first 4000 bytes) ---\n{}",
        page.errors,
        &html[..html.floor_char_boundary(4000)]
    );
    page
}

/// Every element named `tag` under `node`, in document order.
pub fn elements(node: &Handle, tag: &str) -> Vec<Handle> {
    let mut found = Vec::new();
    let mut stack = vec![node.clone()];
    while let Some(next) = stack.pop() {
        if let NodeData::Element { name, .. } = &next.data
            && &*name.local == tag
        {
            found.push(next.clone());
        }
        // Reversed so the stack pops them in document order.
        stack.extend(next.children.borrow().iter().rev().cloned());
    }
    found
}

/// An element's attribute, as the DOM holds it (entities decoded).
pub fn attr(node: &Handle, name: &str) -> Option<String> {
    match &node.data {
        NodeData::Element { attrs, .. } => attrs
            .borrow()
            .iter()
            .find(|a| &*a.name.local == name)
            .map(|a| a.value.to_string()),
        _ => None,
    }
}

/// The text under a node, as the DOM holds it (entities decoded).
pub fn text(node: &Handle) -> String {
    let mut out = String::new();
    let mut stack = vec![node.clone()];
    while let Some(next) = stack.pop() {
        if let NodeData::Text { contents } = &next.data {
            out.push_str(&contents.borrow());
        }
        stack.extend(next.children.borrow().iter().rev().cloned());
    }
    out
}
