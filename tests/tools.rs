//! Tool calls (`--data …,tools=N,tool_results=K`): requests carry tool
//! definitions and earlier rounds of an agent's loop; the simulator answers
//! a share of them with a streamed tool call (`--tool-call-share`), which
//! the client counts as output and as a call.

use std::sync::Arc;

use llmsweep::client::RequestOutcome;
use llmsweep::data::tools::{spec_of, with_definitions};
use llmsweep::data::{build_prompts_with, Synthetic};
use llmsweep::tokenizer::Builtin;
use llmsweep::types::Api;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod common;
use common::process::{llmsweep, output_beside_runtime, read_report, run, tmpdir, words};

/// A request with tools, answered with a call: the call's pieces are the
/// output (its first piece is the first token), counted as one call.
#[tokio::test]
async fn a_streamed_tool_call_is_output_and_counted_as_a_call() {
    let sim = common::start_sim_with(2.0, |c| c.params.tool_call_share = 1.0).await;
    let spec =
        "prompt_tokens=16,output_tokens=6,samples=1,tools=3,tool_results=1,tool_result_tokens=10";
    let items = Synthetic::parse(spec)
        .unwrap()
        .generate(1, &Builtin)
        .unwrap();
    let t = spec_of(spec).unwrap().unwrap();
    let extra = with_definitions(&t, Api::Chat, None);
    let prompts: Arc<[_]> = build_prompts_with(
        items,
        Api::Chat,
        "llmsweep-sim",
        Some(&extra),
        None,
        Some(&t),
    )
    .unwrap()
    .into();
    let v: Value = serde_json::from_slice(&prompts[0].body).unwrap();
    assert_eq!(v["tools"].as_array().unwrap().len(), 3);
    assert_eq!(v["tool_choice"], "auto");
    let roles: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool"]);
    let client = common::client(&sim.url(), std::time::Duration::from_secs(10));
    let rec = client
        .send(&prompts[0], Instant::now(), &CancellationToken::new())
        .await;
    assert_eq!(rec.outcome, RequestOutcome::Completed, "{:?}", rec.outcome);
    assert_eq!(rec.tool_calls, 1);
    assert_eq!(rec.output_tokens, 6);
    assert_eq!(rec.chunks.len(), 6, "every piece of the call is a token");
    // The server counted the user's text, the tool's result and the tool
    // definitions (their JSON's tokens: prefilled as a real server does).
    let defs: u64 = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| llmsweep::tokenizer::count_tokens(&t.to_string()) as u64)
        .sum();
    assert!(defs > 3 * 30, "{defs}");
    assert_eq!(rec.server_prompt_tokens, Some(16 + 10 + defs));
    assert_eq!(common::truth(&sim.url()).await.tool_calls, 1);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_tools_reports_the_calls_the_server_made() {
    let sim = common::start_sim_with(2.0, |c| c.params.tool_call_share = 0.5).await;
    let out = tmpdir("tools-run");
    let o = run(
        &sim.url(),
        &out,
        &words(
            "--data prompt_tokens=32,output_tokens=8,tools=4,tool_results=1 \
             --profile constant --rate 20 --max-requests 40 --max-seconds 10 \
             --export json,csv,md,html,console",
        ),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let s = &r["stages"][0];
    assert_eq!(s["requests"]["completed"], 40, "{}", s["requests"]);
    assert_eq!(s["errors"].as_object().map_or(0, |e| e.len()), 0);
    let truth = common::truth(&sim.url()).await;
    assert!(
        truth.tool_calls > 5 && truth.tool_calls < 35,
        "{}",
        truth.tool_calls
    );
    let t = &s["tool_calls"];
    assert_eq!(t["tools_per_request"], 4);
    assert_eq!(t["calls"].as_u64().unwrap(), truth.tool_calls, "{t}");
    let measured = s["requests"]["measured"].as_f64().unwrap();
    let share = t["share"].as_f64().unwrap();
    assert!((share - truth.tool_calls as f64 / measured).abs() < 1e-9);
    // Answers that are calls still have their first token.
    assert_eq!(s["ttft_ms"]["count"], 40);
    let console = std::fs::read_to_string(out.join("report-console.txt")).unwrap();
    assert!(console.contains("Tool calls ("), "{console}");
    assert!(std::fs::read_to_string(out.join("report.md"))
        .unwrap()
        .contains("## Tool calls"));
    let mut csv = csv::Reader::from_path(out.join("report.csv")).unwrap();
    assert!(csv
        .headers()
        .unwrap()
        .iter()
        .any(|h| h == "tool_call_share"));
    let _ = std::fs::remove_dir_all(&out);
    // Tools go in chat requests only.
    let o = run(
        &sim.url(),
        &out,
        &["--api", "completions", "--data", "prompt_tokens=8,tools=2"],
    )
    .await;
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("use --api chat"));
    sim.shutdown().await;
}

