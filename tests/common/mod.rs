//! Shared test harness: the exporter's probe running in-process, its `/metrics` text parsed, and
//! waits on conditions with a deadline (never a sleep-and-hope).
#![allow(dead_code)]

pub mod proxy_lab;
pub mod series;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mcp_exporter::config::{
    Config, Defaults, Endpoint, ProtocolChoice, TargetConfig, TargetSettings,
};
use mcp_exporter::probe::Supervisor;
use mcp_exporter::telemetry::Telemetry;
use mcp_lab::{Behaviour, Lab};

/// How long any condition may take to become true before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// The probe, as the daemon runs it, without the HTTP server.
pub struct Harness {
    pub telemetry: Arc<Telemetry>,
    pub supervisor: Supervisor,
}

impl Harness {
    pub fn new() -> Self {
        let telemetry = Telemetry::new();
        Harness {
            supervisor: Supervisor::new(telemetry.clone()),
            telemetry,
        }
    }

    pub fn apply(&mut self, targets: Vec<TargetConfig>) {
        self.supervisor.apply(&Config {
            global: Defaults::default(),
            targets: targets.into_iter().map(std::sync::Arc::new).collect(),
            ..Config::default()
        });
    }

    pub fn scrape(&self) -> Scrape {
        Scrape::parse(&self.telemetry.render())
    }

