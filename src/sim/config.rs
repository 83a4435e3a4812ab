//! Simulator settings: the command-line surface of `llmsweep sim` and the
//! resolved model the server runs with.

use std::time::Duration;

use clap::{Args, ValueEnum};

/// A starting point for the latency model; any explicit flag overrides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Preset {
    /// An 8B-class model on one GPU: ~8 ms inter-token latency alone, a knee near
    /// 40 req/s with 256-token prompts and 128-token outputs.
    #[default]
    Realistic,
    /// Near-zero latency and no batch limit: for measuring the load generator itself.
    Fast,
}

/// `llmsweep sim`: an OpenAI-compatible server with a continuous-batching latency model.
#[derive(Debug, Clone, Args)]
pub struct SimArgs {
    /// Address to bind. Loopback unless you mean it.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to bind (0 picks a free one and prints it).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Latency-model preset; the flags below override single parameters.
    #[arg(long, value_enum, default_value_t = Preset::Realistic)]
    pub preset: Preset,
    /// Model ids served at /v1/models and accepted in requests, comma-separated
    /// (`a,b`: one model under several names, as vLLM's --served-model-name).
    #[arg(long, default_value = "llmsweep-sim")]
    pub served_model_name: String,
    /// LoRA adapters, NAME=PATH each, served under their own names and listed
    /// at /v1/models with the base model as `parent`, as vLLM's --lora-modules.
    #[arg(long, num_args = 1.., value_name = "NAME=PATH")]
    pub lora_modules: Vec<String>,
    /// Embeddings, rerank and score: milliseconds a request costs the pooling
    /// engine, which runs one request at a time (default 2; fast preset 0).
    #[arg(long, value_name = "MS")]
    pub pool_step_ms: Option<f64>,
    /// Embeddings, rerank and score: microseconds each input token adds
    /// (default 20; fast preset 0).
    #[arg(long, value_name = "US")]
    pub pool_per_token_us: Option<f64>,
    /// Worker threads for the server runtime (default: all cores).
    #[arg(long)]
    pub workers: Option<usize>,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub faults: FaultArgs,

    #[command(flatten)]
    pub gpu: GpuArgs,