/// Seen: `tools=2` against the default simulator read 0 tool calls with
/// nothing saying why. The built-in simulator answers requests that carry
/// tools with calls; a server that never calls one is said to have answered
/// in text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_against_the_default_simulators_get_calls_or_a_reason() {
    let out = tmpdir("tools-builtin");
    let args = [
        "--data",
        "prompt_tokens=32,output_tokens=8,tools=2",
        "--profile",
        "constant",
        "--rate",
        "10",
        "--max-requests",
        "30",
        "--export",
        "json,console",
    ];
    let mut cmd = llmsweep();
    cmd.args(args).arg("--headless").arg("--out").arg(&out);
    let o = output_beside_runtime(cmd).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let calls = r["stages"][0]["tool_calls"]["calls"].as_u64().unwrap_or(0);
    assert!(calls > 0, "{}", r["stages"][0]["tool_calls"]);
    // A separate simulator at its defaults never calls a tool: say so.
    let sim = common::start_sim(common::model(1.0, 0.0, 64)).await;
    let out2 = tmpdir("tools-default-sim");
    let o = run(&sim.url(), &out2, &args).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let console = std::fs::read_to_string(out2.join("report-console.txt")).unwrap();
    assert!(console.contains("no answer made a tool call"), "{console}");
    sim.shutdown().await;
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&out2);
}

/// Conversations that use tools: every turn carries the definitions of a
/// tools file, and each user message is followed by the assistant's call
/// and the tool's result; the first message's image goes in every turn's
/// history. A tools file that is not one stops the run before any load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_carry_a_tools_file_s_definitions_calls_and_results() {
    let sim = common::start_sim_with(2.0, |c| c.params.image_tokens = 20).await;
    let out = tmpdir("tools-conv");
    let dir = tmpdir("tools-conv-files");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tools.json");
    std::fs::write(
        &file,
        r#"[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]"#,
    )
    .unwrap();
    let data = format!(
        "prompt_tokens=16,output_tokens=4,turns=3,think_time=0,tools_file={},tool_results=1,tool_result_tokens=10,images=1,image_size=16x16",
        file.display()
    );
    let mut args = vec!["--data", data.as_str()];
    args.extend(words(
        "--profile concurrent --rate 2 --max-requests 4 --max-seconds 10 --export json",
    ));
    let o = run(&sim.url(), &out, &args).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let s = &r["stages"][0];
    let conv = &s["conversations"];
    assert!(conv["completed"].as_u64().unwrap() >= 4, "{conv}");
    assert_eq!(s["errors"].as_object().map_or(0, |e| e.len()), 0, "{s}");
    assert_eq!(
        s["tool_calls"]["tools_per_request"], 2,
        "{}",
        s["tool_calls"]
    );
    let truth = common::truth(&sim.url()).await;
    let turns = s["requests"]["completed"].as_u64().unwrap();
    assert_eq!(truth.images, turns, "one image in every turn's history");
    // Turn 3 holds 3 user messages, 2 replies and 3 tool results (10
    // tokens each) as text; the server adds the definitions and the image.
    let by_turn = conv["by_turn"].as_array().unwrap();
    assert_eq!(by_turn.len(), 3);
    let third = by_turn[2]["prompt_tokens_mean"].as_f64().unwrap();
    assert!(third >= (3 * 16 + 2 * 4) as f64, "{third}");
    let server = s["tokens"]["prompt_mean_server"].as_f64().unwrap();
    let text = s["tokens"]["prompt_mean"].as_f64().unwrap();
    assert!(server > text + 20.0 + 20.0, "{server} vs {text}");
    let _ = std::fs::remove_dir_all(&out);
    // A tools file that is not one: named, before any load.
    common::reset_truth(&sim.url()).await;
    std::fs::write(
        &file,
        r#"[{"type": "function", "function": {"description": "no name"}}]"#,
    )
    .unwrap();
    let err = common::refused_before_load(&sim.url(), &out, &args).await;
    assert!(
        err.contains("tools.json: tool 0, key `function.name`: missing"),
        "{err}"
    );
    clean_up(sim, &[&out, &dir]).await;
}

