//! Secrets given to the real binary (a URL password, a --header value, an API
//! key) appear in none of its outputs, even when the server echoes them back:
//! stdout, stderr, every report format and the stages.jsonl checkpoint.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const URL_PASS: &str = "url-pass-8d3f";
const HEADER_SECRET: &str = "hdr-secret-41c9";
const API_KEY: &str = "sk-apikey-77ab";

/// `alice:url-pass-8d3f` as an HTTP Basic credential.
fn basic() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("alice:{URL_PASS}"))
}

fn secrets() -> Vec<String> {
    vec![
        URL_PASS.into(),
        HEADER_SECRET.into(),
        API_KEY.into(),
        basic(),
    ]
}

/// Reads one request (head and body) from the socket; returns its header block.
fn read_request(sock: &mut TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let end = loop {
        let n = sock.read(&mut tmp).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(end) = common::http::head_end(&buf) {
            break end;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let len = common::http::content_length(&head);
    while buf.len() < end + len {
        let n = sock.read(&mut tmp).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    Some((path, head))
}

fn respond(sock: &mut TcpStream, status: &str, ctype: &str, body: &str) {
    let _ = write!(
        sock,
        "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A server that echoes every request's headers in its errors (and, with
/// `models_fail`, in the pre-flight answer too).
fn echo_server(models_fail: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let n = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(mut sock) = sock else { continue };
            let n = n.clone();
            std::thread::spawn(move || {
                let Some((path, head)) = read_request(&mut sock) else {
                    return;
                };
                let echo = head.replace(['"', '\\'], " ").replace("\r\n", " | ");
                if path.ends_with("/models") {
                    if models_fail {
                        respond(
                            &mut sock,
                            "403 Forbidden",
                            "application/json",
                            &format!("{{\"error\":{{\"message\":\"denied: {echo}\"}}}}"),
                        );
                    } else {
                        respond(
                            &mut sock,
                            "200 OK",
                            "application/json",
                            r#"{"object":"list","data":[{"id":"echo-model","object":"model"}]}"#,
                        );
                    }
                    return;
                }
                match n.fetch_add(1, Ordering::Relaxed) % 3 {
                    0 => respond(
                        &mut sock,
                        "500 Internal Server Error",
                        "application/json",
                        &format!("{{\"message\":\"bad request: {echo}\"}}"),
                    ),
                    1 => {
                        let body = format!(
                            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"hi\"}}}}]}}\n\nevent: error\ndata: {{\"message\":\"in-band echo {echo}\"}}\n\n"
                        );
                        respond(&mut sock, "200 OK", "text/event-stream", &body);
                    }
                    _ => respond(
                        &mut sock,
                        "200 OK",
                        "text/event-stream",
                        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
                    ),
                }
            });
        }
    });
    format!("http://alice:{URL_PASS}@{addr}")
}

fn run(url: &str, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_llmsweep"))
        .env("LLMSWEEP_SECRET_TEST_KEY", API_KEY)
        .args([
            "--target",
            url,
            "--api-key-env",
            "LLMSWEEP_SECRET_TEST_KEY",
            "--header",
            &format!("X-Api-Key: {HEADER_SECRET}"),
            "--profile",
            "synchronous",
            "--max-requests",
            "9",
            "--headless",
            "--export",
            "json,csv,md,html,console,vllm,sglang",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap()
}

fn assert_clean(what: &str, text: &str) {
    for s in secrets() {
        assert!(!text.contains(&s), "{s} leaked into {what}:\n{text}");
    }
}

#[test]
fn no_secret_reaches_any_output_even_when_the_server_echoes_it() {
    let url = echo_server(false);
    let out = std::env::temp_dir().join(format!("llmsweep-secrets-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = run(&url, &out);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_clean("stdout", &stdout);
    assert_clean("stderr", &stderr);
    // The run did see the echoes: its error samples quote the server.
    assert!(stdout.contains("http_500"), "{stdout}");
    assert!(stdout.contains("bad request"), "sample messages: {stdout}");
    // Headless progress shows the first message of each category as it happens.
    assert!(stderr.contains("error http_500 in"), "{stderr}");
    assert!(stdout.contains("alice:***@") || stderr.contains("alice:***@"));
    let mut files = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_clean(&path.display().to_string(), &text);
        files += 1;
    }
    assert!(files >= 8, "every format and the checkpoint: {files} files");
    let report = std::fs::read_to_string(out.join("report.json")).unwrap();
    assert!(report.contains("error_samples"), "{report}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("## Errors") && md.contains("bad request"),
        "{md}"
    );
    assert!(out.join("stages.jsonl").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_failed_preflight_does_not_print_echoed_secrets() {
    let url = echo_server(true);
    let out = std::env::temp_dir().join(format!("llmsweep-secrets-pf-{}", std::process::id()));
    let o = run(&url, &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("403"), "{stderr}");
    assert!(stderr.contains("denied"), "{stderr}");
    assert_clean("stderr", &stderr);
    assert_clean("stdout", &String::from_utf8_lossy(&o.stdout));
    let _ = std::fs::remove_dir_all(&out);
}
