//! Property tests: the JSON-RPC decoder, the cursor walker and the fingerprints, on generated
//! input. Every suite is bounded (at most 256 cases, fewer for the async walker) so the file runs
//! in a few seconds of `cargo test` in debug. `docs/fuzzing.md` covers the open-ended fuzzing.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use mcp_client::listing::items::{ItemSet, definition_fingerprint};
use mcp_client::listing::walker::{MAX_ITEMS_PER_WALK, Pager, WalkError, walk};
use mcp_client::mcp::jsonrpc::{self, Incoming, RpcError};
use mcp_client::mcp::{McpError, Reason};
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde_json::{Map, Value, json};

/// 2^53: every fingerprint must be below it to be exact as a float64 gauge.
const TWO_POW_53: u64 = 1 << 53;

/// `cases` per property, unless `PROPTEST_CASES` asks for a longer (or shorter) run.
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        // Shrinking stays bounded too, so a failure reports quickly.
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// JSON generation
// ---------------------------------------------------------------------------------------------

/// Numbers whose decimal text round-trips exactly through serde_json's default float parser (its
/// default parse is best-effort for long fractions, which would make equality checks flaky for a
/// reason that is not ours).
fn json_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1_000_000i64..1_000_000, 0u32..4)
            .prop_map(|(n, k)| json!(n as f64 / f64::from(1u32 << k))),
    ]
}

fn json_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,6}",
        // Escapes, controls and non-ASCII, as a hostile server might send them.
        "[\\x00-\\x1f\"\\\\/a-zé€\u{1F600}]{0,8}",
        Just("2.0".to_string()),
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        json_number(),
        json_string().prop_map(Value::String),
    ]
}

/// Arbitrary JSON values, at most 4 levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(json_string(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Objects shaped like JSON-RPC messages: each member present or not, with a plausible or an
/// arbitrary value, so that every branch of the decoder (including its successes) is reached.
fn rpc_like_object() -> impl Strategy<Value = Value> {
    let jsonrpc = prop_oneof![
        4 => Just(json!("2.0")),
        1 => Just(json!("1.0")),
        1 => json_value(),
    ];
    let id = prop_oneof![
        3 => any::<u32>().prop_map(|n| json!(n)),
        1 => json_string().prop_map(Value::String),
        1 => json_value(),
    ];
    let method = prop_oneof![
        4 => prop_oneof![
            Just("ping".to_string()),
            Just("notifications/tools/list_changed".to_string()),
            json_string(),
        ]
        .prop_map(Value::String),
        1 => json_value(),
    ];
    let error = prop_oneof![
        3 => (any::<i64>(), json_string())
            .prop_map(|(code, message)| json!({"code": code, "message": message})),
        1 => any::<i32>().prop_map(|code| json!({"code": code})),
        1 => json_value(),
    ];
    (
        prop::option::weighted(0.9, jsonrpc),
        prop::option::of(id),
        prop::option::of(method),
        prop::option::of(json_value()),
        prop::option::of(json_value()),
        prop::option::weighted(0.3, error),
        prop::collection::btree_map("x[a-z]{0,3}", json_value(), 0..2),
    )
        .prop_map(|(jsonrpc, id, method, params, result, error, extra)| {
            let mut obj: Map<String, Value> = extra.into_iter().collect();
            for (k, v) in [
                ("jsonrpc", jsonrpc),
                ("id", id),
                ("method", method),
                ("params", params),
                ("result", result),
                ("error", error),
            ] {
                if let Some(v) = v {
                    obj.insert(k.to_string(), v);
                }
            }
            Value::Object(obj)
        })
}

/// One message, or a batch of them (sometimes with a non-object member).
fn rpc_like_payload() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => rpc_like_object(),
        2 => prop::collection::vec(
            prop_oneof![8 => rpc_like_object(), 1 => json_value()],
            0..5,
        )
        .prop_map(Value::Array),
    ]
}

// ---------------------------------------------------------------------------------------------
// jsonrpc::decode
// ---------------------------------------------------------------------------------------------