    /// Wait until `cond` holds on a fresh scrape; panics with the last scrape after [`DEADLINE`].
    pub async fn until(&self, what: &str, cond: impl Fn(&Scrape) -> bool) -> Scrape {
        let start = tokio::time::Instant::now();
        loop {
            let s = self.scrape();
            if cond(&s) {
                return s;
            }
            if start.elapsed() > DEADLINE {
                panic!(
                    "timed out waiting for: {what}\n--- last scrape ---\n{}",
                    s.text
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Redeploy the lab, then let three audits pass: a change the cache misses must be detected by
/// the first audit after it plus `notification_grace` (shorter than an audit interval here).
pub async fn churn_then_audits(lab: &Lab, h: &Harness, name: &str) -> Scrape {
    let before = series::checks(&h.scrape(), name);
    lab.churn();
    h.until("three audits after the change", |s| {
        series::checks(s, name) >= before + 3.0
    })
    .await
}

/// The lab on an ephemeral loopback port, serving each `(name, behaviour)` at `/<name>/mcp`.
pub async fn start_lab<N: Into<String>>(profiles: impl IntoIterator<Item = (N, Behaviour)>) -> Lab {
    let profiles = profiles.into_iter().map(|(n, b)| (n.into(), b)).collect();
    Lab::start(SocketAddr::from(([127, 0, 0, 1], 0)), profiles)
        .await
        .expect("lab starts")
}

/// A lab serving `b` as profile `name`, and the probe on it with `adjust` applied to the target.
pub async fn lab_and_probe(
    name: &str,
    b: Behaviour,
    adjust: impl FnOnce(&mut TargetConfig),
) -> (Lab, Harness) {
    let lab = start_lab([(name, b)]).await;
    let mut cfg = target(name, lab.url(name));
    adjust(&mut cfg);
    let mut h = Harness::new();
    h.apply(vec![cfg]);
    (lab, h)
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port()
}

/// A target with intervals short enough for tests.
pub fn target(name: &str, url: url::Url) -> TargetConfig {
    TargetConfig {
        name: name.to_string(),
        endpoint: Endpoint::http(url),
        protocol_version: ProtocolChoice::Auto,
        headers: vec![],
        settings: TargetSettings {
            audit_interval: Duration::from_millis(400),
            ping_interval: Duration::from_millis(400),
            request_timeout: Duration::from_secs(5),
            notification_grace: Duration::from_millis(300),
            ..TargetSettings::default()
        },
        probes: vec![],
        http: Default::default(),
        labels: Default::default(),
        pins: None,
    }
}

/// A parsed exposition.
pub struct Scrape {
    pub text: String,
    samples: Vec<prometheus_parse::Sample>,
}

impl Scrape {
    pub fn parse(text: &str) -> Self {
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let parsed = prometheus_parse::Scrape::parse(lines).expect("exposition parses");
        Scrape {
            text: text.to_string(),
            samples: parsed.samples,
        }
    }

    /// The value of the one sample of `name` whose labels include all of `labels`.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .filter(|s| s.metric == name)
            .find(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
    }

    /// Like [`Scrape::get`], 0 when absent is not acceptable: absent reads as NaN (fails comparisons).
    pub fn v(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or(f64::NAN)
    }

    /// A counter's value, 0 while absent: for counters written from their first event (anomalies,
    /// failure reasons, walks by trigger), whose absence *is* 0. Use [`Scrape::v`] where the
    /// series must exist.
    pub fn count(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or(0.0)
    }

    /// A series' value by its kind: a counter (`_total`) reads 0 while absent ([`Scrape::count`]),
    /// a gauge must exist ([`Scrape::v`]).
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        if name.ends_with("_total") {
            self.count(name, labels)
        } else {
            self.v(name, labels)
        }
    }

    /// The `target` label values of the samples of `metric`.
    pub fn targets(&self, metric: &str) -> std::collections::BTreeSet<String> {
        self.samples
            .iter()
            .filter(|s| s.metric == metric)
            .filter_map(|s| s.labels.get("target").map(str::to_string))
            .collect()
    }

    /// Whether any sample carries `target="<name>"`.
    pub fn has_target(&self, name: &str) -> bool {
        self.samples
            .iter()
            .any(|s| s.labels.get("target") == Some(name))
    }
}

/// The exporter binary, killed when dropped; stderr (logs) goes to a temporary file.
pub struct Exporter {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    log: tempfile::NamedTempFile,
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Exporter {
    /// Start the binary with `args` (a free listen address and debug logs are put before them).
    pub fn spawn(args: &[String], envs: &[(&str, &str)]) -> Exporter {
        Self::spawn_under(&[], args, envs)
    }

    /// Like [`Exporter::spawn`], run by `wrapper`, which gets the binary and its arguments
    /// after its own (e.g. `sh -c 'ulimit -n 64 && exec "$0" "$@"'`).
    pub fn spawn_under(wrapper: &[&str], args: &[String], envs: &[(&str, &str)]) -> Exporter {
        use std::process::{Command, Stdio};
        let port = free_port();
        let log = tempfile::NamedTempFile::new().expect("log file");
        let bin = env!("CARGO_BIN_EXE_mcp_exporter");
        let mut cmd = match wrapper.split_first() {
            None => Command::new(bin),
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(bin);
                c
            }
        };
        // Before `args`, so a subcommand (`proxy`) may follow: the daemon's flags go before it.
        cmd.arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=debug")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log.reopen().expect("log file")));
        for (k, v) in envs {
            cmd.env(k, v);
        }
        Exporter {
            child: cmd.spawn().expect("exporter starts"),
            base: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// Send `signal` (`HUP`, `TERM`, ...) to the process.
    pub fn signal(&self, signal: &str) {
        let sent = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal} failed");
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        wait_exit(&mut self.child)
    }

    /// Everything logged so far.
    pub fn logs(&self) -> String {
        use std::io::Read;
        let mut s = String::new();
        let _ = self.log.reopen().expect("log file").read_to_string(&mut s);
        s
    }

    /// `POST /-/reload` (served with `--web.enable-lifecycle`).
    pub async fn reload(&self) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}/-/reload", self.base))
            .send()
            .await
            .expect("the reload request gets an answer")
    }

    /// A reload that must be refused: 500, with every one of `names` in its answer; returns the
    /// scrape once the failure is recorded.
    pub async fn refused_reload(&self, names: &[&str]) -> Scrape {
        let resp = self.reload().await;
        assert_eq!(resp.status(), 500);
        let body = resp.text().await.unwrap();
        assert!(names.iter().all(|n| body.contains(n)), "{body}");
        self.until_metrics("reload failure recorded", |s| {
            s.v("mcp_exporter_config_last_reload_successful", &[]) == 0.0
        })
        .await
    }

    /// Wait until `cond` holds on a scrape of `/metrics`.
    pub async fn until_metrics(&self, what: &str, cond: impl Fn(&Scrape) -> bool) -> Scrape {
        self.until_get("/metrics", DEADLINE, what, |t| Some(Scrape::parse(t)), cond)
            .await
    }

    /// Poll `path` until its body, read by `parse`, satisfies `cond`; panics with the logs after
    /// `deadline`.
    pub async fn until_get<T>(
        &self,
        path: &str,
        deadline: Duration,
        what: &str,
        parse: impl Fn(&str) -> Option<T>,
        cond: impl Fn(&T) -> bool,
    ) -> T {
        let start = tokio::time::Instant::now();
        loop {
            if let Some(text) = get(&format!("{}{path}", self.base)).await
                && let Some(v) = parse(&text)
                && cond(&v)
            {
                return v;
            }
            assert!(
                start.elapsed() < deadline,
                "timed out waiting for {what} on {path}\n--- logs ---\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The body of a GET, or `None` on any failure.
pub async fn get(url: &str) -> Option<String> {
    reqwest::get(url).await.ok()?.text().await.ok()
}

/// Read until the server closes the connection (EOF or reset); false if it is still open
/// after [`DEADLINE`].
pub async fn closed_by_server(conn: &mut (impl tokio::io::AsyncRead + Unpin)) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    let until_closed = async {
        while let Ok(n) = conn.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::time::timeout(DEADLINE, until_closed).await.is_ok()
}

/// The exit status of `child`; panics if it is still running after [`DEADLINE`].
pub fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        assert!(start.elapsed() < DEADLINE, "the process did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The example binaries, built once per test run (a no-op when they are fresh): `cargo test
/// --test transports` alone does not build examples.
pub fn example(name: &str) -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--example", "rmcp_stdio_peer"])
            .args(["--example", "stdio_fault_peer"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the example peers failed");
    });
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/<test>-<hash> → target/debug/examples/<name>
    exe.parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples")
        .join(name)
}