    /// Seed for output lengths, output text, step jitter and fault draws.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// Latency-model parameters. Unset ones come from the preset.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Latency model (continuous batching)")]
pub struct ModelArgs {
    /// Fixed time of one decode step, in ms (every running sequence gets one token a step).
    #[arg(long, value_name = "MS")]
    pub decode_step_ms: Option<f64>,
    /// Extra step time per running sequence, in µs.
    #[arg(long, value_name = "US")]
    pub per_seq_us: Option<f64>,
    /// Prefill time per prompt token admitted in a step, in µs.
    #[arg(long, value_name = "US")]
    pub prefill_us_per_token: Option<f64>,
    /// Front-end cost per request held, in µs: every request the server
    /// holds (waiting or running) adds this to each engine step, as an API
    /// server sharing the engine's one core does (vLLM on a CPU). A flood
    /// then completes far less than the capacity, and a rate just above the
    /// capacity collapses as its queue grows.
    #[arg(long, value_name = "US")]
    pub frontend_us: Option<f64>,
    /// Maximum running sequences (vLLM's --max-num-seqs); the rest wait in a queue.
    #[arg(long, value_name = "N")]
    pub max_num_seqs: Option<usize>,
    /// LoRA adapters one batch may hold (vLLM's --max-loras, default 1): a
    /// request for another adapter waits (deferred) however idle the batch.
    #[arg(long, value_name = "N")]
    pub max_loras: Option<usize>,
    /// KV-cache budget in tokens: a request reserves prompt + output tokens while it runs.
    #[arg(long, value_name = "TOKENS")]
    pub kv_cache_tokens: Option<u64>,
    /// Random step-time noise, as a fraction (0.05 = ±5 %).
    #[arg(long, value_name = "FRACTION")]
    pub jitter: Option<f64>,
    /// Mean output length when the request does not fix it (max_tokens + ignore_eos).
    #[arg(long, value_name = "TOKENS")]
    pub output_len_mean: Option<f64>,
    /// Standard deviation of the sampled output length.
    #[arg(long, value_name = "TOKENS")]
    pub output_len_stdev: Option<f64>,
    /// Tokens per streamed chunk (vLLM's --stream-interval); >1 sends multi-token chunks.
    #[arg(long, value_name = "N")]
    pub stream_interval: Option<u32>,
    /// How jittered completions are: each running sequence idles a step with
    /// probability j/(1+j), so requests admitted together finish spread out
    /// instead of in lock-step (0, the default, is lock-step, like a real
    /// server with fixed-length outputs).
    #[arg(long, value_name = "FRACTION")]
    pub completion_jitter: Option<f64>,
    /// Turn off the prefix cache (on by default, as in vLLM, SGLang and
    /// llama.cpp): prompts that share leading 16-token blocks with an earlier
    /// prompt skip their prefill and report `cached_tokens` in usage.
    #[arg(long)]
    pub no_prefix_cache: bool,
    /// Answer 404 to POST /reset_prefix_cache, as vLLM does unless started with
    /// VLLM_SERVER_DEV_MODE=1 (by default the route empties the prefix cache).
    #[arg(long)]
    pub no_cache_reset_route: bool,
    /// Keep generating requests whose client went away (llama.cpp-like), instead
    /// of freeing their slot at the next step (vLLM-like, the default).
    #[arg(long)]
    pub finish_cancelled: bool,
    /// Think first, like a reasoning model behind vLLM's or SGLang's reasoning
    /// parser: this many tokens (the mean, with --reasoning-tokens-stdev) stream
    /// as `reasoning_content` before the answer, counted in `max_tokens` and in
    /// `usage.completion_tokens_details.reasoning_tokens`. Chat and Responses
    /// API only; a request with `chat_template_kwargs.enable_thinking = false`
    /// does not think. Default 0: no thinking.
    #[arg(long, value_name = "TOKENS")]
    pub reasoning_tokens: Option<f64>,
    /// Standard deviation of the sampled thinking length (0: every request thinks
    /// exactly --reasoning-tokens).
    #[arg(long, value_name = "TOKENS")]
    pub reasoning_tokens_stdev: Option<f64>,
    /// Prompt tokens an image costs (an `image_url` part of a chat message),
    /// prefilled and counted in `usage.prompt_tokens` (default 576: a
    /// 336-pixel image of LLaVA-1.5; Qwen2-VL charges one per 28×28 pixels).
    #[arg(long, value_name = "TOKENS")]
    pub image_tokens: Option<u64>,
    /// Prompt tokens a second of audio costs (an `input_audio` part of a
    /// chat message, a WAV file: its length from its header; default 25,
    /// Qwen2-Audio's).
    #[arg(long, value_name = "TOKENS")]
    pub audio_tokens: Option<u64>,
    /// Prompt tokens a frame of video costs (a `video_url` part of a chat
    /// message: a `video/jpeg` data URL's frames, as vLLM takes them; a clip
    /// in another form counts as one frame; default 196, LLaVA-OneVision's).
    #[arg(long, value_name = "TOKENS")]
    pub frame_tokens: Option<u64>,
    /// The share of chat requests that carry `tools` the model answers with
    /// a tool call (its arguments streamed as `tool_calls` deltas) instead of
    /// text (default 0).
    #[arg(long, value_name = "FRACTION")]
    pub tool_call_share: Option<f64>,
}

/// Simulated GPUs: a DCGM exporter's page whose power follows the load.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Simulated GPUs (a DCGM exporter page at /dcgm-metrics)")]
pub struct GpuArgs {
    /// Serve a DCGM exporter's page at /dcgm-metrics for N GPUs (0: none), for
    /// `llmsweep --gpu-metrics URL/dcgm-metrics`.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub gpus: u32,
    /// Each simulated GPU's power when nothing is generated, in W.
    #[arg(long, value_name = "W", default_value_t = 70.0)]
    pub gpu_idle_watts: f64,
    /// Energy per generated token, in J, shared by the GPUs.
    #[arg(long, value_name = "J", default_value_t = 0.15)]
    pub gpu_joules_per_token: f64,
    /// Also serve the GPUs' page at /metrics of this port, as dcgm-exporter
    /// runs beside the server (0 picks a free one and prints it).
    #[arg(long, value_name = "PORT")]
    pub dcgm_port: Option<u16>,
}

/// Fault injection: each flag is the fraction of requests that get that fault.
/// Draws are seeded per request, so a run is reproducible.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Fault injection (rates between 0 and 1)")]
pub struct FaultArgs {
    /// Answer HTTP 500 with a JSON error body.
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_500: f64,
    /// Answer HTTP 429 (rate limited) with Retry-After.
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_429: f64,
    /// Answer HTTP 503 (overloaded).
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_503: f64,
    /// Drop the connection in the middle of the stream.
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_drop: f64,
    /// Stop sending in the middle of the stream without closing the connection.
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_stall: f64,
    /// Send one malformed SSE line (invalid UTF-8) in the middle of the stream.
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_malformed: f64,
    /// Send one `data:` event whose payload is not JSON.
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_non_json: f64,
    /// Send an in-band `{"error": ...}` event, then end the stream.
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_error_event: f64,
    /// End the stream with `[DONE]` before any token (an empty answer).
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_empty: f64,
    /// Send one enormous chunk (1 MiB of text) in the middle of the stream.
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_huge_chunk: f64,
    /// Delay the response headers by --slow-headers-ms.
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
    pub fault_slow_headers: f64,
    /// Header delay for --fault-slow-headers, in ms.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub slow_headers_ms: u64,
    /// Close the connection after every streamed response while advertising
    /// `Keep-Alive: timeout=5, max=100`, as llama.cpp's server does.
    #[arg(long)]
    pub close_after_stream: bool,
    /// Advertise `Keep-Alive: timeout=5, max=N` and close each connection
    /// after its N-th response, which says `Connection: close`.
    #[arg(long, value_name = "N")]
    pub keep_alive_max: Option<u32>,
}

/// The longest thinking `--reasoning-tokens` allows (the simulated context).
const MAX_REASONING_TOKENS: f64 = (1u64 << 20) as f64;

/// `v`, the value of `--name`, when finite and in `range`; else the error
/// that says it must be `what`.
fn within(
    v: f64,
    name: &str,
    range: std::ops::RangeInclusive<f64>,
    what: &str,
) -> Result<f64, String> {
    if v.is_finite() && range.contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "--{name} must be {what}, got {}",
            crate::typed::number(v)
        ))
    }
}