/// Check that one decoded message says exactly what its source object said.
fn assert_consistent(source: &Value, msg: &Incoming) -> Result<(), TestCaseError> {
    let obj = source
        .as_object()
        .ok_or_else(|| TestCaseError::fail(format!("decoded a non-object: {source}")))?;
    prop_assert_eq!(obj.get("jsonrpc"), Some(&json!("2.0")), "{}", source);
    match msg {
        Incoming::Response { id, outcome } => {
            prop_assert_eq!(obj.get("id"), Some(id), "response id: {}", source);
            prop_assert!(
                !obj.contains_key("method"),
                "response has a method: {}",
                source
            );
            match outcome {
                Ok(result) => {
                    prop_assert_eq!(obj.get("result"), Some(result));
                    prop_assert!(!obj.contains_key("error"), "result and error: {}", source);
                }
                Err(RpcError { code, message, .. }) => {
                    prop_assert!(!obj.contains_key("result"), "result and error: {}", source);
                    let err = &obj["error"];
                    prop_assert_eq!(err.get("code").and_then(Value::as_i64), Some(*code));
                    let expected = err.get("message").and_then(Value::as_str).unwrap_or("");
                    prop_assert_eq!(message.as_str(), expected);
                }
            }
        }
        Incoming::Notification { method, params } => {
            prop_assert!(
                !obj.contains_key("id"),
                "notification with an id: {}",
                source
            );
            prop_assert_eq!(obj.get("method"), Some(&Value::String(method.clone())));
            prop_assert_eq!(obj.get("params"), params.as_ref());
        }
        Incoming::Request { id, method, params } => {
            prop_assert_eq!(obj.get("id"), Some(id), "request id: {}", source);
            prop_assert_eq!(obj.get("method"), Some(&Value::String(method.clone())));
            prop_assert_eq!(obj.get("params"), params.as_ref());
        }
    }
    Ok(())
}

/// Decode a value's text and, when it decodes, check every message against its source.
fn check_decode_of_value(value: &Value) -> Result<(), TestCaseError> {
    let text = serde_json::to_vec(value).expect("a JSON value always serializes");
    match jsonrpc::decode(&text) {
        Ok(messages) => {
            let sources: Vec<&Value> = match value {
                Value::Array(items) => items.iter().collect(),
                single => vec![single],
            };
            prop_assert_eq!(messages.len(), sources.len(), "{}", value);
            prop_assert!(!messages.is_empty());
            for (source, msg) in sources.into_iter().zip(&messages) {
                assert_consistent(source, msg)?;
            }
        }
        Err(e) => {
            // Valid JSON is never reported as invalid JSON: only its shape can be wrong.
            prop_assert_eq!(e.reason, Reason::InvalidResponse, "{}: {}", value, e);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn decode_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Err(e) = jsonrpc::decode(&bytes) {
            prop_assert!(
                matches!(e.reason, Reason::InvalidJson | Reason::InvalidResponse),
                "unexpected reason {:?}", e.reason
            );
        }
    }

    #[test]
    fn decode_never_panics_on_json_like_text(text in "[\\[\\]{}:,\" 0-9a-z.eE+\\-\\\\]{0,200}") {
        let _ = jsonrpc::decode(text.as_bytes());
    }

    #[test]
    fn decode_survives_deep_nesting(depth in 0usize..20_000, open in prop::sample::select(vec!["[", "{\"a\":"])) {
        let text = open.repeat(depth);
        prop_assert!(jsonrpc::decode(text.as_bytes()).is_err());
    }

    #[test]
    fn decode_of_arbitrary_json_is_consistent(value in json_value()) {
        check_decode_of_value(&value)?;
    }

    #[test]
    fn decode_of_rpc_shaped_json_is_consistent(value in rpc_like_payload()) {
        check_decode_of_value(&value)?;
    }

    #[test]
    fn request_round_trips(
        id in any::<u64>(),
        method in json_string(),
        params in prop::option::of(json_value()),
    ) {
        let decoded = jsonrpc::decode(&jsonrpc::request(id, &method, params.clone())).unwrap();
        prop_assert_eq!(decoded, vec![Incoming::Request { id: json!(id), method, params }]);
    }

    #[test]
    fn notification_round_trips(method in json_string()) {
        let decoded = jsonrpc::decode(&jsonrpc::notification(&method)).unwrap();
        prop_assert_eq!(decoded, vec![Incoming::Notification { method, params: None }]);
    }

    #[test]
    fn response_round_trips(
        id in json_value(),
        outcome in prop_oneof![
            json_value().prop_map(Ok),
            (any::<i64>(), json_string()).prop_map(|(code, message)| Err(RpcError { code, message, data: None })),
        ],
    ) {
        let bytes = jsonrpc::response(&id, outcome.clone());
        let decoded = jsonrpc::decode(&bytes).unwrap();
        prop_assert_eq!(decoded, vec![Incoming::Response { id: id.clone(), outcome }]);
        // And the id we sent is recognised only when it is our integer.
        prop_assert_eq!(jsonrpc::id_matches(&id, 7), id == json!(7));
    }
}

// ---------------------------------------------------------------------------------------------
// walker::walk
// ---------------------------------------------------------------------------------------------

/// A small alphabet, so names repeat within and across pages.
const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];
/// A small set of cursor strings, so cursors repeat.
const FIXED_CURSORS: [&str; 3] = ["p", "q", "r"];

