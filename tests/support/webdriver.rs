//! A real headless Chromium, driven over W3C WebDriver by the distribution's chromedriver
//! (`scripts/chromium.sh` installs both). WebDriver is plain HTTP and JSON, so the few commands
//! the page tests need are sent with the reqwest the crate already has.
//!
//! Without Chromium the tests are skipped with a note; under CI (`CI` set) they fail.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

/// The browser and its driver, if installed.
pub fn installed() -> Option<(PathBuf, PathBuf)> {
    let browser = std::env::var_os("AGENT_MCP_TEST_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromium".into());
    let driver = std::env::var_os("AGENT_MCP_TEST_CHROMEDRIVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromedriver".into());
    if browser.exists() && driver.exists() {
        return Some((browser, driver));
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "Chromium ({}) or chromedriver ({}) is missing, and CI must run the page tests: \
             run `bash scripts/chromium.sh` first (scripts/test.sh does)",
            browser.display(),
            driver.display()
        );
    }
    eprintln!(
        "SKIPPED: no Chromium for this test; run `bash scripts/chromium.sh` (as root it \
         installs chromium and chromium-driver) to include it"
    );
    None
}

/// One browser session: chromedriver on its own port, Chromium with a fresh profile.
pub struct Browser {
    driver: tokio::process::Child,
    url: String,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start(browser: &std::path::Path, driver: &std::path::Path) -> Browser {
        let port = super::harness::free_port();
        let child = tokio::process::Command::new(driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        super::harness::eventually(Duration::from_secs(20), "chromedriver ready", || {
            let http = http.clone();
            let url = url.clone();
            async move {
                let status: Value = http
                    .get(format!("{url}/status"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                status["value"]["ready"].as_bool().filter(|r| *r)
            }
        })
        .await;
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1400,1500".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let created: Value = http
            .post(format!("{url}/session"))
            .json(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": browser, "args": args},
            }}}))
            .send()
            .await
            .expect("create a session")
            .json()
            .await
            .expect("session JSON");
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Browser {
            driver: child,
            url,
            session,
            http,
            _profile: profile,
        }
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        match self.try_command(method, path, body).await {
            Ok(value) => value,
            Err((error, message)) => panic!("WebDriver {path}: {error}: {message}"),
        }
    }

    /// A command's value, or its WebDriver error and message.
    async fn try_command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, (String, String)> {
        let url = format!("{}/session/{}{path}", self.url, self.session);
        let request = self.http.request(method, &url);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        let answer: Value = request
            .send()
            .await
            .expect("WebDriver answers")
            .json()
            .await
            .expect("WebDriver JSON");
        match answer["value"]["error"].as_str() {
            Some(error) => Err((error.to_owned(), answer["value"]["message"].to_string())),
            None => Ok(answer["value"].clone()),
        }
    }

    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page: its return value.
    pub async fn eval(&self, script: &str, args: Value) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// Clicks the first element matching the CSS `selector`. The page redraws what it shows
    /// on every pushed change, so an element found may be replaced before the click lands: it
    /// is found again then.
    pub async fn click(&self, selector: &str) {
        for _ in 0..20 {
            let found = self
                .command(
                    reqwest::Method::POST,
                    "/element",
                    Some(json!({"using": "css selector", "value": selector})),
                )
                .await;
            let id = found
                .as_object()
                .and_then(|o| o.values().next())
                .and_then(Value::as_str)
                .expect("an element id")
                .to_owned();
            match self
                .try_command(
                    reqwest::Method::POST,
                    &format!("/element/{id}/click"),
                    Some(json!({})),
                )
                .await
            {
                Ok(_) => return,
                Err((error, _)) if error == "stale element reference" => continue,
                Err((error, message)) => panic!("WebDriver click {selector}: {error}: {message}"),
            }
        }
        panic!("{selector} was redrawn under every click");
    }

    /// Waits until `script` returns something other than null or false; returns it.
    pub async fn wait_for(&self, what: &str, script: &str, args: Value) -> Value {
        super::harness::eventually(Duration::from_secs(30), what, || {
            let args = args.clone();
            async move {
                let v = self.eval(script, args).await;
                (!v.is_null() && v != Value::Bool(false)).then_some(v)
            }
        })
        .await
    }

    /// A PNG of the window.
    pub async fn screenshot(&self) -> Vec<u8> {
        let shot = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().expect("base64 PNG"))
            .expect("a PNG")
    }

    pub async fn quit(mut self) {
        let url = format!("{}/session/{}", self.url, self.session);
        let _ = self.http.delete(url).send().await;
        let _ = self.driver.kill().await;
    }
}
