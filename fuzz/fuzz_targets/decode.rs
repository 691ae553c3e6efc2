//! The JSON-RPC decoder on arbitrary bytes: a body or SSE `data` payload straight from a server.
//!
//! It must never panic, and what it accepts must be well formed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_client::mcp::Reason;
use mcp_client::mcp::jsonrpc::{self, Incoming};

fuzz_target!(|data: &[u8]| {
    match jsonrpc::decode(data) {
        Ok(messages) => {
            assert!(!messages.is_empty(), "Ok with no message");
            for m in &messages {
                if let Incoming::Response {
                    outcome: Ok(result),
                    ..
                } = m
                {
                    // Whatever was accepted re-encodes (no NaN, no invalid state).
                    serde_json::to_vec(result).expect("a decoded value re-encodes");
                }
            }
        }
        Err(e) => assert!(
            matches!(e.reason, Reason::InvalidJson | Reason::InvalidResponse),
            "unexpected reason {:?}",
            e.reason
        ),
    }
});