#[derive(Debug, Clone, PartialEq)]
enum CursorSpec {
    Absent,
    Null,
    Empty,
    Fixed(usize),
    /// A string no other page of the script uses.
    Fresh,
}

#[derive(Debug, Clone)]
enum PageSpec {
    Ok {
        names: Vec<usize>,
        cursor: CursorSpec,
    },
    Err(Reason),
}

/// What the pager serves once the script runs out.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tail {
    /// An empty last page.
    End,
    /// Empty pages with fresh cursors, forever.
    Endless,
}

fn cursor_spec() -> impl Strategy<Value = CursorSpec> {
    prop_oneof![
        2 => Just(CursorSpec::Absent),
        1 => Just(CursorSpec::Null),
        1 => Just(CursorSpec::Empty),
        2 => (0..FIXED_CURSORS.len()).prop_map(CursorSpec::Fixed),
        5 => Just(CursorSpec::Fresh),
    ]
}

fn page_spec() -> impl Strategy<Value = PageSpec> {
    prop_oneof![
        6 => (prop::collection::vec(0..NAMES.len(), 0..5), cursor_spec())
            .prop_map(|(names, cursor)| PageSpec::Ok { names, cursor }),
        1 => prop::sample::select(Reason::ALL.to_vec()).prop_map(PageSpec::Err),
    ]
}

fn tail() -> impl Strategy<Value = Tail> {
    prop_oneof![Just(Tail::End), Just(Tail::Endless)]
}

/// One page as the walker will see it: the JSON served and what the model needs to know.
#[derive(Debug, Clone)]
struct Served {
    result: Result<Value, McpError>,
    names: Vec<String>,
    next_cursor: Option<String>,
    /// Whether the page's cursor is one no other page of the whole (infinite) script uses.
    fresh: bool,
}

/// The script expanded to the page served at each position.
fn serve(script: &[PageSpec], tail: Tail, index: usize) -> Served {
    let spec = script.get(index).cloned().unwrap_or(match tail {
        Tail::End => PageSpec::Ok {
            names: vec![],
            cursor: CursorSpec::Absent,
        },
        Tail::Endless => PageSpec::Ok {
            names: vec![],
            cursor: CursorSpec::Fresh,
        },
    });
    match spec {
        PageSpec::Err(reason) => Served {
            result: Err(McpError::new(reason, format!("scripted failure {index}"))),
            names: vec![],
            next_cursor: None,
            fresh: false,
        },
        PageSpec::Ok { names, cursor } => {
            let names: Vec<String> = names.iter().map(|&i| NAMES[i].to_string()).collect();
            let tools: Vec<Value> = names
                .iter()
                .enumerate()
                .map(|(k, n)| json!({"name": n, "inputSchema": {"type": "object"}, "k": k}))
                .collect();
            let mut page = json!({ "tools": tools });
            let next_cursor = match &cursor {
                CursorSpec::Absent => None,
                CursorSpec::Null => {
                    page["nextCursor"] = Value::Null;
                    None
                }
                CursorSpec::Empty => Some(String::new()),
                CursorSpec::Fixed(i) => Some(FIXED_CURSORS[*i].to_string()),
                CursorSpec::Fresh => Some(format!("fresh-{index}")),
            };
            if let Some(c) = &next_cursor {
                page["nextCursor"] = json!(c);
            }
            Served {
                result: Ok(page),
                names,
                next_cursor,
                fresh: cursor == CursorSpec::Fresh,
            }
        }
    }
}