/// `--api responses` with images and tools, in that API's shapes: the
/// text and `input_image` parts in a user message, flat `function`
/// definitions, a round as `function_call` and `function_call_output`
/// items; the simulator answers with a function call whose streamed
/// arguments (`response.function_call_arguments.delta`) are the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_requests_carry_images_and_tools_and_stream_function_calls() {
    let sim = common::start_sim_with(2.0, |c| {
        c.params.tool_call_share = 1.0;
        c.params.image_tokens = 30;
    })
    .await;
    let spec = "prompt_tokens=16,output_tokens=6,samples=1,tools=3,tool_results=1,tool_result_tokens=10,images=2,image_size=16x16";
    let items = Synthetic::parse(spec)
        .unwrap()
        .generate(1, &Builtin)
        .unwrap();
    let t = spec_of(spec).unwrap().unwrap();
    let im =
        llmsweep::data::images::attach(&llmsweep::data::images::spec_of(spec).unwrap().unwrap(), 5)
            .unwrap();
    let extra = with_definitions(&t, Api::Responses, None);
    let prompts: Arc<[_]> = build_prompts_with(
        items,
        Api::Responses,
        "llmsweep-sim",
        Some(&extra),
        Some(&im),
        Some(&t),
    )
    .unwrap()
    .into();
    let (sent, carried) = llmsweep::data::for_request(&prompts, 0).filled();
    let n = carried.images;
    assert_eq!(n, 2);
    let v: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(v["tools"][0]["type"], "function");
    assert!(v["tools"][0]["name"].is_string() && v["tools"][0].get("function").is_none());
    let input = v["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i.get("type").and_then(Value::as_str).unwrap_or("message"))
        .collect();
    assert_eq!(kinds, ["message", "function_call", "function_call_output"]);
    assert_eq!(input[1]["call_id"], input[2]["call_id"]);
    let parts = input[0]["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "input_text");
    assert_eq!(parts[1]["type"], "input_image");
    assert!(parts[2]["image_url"]
        .as_str()
        .unwrap()
        .starts_with("data:image/png;base64,"));
    let cfg = llmsweep::client::ClientConfig {
        api: Api::Responses,
        ..llmsweep::client::ClientConfig::new(sim.url())
    };
    let client = llmsweep::client::Client::new(&cfg, Arc::new(Builtin)).unwrap();
    let rec = client
        .send(&prompts[0], Instant::now(), &CancellationToken::new())
        .await;
    assert_eq!(rec.outcome, RequestOutcome::Completed, "{:?}", rec.outcome);
    assert_eq!(rec.tool_calls, 1);
    assert_eq!(rec.output_tokens, 6);
    assert_eq!(rec.media.images, 2);
    let defs: u64 = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| llmsweep::tokenizer::count_tokens(&t.to_string()) as u64)
        .sum();
    let args = llmsweep::tokenizer::count_tokens(input[1]["arguments"].as_str().unwrap()) as u64;
    assert_eq!(
        rec.server_prompt_tokens,
        Some(16 + 2 * 30 + args + 10 + defs)
    );
    let truth = common::truth(&sim.url()).await;
    assert_eq!((truth.tool_calls, truth.images), (1, 2));
    // A whole run: every call counted, nothing failed.
    let out = tmpdir("tools-responses");
    let o = run(
        &sim.url(),
        &out,
        &words(
            "--api responses \
             --data prompt_tokens=32,output_tokens=8,tools=2,tool_results=1,images=1,image_size=16x16 \
             --profile constant --rate 20 --max-requests 20 --export json",
        ),
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let s = &r["stages"][0];
    assert_eq!(s["requests"]["completed"], 20, "{}", s["requests"]);
    assert_eq!(s["tool_calls"]["calls"], 20, "{}", s["tool_calls"]);
    assert_eq!(s["images"]["per_request"], 1);
    assert_eq!(s["ttft_ms"]["count"], 20);
    let _ = std::fs::remove_dir_all(&out);
    sim.shutdown().await;
}

/// A file of conversations whose rows bring their tools, images and each
/// turn's tool calls: every turn carries them, the simulator reads them
/// all; a call of a tool the row does not define is named before any load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_s_conversations_carry_their_tools_images_and_calls() {
    let sim = common::start_sim_with(2.0, |c| c.params.image_tokens = 40).await;
    let out = tmpdir("tools-conv-file");
    let dir = tmpdir("tools-conv-file-data");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("map.png"), llmsweep::data::images::png(8, 8, 3)).unwrap();
    let row = r#"{"tools": [{"type": "function", "function": {"name": "route", "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}}], "images": ["map.png"], "turns": [{"user": "how do I get to the station from here", "tool_calls": [{"name": "route", "arguments": {"to": "station"}, "output": "walk north two blocks then turn left"}], "assistant": "Walk north, then left.", "output_tokens": 6}, {"user": "and how long does it take", "output_tokens": 6}]}"#;
    let data = dir.join("agent.jsonl");
    std::fs::write(&data, format!("{row}\n{row}\n")).unwrap();
    let data_arg = data.display().to_string();
    let mut args = vec!["--data", data_arg.as_str()];
    args.extend(words(
        "--profile concurrent --rate 2 --max-requests 4 --max-seconds 10 --export json",
    ));
    let o = run(&sim.url(), &out, &args).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = read_report(&out);
    let s = &r["stages"][0];
    assert!(
        s["conversations"]["completed"].as_u64().unwrap() >= 4,
        "{}",
        s["conversations"]
    );
    assert_eq!(s["errors"].as_object().map_or(0, |e| e.len()), 0, "{s}");
    assert_eq!(
        s["tool_calls"]["tools_per_request"], 1,
        "{}",
        s["tool_calls"]
    );
    assert_eq!(s["images"]["per_request"], 1, "{}", s["images"]);
    let done = s["requests"]["completed"].as_u64().unwrap();
    assert_eq!(common::truth(&sim.url()).await.images, done);
    // The server counts the image, the definition and the call's output.
    let server = s["tokens"]["prompt_mean_server"].as_f64().unwrap();
    let text = s["tokens"]["prompt_mean"].as_f64().unwrap();
    assert!(server > text + 40.0 + 8.0, "{server} vs {text}");
    let _ = std::fs::remove_dir_all(&out);
    // A call of a tool the row does not define: named, before any load.
    common::reset_truth(&sim.url()).await;
    std::fs::write(
        &data,
        format!(
            "{}\n",
            row.replace(
                r#""name": "route", "arguments""#,
                r#""name": "drive", "arguments""#
            )
        ),
    )
    .unwrap();
    let err = common::refused_before_load(&sim.url(), &out, &args).await;
    assert!(err.contains("agent.jsonl, line 1, field `turns[0].tool_calls[0].name`: \"drive\" is not one of the conversation's tools"), "{err}");
    clean_up(sim, &[&out, &dir]).await;
}

/// Stops the simulator and removes the run's directories.
async fn clean_up(sim: llmsweep::sim::SimHandle, dirs: &[&std::path::Path]) {
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    sim.shutdown().await;
}