/// The resolved latency model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelParams {
    pub decode_step: Duration,
    pub per_seq: Duration,
    pub prefill_per_token: Duration,
    /// Added to each step per request held, waiting or running (`--frontend-us`).
    pub frontend_per_request: Duration,
    pub max_num_seqs: usize,
    /// LoRA adapters one batch may hold (vLLM's `--max-loras`).
    pub max_loras: usize,
    pub kv_cache_tokens: u64,
    pub jitter: f64,
    pub output_len_mean: f64,
    pub output_len_stdev: f64,
    pub stream_interval: u32,
    /// Per-step idle chance j/(1+j) of a running sequence (0: lock-step).
    pub completion_jitter: f64,
    /// Serve shared leading prompt blocks from a cache (see `batcher::PrefixCache`).
    pub prefix_cache: bool,
    /// Serve POST /reset_prefix_cache (vLLM's, with VLLM_SERVER_DEV_MODE=1).
    pub cache_reset_route: bool,
    /// Cancelled requests run to their end, holding their slot.
    pub finish_cancelled: bool,
    /// Mean thinking tokens before the answer (0: the model does not think).
    pub reasoning_tokens_mean: f64,
    /// Their standard deviation (0: a fixed number).
    pub reasoning_tokens_stdev: f64,
    /// Prompt tokens an image part costs, a second of audio, a frame of
    /// video.
    pub image_tokens: u64,
    pub audio_tokens: u64,
    pub frame_tokens: u64,
    /// The share of requests with `tools` answered with a tool call.
    pub tool_call_share: f64,
}

impl ModelParams {
    /// What an image, a second of audio and a frame of video cost.
    pub fn media_cost(&self) -> super::media::MediaCost {
        super::media::MediaCost {
            image: self.image_tokens,
            audio_per_s: self.audio_tokens,
            frame: self.frame_tokens,
        }
    }