/// Serves the script in order and records every cursor it is asked for.
struct ScriptPager {
    script: Vec<PageSpec>,
    tail: Tail,
    asked: Vec<Option<String>>,
    limit: usize,
}

impl Pager for ScriptPager {
    async fn page(
        &mut self,
        cursor: Option<&str>,
        _max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        // Termination: a walk that keeps asking past any cap is a failure, not a hang.
        assert!(
            self.asked.len() < self.limit,
            "the walk did not stop after {} requests",
            self.limit
        );
        let index = self.asked.len();
        self.asked.push(cursor.map(str::to_string));
        serve(&self.script, self.tail, index).result.map(|v| (v, 0))
    }
}

fn run_walk(
    rt: &tokio::runtime::Runtime,
    script: &[PageSpec],
    tail: Tail,
    max_pages: u32,
) -> (mcp_client::listing::walker::WalkReport, Vec<Option<String>>) {
    let mut pager = ScriptPager {
        script: script.to_vec(),
        tail,
        asked: vec![],
        limit: 1000,
    };
    let limits = mcp_client::listing::walker::WalkLimits {
        max_pages,
        max_bytes: usize::MAX,
    };
    let report = rt.block_on(walk(&mut pager, limits));
    (report, pager.asked)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// All the walker's promises, checked against the pages it was actually served.
fn check_walk(script: &[PageSpec], tail: Tail, max_pages: u32) -> Result<(), TestCaseError> {
    let rt = runtime();
    let (report, asked) = run_walk(&rt, script, tail, max_pages);
    let requests = report.requests as usize;

    // Bounded, and honest about what it sent.
    prop_assert!(report.requests <= max_pages);
    prop_assert!(report.requests >= 1);
    prop_assert_eq!(requests, asked.len());

    // The first request carries no cursor; each later one carries the previous page's cursor.
    let served: Vec<Served> = (0..requests).map(|i| serve(script, tail, i)).collect();
    prop_assert_eq!(&asked[0], &None);
    for i in 1..requests {
        prop_assert_eq!(&asked[i], &served[i - 1].next_cursor, "request {}", i);
    }
    // No cursor is ever sent twice.
    let sent: Vec<&String> = asked.iter().flatten().collect();
    let distinct: HashSet<&String> = sent.iter().copied().collect();
    prop_assert_eq!(
        sent.len(),
        distinct.len(),
        "a cursor was sent twice: {:?}",
        asked
    );

    // Duplicates: every name met again after its first appearance, on any page served.
    let mut seen_names = BTreeSet::new();
    let mut repeats = 0u32;
    for page in &served {
        for n in &page.names {
            if !seen_names.insert(n.clone()) {
                repeats += 1;
            }
        }
    }
    prop_assert_eq!(report.duplicates, repeats);

    let last = served.last().expect("at least one request");
    let earlier_cursors: HashSet<&String> = served[..requests - 1]
        .iter()
        .filter_map(|p| p.next_cursor.as_ref())
        .collect();
    let last_repeats = last
        .next_cursor
        .as_ref()
        .is_some_and(|c| earlier_cursors.contains(c));
    let endless_unique = (0..max_pages as usize).all(|i| {
        let p = serve(script, tail, i);
        p.result.is_ok() && p.fresh
    });

    match &report.result {
        Ok(w) => {
            prop_assert_eq!(w.pages, report.requests);
            prop_assert!(last.result.is_ok() && last.next_cursor.is_none());
            let names: Vec<&str> = w.items.names().collect();
            let expected: Vec<&str> = seen_names.iter().map(String::as_str).collect();
            prop_assert_eq!(names, expected);
            prop_assert!(!endless_unique);
        }
        Err(WalkError::RepeatedCursor) => {
            prop_assert!(last_repeats, "RepeatedCursor without a repeat: {:?}", asked);
        }
        Err(WalkError::LoopCap) => {
            prop_assert_eq!(report.requests, max_pages);
            prop_assert!(last.result.is_ok() && last.next_cursor.is_some() && !last_repeats);
        }
        Err(e @ WalkError::Request { error, with_cursor }) => {
            let expected = last
                .result
                .as_ref()
                .expect_err("the walk failed on an Ok page");
            prop_assert_eq!(error, expected);
            // An error after the first page is a cursor error, and only then.
            prop_assert_eq!(*with_cursor, requests > 1);
            prop_assert_eq!(e.is_cursor_error(), requests > 1);
            prop_assert_eq!(e.reason(), expected.reason.as_str());
        }
        Err(WalkError::TooManyItems { .. }) => {
            prop_assert!(seen_names.len() > MAX_ITEMS_PER_WALK);
        }
        Err(WalkError::ListingTooLarge { .. }) => {
            prop_assert!(false, "these walks have no byte budget: {:?}", asked);
        }
    }
    // A repeated cursor always ends the walk as RepeatedCursor.
    if last_repeats {
        prop_assert_eq!(&report.result, &Err(WalkError::RepeatedCursor));
    }
    // Endless unique cursors always end at the cap.
    if endless_unique {
        prop_assert_eq!(&report.result, &Err(WalkError::LoopCap));
        prop_assert_eq!(report.requests, max_pages);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(192))]

    #[test]
    fn walk_obeys_its_guards_on_any_script(
        script in prop::collection::vec(page_spec(), 0..25),
        tail in tail(),
        max_pages in 1u32..=20,
    ) {
        check_walk(&script, tail, max_pages)?;
    }

    #[test]
    fn walk_of_endless_unique_cursors_hits_the_cap(
        pages in prop::collection::vec(prop::collection::vec(0..NAMES.len(), 0..4), 0..25),
        max_pages in 1u32..=20,
    ) {
        let script: Vec<PageSpec> = pages
            .into_iter()
            .map(|names| PageSpec::Ok { names, cursor: CursorSpec::Fresh })
            .collect();
        check_walk(&script, Tail::Endless, max_pages)?;
        let rt = runtime();
        let (report, _) = run_walk(&rt, &script, Tail::Endless, max_pages);
        prop_assert_eq!(report.result, Err(WalkError::LoopCap));
        prop_assert_eq!(report.requests, max_pages);
    }

    #[test]
    fn walk_completes_when_the_script_ends_within_the_cap(
        pages in prop::collection::vec(prop::collection::vec(0..NAMES.len(), 0..4), 0..19),
        extra in 0u32..3,
    ) {
        // Fresh cursors, then an end: exactly pages + 1 requests, complete when the cap allows.
        let script: Vec<PageSpec> = pages
            .into_iter()
            .map(|names| PageSpec::Ok { names, cursor: CursorSpec::Fresh })
            .collect();
        let needed = script.len() as u32 + 1;
        let rt = runtime();
        let (report, asked) = run_walk(&rt, &script, Tail::End, needed + extra);
        prop_assert_eq!(report.requests, needed);
        prop_assert_eq!(asked.len() as u32, needed);
        prop_assert!(report.result.is_ok(), "{:?}", report.result);
        if needed > 1 {
            let (short, _) = run_walk(&rt, &script, Tail::End, needed - 1);
            prop_assert_eq!(short.result, Err(WalkError::LoopCap));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// items: fingerprints and the diff
// ---------------------------------------------------------------------------------------------

/// A JSON tree whose object members keep an explicit order, to be written out as text.
#[derive(Debug, Clone)]
enum Tree {
    Leaf(Value),
    Arr(Vec<Tree>),
    Obj(Vec<(String, Tree)>),
}

fn tree() -> impl Strategy<Value = Tree> {
    json_leaf()
        .prop_map(Tree::Leaf)
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Tree::Arr),
                prop::collection::btree_map(json_string(), inner, 0..5)
                    .prop_map(|m| Tree::Obj(m.into_iter().collect())),
            ]
        })
}

