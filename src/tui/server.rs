//! The server view: what the target's Prometheus `/metrics` says about its
//! queue and KV cache (vLLM's metric names; SGLang's where they differ).

use std::time::Duration;

/// The figures the server view shows; None where the server does not report them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerMetrics {
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// 0..1
    pub kv_cache_usage: Option<f64>,
    pub prompt_tokens_total: Option<f64>,
    pub generation_tokens_total: Option<f64>,
}

/// Sums a metric over all its label sets.
fn metric(text: &str, names: &[&str]) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((name_labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = name_labels.split('{').next().unwrap_or("").trim();
        if names.contains(&name) {
            if let Ok(v) = value.trim().parse::<f64>() {
                *found.get_or_insert(0.0) += v;
            }
        }
    }
    found
}

pub fn parse(text: &str) -> ServerMetrics {
    ServerMetrics {
        running: metric(
            text,
            &["vllm:num_requests_running", "sglang:num_running_reqs"],
        ),
        waiting: metric(
            text,
            &["vllm:num_requests_waiting", "sglang:num_queue_reqs"],
        ),
        kv_cache_usage: metric(
            text,
            &[
                "vllm:kv_cache_usage_perc",
                "vllm:gpu_cache_usage_perc",
                "sglang:token_usage",
            ],
        ),
        prompt_tokens_total: metric(
            text,
            &["vllm:prompt_tokens_total", "sglang:prompt_tokens_total"],
        ),
        generation_tokens_total: metric(
            text,
            &[
                "vllm:generation_tokens_total",
                "sglang:generation_tokens_total",
            ],
        ),
    }
}

/// Polls `base/metrics` every two seconds; sends what it finds (None when the
/// target has no usable /metrics). Ends when the receiver is gone.
pub async fn poll(base_url: String, tx: tokio::sync::mpsc::UnboundedSender<Option<ServerMetrics>>) {
    let Ok(http) = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
    else {
        return;
    };
    let url = format!("{base_url}/metrics");
    loop {
        let m = match http.get(&url).send().await {
            Ok(r) if r.status().is_success() => r.text().await.ok().map(|t| parse(&t)),
            _ => None,
        };
        let m = m.filter(|m| m.running.is_some() || m.kv_cache_usage.is_some());
        if tx.send(m).is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vllm_metrics_and_sums_label_sets() {
        let text = "# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\n\
vllm:num_requests_running{model_name=\"a\"} 3\nvllm:num_requests_running{model_name=\"b\"} 2\n\
vllm:num_requests_waiting{model_name=\"a\"} 7\nvllm:gpu_cache_usage_perc{model_name=\"a\"} 0.25\n";
        let m = parse(text);
        assert_eq!(m.running, Some(5.0));
        assert_eq!(m.waiting, Some(7.0));
        assert_eq!(m.kv_cache_usage, Some(0.25));
        assert_eq!(m.prompt_tokens_total, None);
        assert_eq!(parse("garbage\n\n{}"), ServerMetrics::default());
    }
}