    pub fn preset(preset: Preset) -> Self {
        match preset {
            Preset::Realistic => ModelParams {
                decode_step: Duration::from_micros(8_000),
                per_seq: Duration::from_micros(120),
                prefill_per_token: Duration::from_nanos(10_000),
                frontend_per_request: Duration::ZERO,
                max_num_seqs: 128,
                max_loras: 1,
                kv_cache_tokens: 131_072,
                jitter: 0.05,
                output_len_mean: 128.0,
                output_len_stdev: 32.0,
                stream_interval: 1,
                completion_jitter: 0.0,
                prefix_cache: true,
                cache_reset_route: true,
                finish_cancelled: false,
                reasoning_tokens_mean: 0.0,
                reasoning_tokens_stdev: 0.0,
                image_tokens: 576,
                audio_tokens: 25,
                frame_tokens: 196,
                tool_call_share: 0.0,
            },
            Preset::Fast => ModelParams {
                decode_step: Duration::ZERO,
                per_seq: Duration::ZERO,
                prefill_per_token: Duration::ZERO,
                frontend_per_request: Duration::ZERO,
                max_num_seqs: 1 << 20,
                max_loras: 1,
                kv_cache_tokens: u64::MAX / 4,
                jitter: 0.0,
                output_len_mean: 16.0,
                output_len_stdev: 0.0,
                stream_interval: 1,
                completion_jitter: 0.0,
                prefix_cache: false,
                cache_reset_route: true,
                finish_cancelled: false,
                reasoning_tokens_mean: 0.0,
                reasoning_tokens_stdev: 0.0,
                image_tokens: 576,
                audio_tokens: 25,
                frame_tokens: 196,
                tool_call_share: 0.0,
            },
        }
    }

    /// Preset values overlaid with the flags the user gave.
    pub fn resolve(preset: Preset, args: &ModelArgs) -> Result<Self, String> {
        let mut p = Self::preset(preset);
        p.set_times(args)?;
        p.set_capacity(args)?;
        p.set_lengths(args)?;
        if args.no_prefix_cache {
            p.prefix_cache = false;
        }
        if args.no_cache_reset_route {
            p.cache_reset_route = false;
        }
        if args.finish_cancelled {
            p.finish_cancelled = true;
        }
        if let Some(v) = args.stream_interval {
            if v == 0 {
                return Err("--stream-interval must be at least 1".into());
            }
            p.stream_interval = v;
        }
        for (flag, given, to) in [
            ("--image-tokens", args.image_tokens, &mut p.image_tokens),
            ("--audio-tokens", args.audio_tokens, &mut p.audio_tokens),
            ("--frame-tokens", args.frame_tokens, &mut p.frame_tokens),
        ] {
            let Some(v) = given else { continue };
            // The simulated context (`request::MAX_TOKENS`).
            if v > 1 << 20 {
                return Err(format!(
                    "{flag} {v} is more than the simulated context of 1048576 tokens"
                ));
            }
            *to = v;
        }
        if let Some(v) = args.tool_call_share {
            p.tool_call_share = within(v, "tool-call-share", 0.0..=1.0, "from 0 to 1")?;
        }
        Ok(p)
    }

    /// The step's times (`--decode-step-ms`, `--per-seq-us`,
    /// `--prefill-us-per-token`) and their jitter.
    fn set_times(&mut self, args: &ModelArgs) -> Result<(), String> {
        // Up to an hour: a model step longer than that is a typo, and
        // `Duration` cannot hold every finite number.
        let ms = |v: f64, name: &str| -> Result<Duration, String> {
            let what = "a number of milliseconds from 0 to 3600000 (an hour)";
            let v = within(v, name, 0.0..=3_600_000.0, what)?;
            Duration::try_from_secs_f64(v / 1000.0).map_err(|e| format!("--{name}: {e}"))
        };
        if let Some(v) = args.decode_step_ms {
            self.decode_step = ms(v, "decode-step-ms")?;
        }
        if let Some(v) = args.per_seq_us {
            self.per_seq = ms(v / 1000.0, "per-seq-us")?;
        }
        if let Some(v) = args.prefill_us_per_token {
            self.prefill_per_token = ms(v / 1000.0, "prefill-us-per-token")?;
        }
        if let Some(v) = args.frontend_us {
            self.frontend_per_request = ms(v / 1000.0, "frontend-us")?;
        }
        if let Some(v) = args.jitter {
            if !(0.0..1.0).contains(&v) {
                return Err(format!(
                    "--jitter must be in [0, 1), got {}",
                    crate::typed::number(v)
                ));
            }
            self.jitter = v;
        }
        Ok(())
    }