/// A tool definition: a top-level object without `_meta` (nested `_meta` may occur).
fn tool_tree() -> impl Strategy<Value = Vec<(String, Tree)>> {
    (
        "[a-z_]{1,8}",
        prop::collection::btree_map(json_string(), tree(), 0..6),
    )
        .prop_map(|(name, mut members)| {
            members.remove("_meta");
            members.insert("name".into(), Tree::Leaf(json!(name)));
            members.into_iter().collect()
        })
}

/// Write a tree as JSON text, every object's members shuffled by `rng`.
fn write_shuffled(tree: &Tree, rng: &mut StdRng, out: &mut String) {
    match tree {
        Tree::Leaf(v) => out.push_str(&v.to_string()),
        Tree::Arr(items) => {
            out.push('[');
            for (i, t) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_shuffled(t, rng, out);
            }
            out.push(']');
        }
        Tree::Obj(members) => write_members(members, rng, out),
    }
}

fn write_members(members: &[(String, Tree)], rng: &mut StdRng, out: &mut String) {
    let mut order: Vec<&(String, Tree)> = members.iter().collect();
    order.shuffle(rng);
    out.push('{');
    for (i, (k, v)) in order.into_iter().enumerate() {
        if i > 0 {
            out.push_str(" , ");
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push_str(": ");
        write_shuffled(v, rng, out);
    }
    out.push('}');
}

fn tool_text(members: &[(String, Tree)], seed: u64) -> String {
    let mut out = String::new();
    write_members(members, &mut StdRng::seed_from_u64(seed), &mut out);
    out
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("generated invalid JSON {text}: {e}"))
}

