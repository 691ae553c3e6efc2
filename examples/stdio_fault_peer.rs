//! A stdio MCP server that misbehaves on demand, for faults no real server produces when asked:
//! it floods stdout, writes a huge line, never answers, exits at once, writes garbage, or
//! ignores the end of stdin. Outside the one fault it follows the stdio transport spec: one
//! JSON-RPC message per line, answers `initialize`, `ping` and `tools/list`, logs to stderr.
//!
//! Usage: `stdio_fault_peer MODE [N]`, MODE one of
//! - `normal`: no fault;
//! - `flood N`: before each answer, N `notifications/tools/list_changed`;
//! - `huge N`: the `tools/list` answer carries an N-byte string (a line over N bytes);
//! - `silent`: reads everything, answers nothing, exits when stdin ends;
//! - `exit N`: exits at once with status N;
//! - `garbage`: before each answer, a line that is not JSON;
//! - `stubborn`: starts a grandchild (`sleep`), reports both pids on stderr, and keeps running
//!   after stdin ends;
//! - `stderr N`: before each answer, N bytes of log lines on stderr.

use std::io::{BufRead, Write};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("normal");
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let out = std::io::stdout();
    let mut out = out.lock();
    match mode {
        "exit" => std::process::exit(n as i32),
        "stubborn" => {
            let mut grandchild = std::process::Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("sleep starts");
            eprintln!("pids {} {}", std::process::id(), grandchild.id());
            std::thread::spawn(move || grandchild.wait());
        }
        _ => {}
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg.get("id"), msg.get("method").and_then(|m| m.as_str()))
        else {
            continue; // a notification or a response
        };
        match mode {
            "silent" => continue,
            "flood" => {
                for _ in 0..n {
                    writeln!(
                        out,
                        r#"{{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}}"#
                    )
                    .unwrap();
                }
            }
            "garbage" => writeln!(out, "hello from a server that prints banners").unwrap(),
            "stderr" => {
                let mut err = std::io::stderr().lock();
                let mut written = 0;
                while written < n {
                    let l = format!("log line at byte {written}\n");
                    err.write_all(l.as_bytes()).unwrap();
                    written += l.len();
                }
            }
            _ => {}
        }
        let result = match method {
            "initialize" => serde_json::json!({
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": true}},
                "serverInfo": {"name": "stdio-fault-peer", "version": "1"},
            }),
            "ping" => serde_json::json!({}),
            "tools/list" if mode == "huge" => {
                serde_json::json!({"tools": [], "padding": "x".repeat(n)})
            }
            "tools/list" => serde_json::json!({"tools": []}),
            _ => {
                let e = serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "Method not found"}});
                writeln!(out, "{e}").unwrap();
                out.flush().unwrap();
                continue;
            }
        };
        let r = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result});
        writeln!(out, "{r}").unwrap();
        out.flush().unwrap();
    }
    if mode == "stubborn" {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
    }
}