    /// How many sequences run at once and the KV cache they share.
    fn set_capacity(&mut self, args: &ModelArgs) -> Result<(), String> {
        if let Some(v) = args.max_num_seqs {
            if v == 0 {
                return Err("--max-num-seqs must be at least 1".into());
            }
            self.max_num_seqs = v;
        }
        if let Some(v) = args.max_loras {
            if v == 0 {
                return Err("--max-loras must be at least 1".into());
            }
            self.max_loras = v;
        }
        if let Some(v) = args.kv_cache_tokens {
            if v == 0 {
                return Err("--kv-cache-tokens must be at least 1".into());
            }
            self.kv_cache_tokens = v;
        }
        Ok(())
    }

    /// Output and thinking lengths, and the completion jitter.
    fn set_lengths(&mut self, args: &ModelArgs) -> Result<(), String> {
        if let Some(v) = args.output_len_mean {
            self.output_len_mean = within(v, "output-len-mean", 1.0..=1e9, "at least 1")?;
        }
        if let Some(v) = args.output_len_stdev {
            self.output_len_stdev = within(v, "output-len-stdev", 0.0..=1e9, "non-negative")?;
        }
        if let Some(v) = args.completion_jitter {
            self.completion_jitter = within(v, "completion-jitter", 0.0..=10.0, "in [0, 10]")?;
        }
        for (v, name, slot) in [
            (
                args.reasoning_tokens,
                "reasoning-tokens",
                &mut self.reasoning_tokens_mean,
            ),
            (
                args.reasoning_tokens_stdev,
                "reasoning-tokens-stdev",
                &mut self.reasoning_tokens_stdev,
            ),
        ] {
            if let Some(v) = v {
                let what = format!("a number of tokens from 0 to {MAX_REASONING_TOKENS}");
                *slot = within(v, name, 0.0..=MAX_REASONING_TOKENS, &what)?;
            }
        }
        Ok(())
    }

    /// The thinking length of one request: fixed, or sampled from a normal
    /// distribution (rounded, at least 0). Draws from `rng` only when the
    /// model thinks, so runs without thinking keep their seeded draws.
    pub fn reasoning_len(&self, rng: &mut impl rand::Rng) -> u64 {
        use rand_distr::{Distribution, Normal};
        if self.reasoning_tokens_mean <= 0.0 && self.reasoning_tokens_stdev <= 0.0 {
            return 0;
        }
        let v = if self.reasoning_tokens_stdev > 0.0 {
            Normal::new(self.reasoning_tokens_mean, self.reasoning_tokens_stdev)
                .map(|d| d.sample(rng))
                .unwrap_or(self.reasoning_tokens_mean)
        } else {
            self.reasoning_tokens_mean
        };
        v.round().max(0.0) as u64
    }

    /// Step time for a batch of `running` sequences that admits `prefill_tokens`
    /// prompt tokens while `waiting` more wait for a slot, before jitter.
    pub fn step_time(&self, running: usize, waiting: usize, prefill_tokens: u64) -> Duration {
        let held = u32::try_from(running.saturating_add(waiting)).unwrap_or(u32::MAX);
        self.decode_step
            + self.per_seq * running as u32
            + self.frontend_per_request * held
            + self.prefill_per_token * u32::try_from(prefill_tokens).unwrap_or(u32::MAX)
    }
}