/// A name → fingerprint list with repeats, from small alphabets so sets overlap.
fn tool_entries() -> impl Strategy<Value = Vec<(usize, u64)>> {
    prop::collection::vec((0..8usize, 0u64..3), 0..12)
}

fn tool_set(entries: &[(usize, u64)]) -> (ItemSet, BTreeMap<String, u64>) {
    let mut set = ItemSet::new();
    let mut model = BTreeMap::new();
    for &(n, fp) in entries {
        let name = format!("tool{n}");
        let inserted = set.insert(name.as_str().into(), fp);
        // The first definition wins.
        assert_eq!(inserted, !model.contains_key(&name), "insert of {name}");
        model.entry(name).or_insert(fp);
    }
    (set, model)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn fingerprint_ignores_member_order(
        members in tool_tree(),
        seed_a in any::<u64>(),
        seed_b in any::<u64>(),
    ) {
        let a = parse(&tool_text(&members, seed_a));
        let b = parse(&tool_text(&members, seed_b));
        prop_assert_eq!(&a, &b);
        prop_assert_eq!(definition_fingerprint(&a), definition_fingerprint(&b));
    }

    #[test]
    fn fingerprint_ignores_top_level_meta(
        members in tool_tree(),
        meta_a in tree(),
        meta_b in tree(),
        seed_a in any::<u64>(),
        seed_b in any::<u64>(),
    ) {
        let plain = definition_fingerprint(&parse(&tool_text(&members, seed_a)));
        let with = |meta: &Tree, seed| {
            let mut m = members.clone();
            m.push(("_meta".into(), meta.clone()));
            definition_fingerprint(&parse(&tool_text(&m, seed)))
        };
        prop_assert_eq!(with(&meta_a, seed_a), plain);
        prop_assert_eq!(with(&meta_b, seed_b), plain);
    }

    #[test]
    fn fingerprint_sees_a_new_member(members in tool_tree(), key in "[a-z]{1,6}", value in json_string()) {
        prop_assume!(!members.iter().any(|(k, _)| *k == key));
        let before = definition_fingerprint(&parse(&tool_text(&members, 0)));
        let mut m = members.clone();
        m.push((key, Tree::Leaf(Value::String(value))));
        prop_assert_ne!(definition_fingerprint(&parse(&tool_text(&m, 0))), before);
    }

    #[test]
    fn fingerprints_fit_in_53_bits(value in json_value()) {
        prop_assert!(definition_fingerprint(&value) < TWO_POW_53);
    }

    #[test]
    fn list_fingerprint_fits_in_53_bits(entries in tool_entries()) {
        let (set, _) = tool_set(&entries);
        let fp = set.fingerprint();
        prop_assert!(fp < TWO_POW_53);
        prop_assert_eq!((fp as f64) as u64, fp);
    }

    #[test]
    fn diff_with_itself_is_empty(entries in tool_entries()) {
        let (set, _) = tool_set(&entries);
        prop_assert!(ItemSet::diff(&set, &set).is_empty());
    }

    #[test]
    fn diff_is_the_set_differences(server in tool_entries(), cache in tool_entries()) {
        let (s, sm) = tool_set(&server);
        let (c, cm) = tool_set(&cache);
        let d = ItemSet::diff(&s, &c);
        let s_names: BTreeSet<&String> = sm.keys().collect();
        let c_names: BTreeSet<&String> = cm.keys().collect();
        let missing: Vec<String> = s_names.difference(&c_names).map(|n| n.to_string()).collect();
        let extra: Vec<String> = c_names.difference(&s_names).map(|n| n.to_string()).collect();
        let changed: Vec<String> = s_names
            .intersection(&c_names)
            .filter(|n| sm[**n] != cm[**n])
            .map(|n| n.to_string())
            .collect();
        prop_assert_eq!(&d.missing, &missing);
        prop_assert_eq!(&d.extra, &extra);
        prop_assert_eq!(&d.changed, &changed);
        prop_assert_eq!(d.is_empty(), s == c);
        if sm == cm {
            prop_assert_eq!(s.fingerprint(), c.fingerprint());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The generators themselves
// ---------------------------------------------------------------------------------------------

/// Guards against vacuous properties: with a fixed seed, the generators above reach every
/// outcome the properties reason about.
#[test]
fn generators_reach_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let mut kinds = BTreeSet::new();
    for _ in 0..256 {
        let value = rpc_like_payload().new_tree(&mut runner).unwrap().current();
        let text = serde_json::to_vec(&value).unwrap();
        match jsonrpc::decode(&text) {
            Err(_) => {
                kinds.insert("error");
            }
            Ok(messages) => {
                if messages.len() > 1 {
                    kinds.insert("batch");
                }
                for m in messages {
                    kinds.insert(match m {
                        Incoming::Response { outcome: Ok(_), .. } => "result",
                        Incoming::Response {
                            outcome: Err(_), ..
                        } => "rpc error",
                        Incoming::Notification { .. } => "notification",
                        Incoming::Request { .. } => "request",
                    });
                }
            }
        }
    }
    let want = [
        "batch",
        "error",
        "notification",
        "request",
        "result",
        "rpc error",
    ];
    assert_eq!(kinds, want.into_iter().collect(), "decode outcomes reached");

    let rt = runtime();
    let mut outcomes = BTreeSet::new();
    let strategy = (prop::collection::vec(page_spec(), 0..25), tail(), 1u32..=20);
    for _ in 0..256 {
        let (script, tail, max_pages) = strategy.new_tree(&mut runner).unwrap().current();
        let (report, _) = run_walk(&rt, &script, tail, max_pages);
        if report.duplicates > 0 {
            outcomes.insert("duplicates");
        }
        outcomes.insert(match report.result {
            Ok(w) if w.pages > 1 => "complete, several pages",
            Ok(_) => "complete, one page",
            Err(WalkError::RepeatedCursor) => "repeated cursor",
            Err(WalkError::LoopCap) => "loop cap",
            Err(e) if e.is_cursor_error() => "cursor error",
            Err(WalkError::Request { .. }) => "first-page error",
            Err(WalkError::TooManyItems { .. }) => "too many tools",
            Err(WalkError::ListingTooLarge { .. }) => "listing too large",
        });
    }
    let want = [
        "complete, one page",
        "complete, several pages",
        "cursor error",
        "duplicates",
        "first-page error",
        "loop cap",
        "repeated cursor",
    ];
    assert_eq!(
        outcomes,
        want.into_iter().collect(),
        "walk outcomes reached"
    );
}
