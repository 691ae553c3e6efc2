//! The lists a correct client caches: walked page by page ([`walker`]), held as
//! fingerprints ([`items`]), and compared across listings and against approved baselines
//! ([`changes`]), with the definitions that takes shared across targets ([`interner`]).
//!
//! Which list is cached is a value ([`list::List`]): tools, prompts, resources and resource
//! templates differ only in the names it holds.
//!
//! The walker sees only a [`walker::Pager`]: a session, a test double or the proxy's upstream
//! all page the same way, so the cursor rules (caps, repeats, byte budget) are written once.

pub mod changes;
pub mod interner;
pub mod items;
pub mod list;
pub mod walker;