/// A name the simulator serves, as `/v1/models` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedModel {
    pub id: String,
    /// What it was loaded from: the base model's name, or an adapter's path.
    pub root: String,
    /// An adapter's base model (None for the base model's own names).
    pub parent: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_preset() {
        let args = ModelArgs {
            decode_step_ms: Some(2.5),
            max_num_seqs: Some(4),
            ..Default::default()
        };
        let p = ModelParams::resolve(Preset::Realistic, &args).unwrap();
        assert_eq!(p.decode_step, Duration::from_micros(2500));
        assert_eq!(p.max_num_seqs, 4);
        assert_eq!(p.per_seq, Duration::from_micros(120));
    }

    #[test]
    fn bad_values_are_refused_with_the_flag_name() {
        let args = ModelArgs {
            decode_step_ms: Some(-1.0),
            ..Default::default()
        };
        let err = ModelParams::resolve(Preset::Fast, &args).unwrap_err();
        assert!(err.contains("--decode-step-ms"), "{err}");
        let args = ModelArgs {
            stream_interval: Some(0),
            ..Default::default()
        };
        assert!(ModelParams::resolve(Preset::Fast, &args).is_err());
    }

    /// Any number a user can type gives a model or a one-line error, never
    /// a panic (`Duration` cannot hold 1e300 ms).
    #[test]
    fn every_number_gives_a_model_or_an_error() {
        type Set = fn(&mut ModelArgs, f64);
        let flags: [(&str, Set); 10] = [
            ("decode-step-ms", |a, v| a.decode_step_ms = Some(v)),
            ("per-seq-us", |a, v| a.per_seq_us = Some(v)),
            ("frontend-us", |a, v| a.frontend_us = Some(v)),
            ("prefill-us-per-token", |a, v| {
                a.prefill_us_per_token = Some(v)
            }),
            ("jitter", |a, v| a.jitter = Some(v)),
            ("output-len-mean", |a, v| a.output_len_mean = Some(v)),
            ("output-len-stdev", |a, v| a.output_len_stdev = Some(v)),
            ("completion-jitter", |a, v| a.completion_jitter = Some(v)),
            ("reasoning-tokens", |a, v| a.reasoning_tokens = Some(v)),
            ("reasoning-tokens-stdev", |a, v| {
                a.reasoning_tokens_stdev = Some(v)
            }),
        ];
        for (name, set) in flags {
            for v in [0.0, -1.0, f64::NAN, 1e-300, 1e300, f64::INFINITY] {
                let mut args = ModelArgs::default();
                set(&mut args, v);
                let r = std::panic::catch_unwind(|| ModelParams::resolve(Preset::Fast, &args))
                    .unwrap_or_else(|_| panic!("--{name} {v} panicked"));
                if let Err(e) = r {
                    assert!(e.contains(name) && !e.contains("0000000000"), "{e}");
                } else {
                    assert!((0.0..1e300).contains(&v), "--{name} {v} accepted");
                }
            }
        }
    }

    #[test]
    fn a_front_end_cost_slows_every_step_by_the_requests_held() {
        let args = ModelArgs {
            frontend_us: Some(200.0),
            ..Default::default()
        };
        let p = ModelParams::resolve(Preset::Realistic, &args).unwrap();
        let base = p.step_time(16, 0, 0);
        // 512 requests held (a flood): 16 running, 496 waiting.
        let flood = p.step_time(16, 496, 0);
        assert_eq!(flood - base, Duration::from_micros(200 * 496));
        let none = ModelParams::preset(Preset::Realistic);
        assert_eq!(none.step_time(16, 496, 0), none.step_time(16, 0, 0));
    }

    #[test]
    fn realistic_preset_has_its_knee_at_a_few_tens_of_requests_per_second() {
        // Full batch, 128 output tokens per request, 256-token prompts:
        let p = ModelParams::preset(Preset::Realistic);
        let b = p.max_num_seqs;
        let step = p.step_time(b, 0, 0).as_secs_f64();
        let decode_tok_per_s = b as f64 / step;
        // Prefill for one request takes 256 × prefill_per_token out of each second.
        let prefill_s = 256.0 * p.prefill_per_token.as_secs_f64();
        // req/s r satisfies r × (128 / decode_tok_per_s + prefill_s) = 1.
        let knee = 1.0 / (128.0 / decode_tok_per_s + prefill_s);
        assert!((20.0..80.0).contains(&knee), "knee at {knee:.1} req/s");
    }
}
