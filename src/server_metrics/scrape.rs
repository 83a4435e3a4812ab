//! The scraper: a task that reads the target's `/metrics` once a second
//! while a run is live, on its own HTTP client (its own connection, its own
//! timeout), keeps the readings in bounded memory, and publishes a live view
//! for the dashboard through a `tokio::sync::watch`.
//!
//! Scraping never touches the measurement: a failed scrape is counted here
//! and reported as a warning, never as a request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use super::prom;
use super::rounds::{lock, Handle, Running, Task};
use super::series::History;
use super::vocab::{Counter, Gauge, Histo, Reading, Source};

/// How to scrape.
#[derive(Debug, Clone)]
pub struct ScrapeConfig {
    pub url: String,
    pub interval: Duration,
    pub timeout: Duration,
    /// `--server-metric` names kept as raw series.
    pub raw: Vec<String>,
    /// The model under test (selects among several models' series).
    pub model: Option<String>,
    /// The user named the URL: failing to read it is worth a warning.
    pub explicit: bool,
    /// Sent as `Authorization: Bearer` (the target's API key, for servers
    /// that guard /metrics with it).
    pub bearer: Option<String>,
    pub insecure: bool,
    /// `--follow-redirects`: the same policy as the load client's.
    pub follow_redirects: crate::client::FollowRedirects,
}

/// Where the scraper stands.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// No successful scrape yet.
    #[default]
    Starting,
    /// Reading the server's metrics.
    Live,
    /// Not scraping, and why.
    Off(String),
}

/// One second of the live view (rates over the last scrape interval).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LivePoint {
    pub t_s: f64,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// 0..1
    pub kv_cache_usage: Option<f64>,
    pub preemptions_per_s: Option<f64>,
    /// 0..1, over the last interval.
    pub prefix_hit_rate: Option<f64>,
    pub prompt_tokens_per_s: Option<f64>,
    pub generation_tokens_per_s: Option<f64>,
    /// Mean of the server's observations over the last interval.
    pub ttft_ms: Option<f64>,
    pub itl_ms: Option<f64>,
    pub queue_ms: Option<f64>,
}

/// Live series keep at most this many points.
pub const LIVE_POINTS: usize = 600;

/// What the dashboard's server view shows.
/// It travels to attached viewers over the run's socket (the series as the
/// points a viewer has not seen), so a viewer needs no access to the
/// server, nor its credentials.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LiveView {
    pub status: Status,
    /// Credentials masked.
    pub url: String,
    pub interval_s: f64,
    pub source: Option<String>,
    pub scrapes: u64,
    pub errors: u64,
    pub last_error: Option<String>,
    /// The latest scrape, as read (not sent to viewers: the series is what they draw).
    #[serde(skip)]
    pub latest: Reading,
    pub series: VecDeque<LivePoint>,
}

impl LiveView {
    fn new(cfg: &ScrapeConfig) -> Self {
        LiveView {
            status: Status::Starting,
            url: crate::redact::redact_url(&cfg.url),
            interval_s: cfg.interval.as_secs_f64(),
            source: None,
            scrapes: 0,
            errors: 0,
            last_error: None,
            latest: Reading::default(),
            series: VecDeque::new(),
        }
    }

    pub fn last(&self) -> Option<&LivePoint> {
        self.series.back()
    }
}

/// What a run's scraping left: the readings and the counts.
#[derive(Debug, Clone)]
pub struct Record {
    pub url: String,
    /// When the scraper started (the run's start): scrapes are timed from it.
    pub t0_wall: SystemTime,
    pub source: Option<Source>,
    pub history: History,
    /// Series ids of the `--server-metric` gauges seen, in first-seen order.
    pub raw_ids: Vec<String>,
    pub scrapes: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub status: Status,
    pub explicit: bool,
    /// Wall-clock time spent reading and parsing pages (for the cost note).
    pub busy: Duration,
    /// Pages longer than [`crate::bounds::METRICS_PAGE`]: only their first
    /// part was read (the report says so once).
    pub cut_pages: u64,
    /// What vLLM said about LoRA adapters and deferred requests.
    pub lora: LoraSeen,
}

/// What vLLM's /metrics said over the run about requests that waited for
/// something other than room in the batch. With LoRA adapters, vLLM puts
/// at most `--max-loras` adapters (default 1) in one batch: a request for
/// another adapter waits `deferred`, however idle the batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoraSeen {
    /// `max_lora` of `vllm:lora_requests_info`: adapters one batch may hold.
    pub max_lora: Option<u64>,
    /// The most requests waiting `deferred` at one scrape
    /// (`vllm:num_requests_waiting_by_reason{reason="deferred"}`).
    pub deferred_max: f64,
    /// The most waiting for room in the batch (`reason="capacity"`) at one
    /// scrape.
    pub capacity_max: f64,
}

impl LoraSeen {
    /// Takes in one page.
    pub fn read(&mut self, page: &prom::Page) {
        for s in page.series("vllm:lora_requests_info") {
            if let Some(n) = s.label("max_lora").and_then(|v| v.parse().ok()) {
                self.max_lora = Some(n);
            }
        }
        let waiting = |reason: &str| -> f64 {
            page.series("vllm:num_requests_waiting_by_reason")
                .filter(|s| s.label("reason") == Some(reason) && s.value.is_finite())
                .map(|s| s.value)
                .sum()
        };
        self.deferred_max = self.deferred_max.max(waiting("deferred"));
        self.capacity_max = self.capacity_max.max(waiting("capacity"));
    }

    /// The report's word on it: none unless a request waited deferred.
    pub fn warning(&self) -> Option<String> {
        if self.deferred_max < 1.0 {
            return None;
        }
        let why = match self.max_lora {
            Some(n) => format!(
                "for a LoRA adapter's turn: vLLM batches at most {n} adapter{} at once (max_lora of vllm:lora_requests_info; vllm serve --max-loras N raises it)",
                if n == 1 { "" } else { "s" }
            ),
            None => "(a LoRA adapter's turn, a KV transfer)".to_string(),
        };
        Some(format!(
            "server metrics: up to {:.0} requests at once waited {why}, not for room in the batch (vllm:num_requests_waiting_by_reason: deferred up to {:.0}, capacity up to {:.0}); their TTFT includes that wait",
            self.deferred_max, self.deferred_max, self.capacity_max
        ))
    }
}

impl Record {
    /// The report's warnings about scraping (none when all went well or the
    /// target simply serves no metrics).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        match &self.status {
            // A refused redirect is worth a warning even for the default
            // URL: the page is there, and a flag would read it.
            Status::Off(why) if self.explicit || why.contains(REDIRECTED) => {
                w.push(format!("server metrics: {why}"));
            }
            _ => {}
        }
        if self.cut_pages > 0 {
            w.push(format!(
                "server metrics: {} of the pages of {} were longer than {}, the most llmsweep reads of one page; only their first {} was read",
                self.cut_pages,
                self.url,
                crate::bounds::human(crate::bounds::METRICS_PAGE),
                crate::bounds::human(crate::bounds::METRICS_PAGE),
            ));
        }
        if self.errors > 0 && self.scrapes > 0 {
            w.push(format!(
                "server metrics: {} of {} scrapes of {} failed{}",
                self.errors,
                self.scrapes + self.errors,
                self.url,
                self.first_error
                    .as_deref()
                    .map(|e| format!(" (first: {e})"))
                    .unwrap_or_default()
            ));
        }
        w.extend(self.lora.warning());
        w
    }
}

/// A running scraper (see [`super::rounds`]).
pub type Scraper = Running<Record, LiveView>;

/// Reads a running scraper's record without stopping it.
pub type ScrapeHandle = Handle<Record, LiveView>;

/// How a scrape that met a redirect it may not follow begins its reason.
const REDIRECTED: &str = "redirected";

/// Consecutive failures before an unasked-for scraper gives up quietly.
const GIVE_UP_AFTER: u32 = 3;

impl Running<Record, LiveView> {
    /// Starts scraping now; readings are timed from this moment.
    pub fn start(cfg: ScrapeConfig) -> Scraper {
        let view = LiveView::new(&cfg);
        let record = Record {
            url: view.url.clone(),
            t0_wall: SystemTime::now(),
            source: None,
            history: History::default(),
            raw_ids: Vec::new(),
            scrapes: 0,
            errors: 0,
            first_error: None,
            status: Status::Starting,
            explicit: cfg.explicit,
            busy: Duration::ZERO,
            cut_pages: 0,
            lora: LoraSeen::default(),
        };
        let interval = cfg.interval;
        Running::spawn(record, view, interval, move |t| run(cfg, t))
    }
}

/// Fetches and parses one page. Redirects follow the load client's policy
/// (`--follow-redirects`); the bearer token goes only to the page's own origin.
/// The page is read up to [`crate::bounds::METRICS_PAGE`]; `true` with it
/// when it went on past that (it is then parsed to its last whole line).
pub(super) async fn fetch(
    http: &reqwest::Client,
    cfg: &ScrapeConfig,
) -> Result<(prom::Page, bool), String> {
    let url = reqwest::Url::parse(&cfg.url).map_err(|e| format!("not a URL: {e}"))?;
    let plain = reqwest::header::HeaderMap::new();
    let mut own = plain.clone();
    if let Some(k) = &cfg.bearer {
        let mut v = reqwest::header::HeaderValue::from_str(&format!("Bearer {k}"))
            .map_err(|_| "the API key cannot go in an HTTP header".to_string())?;
        v.set_sensitive(true);
        own.insert(reqwest::header::AUTHORIZATION, v);
    }
    let route = crate::client::redirect::Route {
        origin: &url,
        own: &own,
        plain: &plain,
        follow: cfg.follow_redirects,
    };
    let resp =
        crate::client::redirect::send(http, route, reqwest::Method::GET, &url, None, None, None)
            .await
            .map_err(|f| match f {
                crate::client::redirect::Fail::Refused { message, .. } => {
                    format!("{REDIRECTED}: {}", crate::redact::scrub(&message))
                }
                crate::client::redirect::Fail::Http(e) if e.is_timeout() => {
                    format!("timed out after {:.1} s", cfg.timeout.as_secs_f64())
                }
                crate::client::redirect::Fail::Http(e) if e.is_connect() => {
                    "cannot connect".to_string()
                }
                crate::client::redirect::Fail::Http(_) => "request failed".to_string(),
            })?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("HTTP {}", status.as_u16()));
    }
    let body = crate::bounds::read_capped(resp, crate::bounds::METRICS_PAGE)
        .await
        .map_err(|_| "the body broke off".to_string())?;
    let whole = if body.cut {
        // The last line may be cut in two: leave it out.
        let end = body
            .bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        &body.bytes[..end]
    } else {
        &body.bytes[..]
    };
    let page = prom::parse(&String::from_utf8_lossy(whole));
    if page.samples.is_empty() {
        return Err("not a Prometheus text page".to_string());
    }
    Ok((page, body.cut))
}

/// The scraper's task: one scrape per interval until asked to stop, then
/// one last scrape (it covers the end of the last stage).
async fn run(cfg: ScrapeConfig, task: Task<Record, LiveView>) {
    let Task {
        shared,
        view,
        live,
        mut rounds,
    } = task;
    let mut scraping = Scraping {
        cfg,
        shared,
        view,
        live,
        failures_in_a_row: 0,
        ever_ok: false,
        prev: None,
    };
    let http = match crate::client::redirect::builder(scraping.cfg.insecure)
        .timeout(scraping.cfg.timeout)
        .connect_timeout(scraping.cfg.timeout)
        .pool_max_idle_per_host(1)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            scraping.off(format!("cannot build an HTTP client: {e}"));
            return;
        }
    };
    let t0 = Instant::now();
    while rounds.next().await {
        let sent = Instant::now();
        let result = rounds.read(fetch(&http, &scraping.cfg)).await;
        let received = Instant::now();
        let t_s = (sent.duration_since(t0) + received.duration_since(sent) / 2).as_secs_f64();
        lock(&scraping.shared).busy += received.duration_since(sent);
        let went_on = match result {
            Ok((page, cut)) => scraping.on_page(&page, cut, t_s, rounds.is_last()),
            Err(e) => scraping.on_error(e),
        };
        if !went_on {
            return;
        }
        scraping.view.errors = lock(&scraping.shared).errors;
        scraping.publish();
    }
}

/// What the scraper knows between scrapes.
struct Scraping {
    cfg: ScrapeConfig,
    shared: Arc<Mutex<Record>>,
    view: LiveView,
    live: watch::Sender<Arc<LiveView>>,
    failures_in_a_row: u32,
    /// A scrape has read known metrics: failures from now on are counted,
    /// not a reason to turn off.
    ever_ok: bool,
    prev: Option<(f64, Reading)>,
}

impl Scraping {
    /// Sends the live view to the dashboard and viewers.
    fn publish(&self) {
        let _ = self.live.send(Arc::new(self.view.clone()));
    }

    /// Turns scraping off for good, saying why.
    fn off(&mut self, why: String) -> bool {
        lock(&self.shared).status = Status::Off(why.clone());
        self.view.status = Status::Off(why);
        self.publish();
        false
    }

    /// A page was read: its known metrics join the record and the live
    /// view. A first page without any turns scraping off. Returns whether
    /// scraping goes on.
    fn on_page(&mut self, page: &prom::Page, cut: bool, t_s: f64, last: bool) -> bool {
        let mut rec = lock(&self.shared);
        let r = &mut *rec;
        if cut {
            r.cut_pages += 1;
        }
        let source = r.source.or_else(|| Source::detect(page));
        let reading = super::vocab::read(page, source, self.cfg.model.as_deref(), &self.cfg.raw);
        if reading.is_empty() {
            self.failures_in_a_row += 1;
            if !self.ever_ok {
                let why = format!(
                    "{} has no metric names llmsweep knows (vLLM, SGLang, TGI, llama.cpp){}",
                    r.url,
                    if self.cfg.raw.is_empty() {
                        ""
                    } else {
                        " nor the --server-metric names"
                    }
                );
                drop(rec);
                return self.off(why);
            }
            r.errors += 1;
            r.first_error
                .get_or_insert_with(|| "a page without the known metrics".into());
            return true;
        }
        self.failures_in_a_row = 0;
        self.ever_ok = true;
        r.lora.read(page);
        r.source = source;
        r.scrapes += 1;
        r.status = Status::Live;
        for (id, _) in &reading.raw {
            if !r.raw_ids.contains(id) {
                r.raw_ids.push(id.clone());
            }
        }
        let point = live_point(self.prev.as_ref(), t_s, &reading);
        r.history.push(t_s, reading.clone(), last);
        self.view.status = Status::Live;
        self.view.source = source.map(|s| s.name().to_string());
        self.view.scrapes = r.scrapes;
        if self.view.series.len() == LIVE_POINTS {
            self.view.series.pop_front();
        }
        self.view.series.push_back(point);
        self.view.latest = reading.clone();
        self.prev = Some((t_s, reading));
        true
    }

    /// A scrape failed: a target that never served metrics is quietly off
    /// after a few (unless `--server-metrics URL` named it); after a good
    /// one, failures are counted. Returns whether scraping goes on.
    fn on_error(&mut self, e: String) -> bool {
        self.failures_in_a_row += 1;
        let mut rec = lock(&self.shared);
        let r = &mut *rec;
        if !self.ever_ok && !self.cfg.explicit && self.failures_in_a_row >= GIVE_UP_AFTER {
            // The target does not serve metrics: quietly off.
            let why = if e.starts_with(REDIRECTED) {
                format!("{} was not read: {e}", r.url)
            } else {
                format!("{} is not served ({e})", r.url)
            };
            drop(rec);
            return self.off(why);
        }
        if self.ever_ok {
            r.errors += 1;
            r.first_error.get_or_insert_with(|| e.clone());
        } else if self.cfg.explicit {
            r.status = Status::Off(format!("cannot read {}: {e}", r.url));
        }
        self.view.last_error = Some(e);
        true
    }
}

/// The live point of a reading: gauges as read, rates and interval means
/// against the previous reading.
fn live_point(prev: Option<&(f64, Reading)>, t_s: f64, r: &Reading) -> LivePoint {
    let mut p = LivePoint {
        t_s,
        running: r.gauge(Gauge::Running),
        waiting: r.gauge(Gauge::Waiting),
        kv_cache_usage: r.gauge(Gauge::KvCacheUsage),
        prefix_hit_rate: r.gauge(Gauge::PrefixHitRate),
        ..Default::default()
    };
    let Some((t0, old)) = prev else { return p };
    let dt = t_s - t0;
    if dt <= 0.0 {
        return p;
    }
    let delta = |c: Counter| -> Option<f64> {
        let (a, b) = (old.counter(c)?, r.counter(c)?);
        Some(if b >= a { b - a } else { b })
    };
    let rate = |c: Counter| delta(c).map(|d| d / dt);
    p.preemptions_per_s = rate(Counter::Preemptions);
    p.prompt_tokens_per_s = rate(Counter::PromptTokens);
    p.generation_tokens_per_s = rate(Counter::GenerationTokens);
    let hits = match (delta(Counter::PrefixHits), delta(Counter::PrefixQueries)) {
        (Some(h), Some(q)) if q > 0.0 => Some(h / q),
        _ => match (
            delta(Counter::CachedPromptTokens),
            delta(Counter::PromptTokens),
        ) {
            (Some(c), Some(p)) if p > 0.0 => Some(c / p),
            _ => None,
        },
    };
    p.prefix_hit_rate = hits.or(p.prefix_hit_rate);
    let mean_ms = |h: Histo| -> Option<f64> {
        let (a, b) = (old.hist(h)?, r.hist(h)?);
        let n = b.count - a.count;
        (n > 0.0).then(|| (b.sum - a.sum) / n * 1000.0)
    };
    p.ttft_ms = mean_ms(Histo::Ttft);
    p.itl_ms = mean_ms(Histo::Itl);
    p.queue_ms = mean_ms(Histo::Queue);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_points_are_rates_over_the_last_interval() {
        let mut a = Reading::default();
        a.counters[Counter::GenerationTokens as usize] = Some(100.0);
        a.counters[Counter::PrefixQueries as usize] = Some(1000.0);
        a.counters[Counter::PrefixHits as usize] = Some(0.0);
        let mut b = a.clone();
        b.counters[Counter::GenerationTokens as usize] = Some(300.0);
        b.counters[Counter::PrefixQueries as usize] = Some(2000.0);
        b.counters[Counter::PrefixHits as usize] = Some(250.0);
        b.gauges[Gauge::Waiting as usize] = Some(3.0);
        let p = live_point(Some(&(1.0, a)), 3.0, &b);
        assert_eq!(p.generation_tokens_per_s, Some(100.0));
        assert_eq!(p.prefix_hit_rate, Some(0.25));
        assert_eq!(p.waiting, Some(3.0));
        assert_eq!(p.prompt_tokens_per_s, None);
        assert_eq!(live_point(None, 1.0, &b).generation_tokens_per_s, None);
    }

    /// vLLM 0.32 (CPU) serving two LoRA adapters with the default
    /// --max-loras 1, as scraped mid-run (lines of the real page).
    #[test]
    fn requests_deferred_for_a_lora_slot_are_named_with_vllms_max_lora() {
        let page = |deferred: u32, capacity: u32| {
            prom::parse(&format!(
                "# TYPE vllm:num_requests_waiting_by_reason gauge\n\
                 vllm:num_requests_waiting_by_reason{{engine=\"0\",model_name=\"tiny-llama\",reason=\"capacity\"}} {capacity}.0\n\
                 vllm:num_requests_waiting_by_reason{{engine=\"0\",model_name=\"tiny-llama\",reason=\"deferred\"}} {deferred}.0\n\
                 # TYPE vllm:lora_requests_info gauge\n\
                 vllm:lora_requests_info{{max_lora=\"1\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"}} 1.7956722033720312e+09\n\
                 vllm:lora_requests_info{{max_lora=\"1\",running_lora_adapters=\"a\",waiting_lora_adapters=\"a\"}} 1.7956722025610676e+09\n"
            ))
        };
        let mut seen = LoraSeen::default();
        seen.read(&page(0, 0));
        assert_eq!(seen.max_lora, Some(1));
        assert_eq!(seen.warning(), None, "nothing deferred, nothing said");
        seen.read(&page(23, 7));
        seen.read(&page(2, 18));
        assert_eq!((seen.deferred_max, seen.capacity_max), (23.0, 18.0));
        let w = seen.warning().unwrap();
        assert!(w.contains("up to 23 requests at once waited for a LoRA adapter's turn: vLLM batches at most 1 adapter at once"), "{w}");
        assert!(w.contains("--max-loras"), "{w}");
        // A page of a server without LoRA says nothing.
        let mut plain = LoraSeen::default();
        plain.read(&prom::parse(
            "vllm:num_requests_waiting{engine=\"0\"} 4.0\n",
        ));
        assert_eq!(plain, LoraSeen::default());
    }

    #[test]
    fn the_view_shows_the_url_without_credentials() {
        let cfg = ScrapeConfig {
            url: "http://user:secret@host:9000/metrics?token=tok123".into(),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            raw: Vec::new(),
            model: None,
            explicit: false,
            bearer: None,
            insecure: false,
            follow_redirects: crate::client::FollowRedirects::None,
        };
        assert_eq!(
            LiveView::new(&cfg).url,
            "http://user:***@host:9000/metrics?token=***"
        );
    }

    #[test]
    fn warnings_count_failed_scrapes_and_say_nothing_when_metrics_are_simply_absent() {
        let mut r = Record {
            url: "http://h/metrics".into(),
            t0_wall: SystemTime::now(),
            source: None,
            history: History::default(),
            raw_ids: vec![],
            scrapes: 0,
            errors: 0,
            first_error: None,
            status: Status::Off("http://h/metrics is not served (HTTP 404)".into()),
            explicit: false,
            busy: Duration::ZERO,
            cut_pages: 0,
            lora: LoraSeen::default(),
        };
        assert!(r.warnings().is_empty());
        r.explicit = true;
        assert_eq!(r.warnings().len(), 1);
        r.status = Status::Live;
        r.scrapes = 9;
        r.errors = 1;
        r.first_error = Some("timed out after 2.0 s".into());
        let w = r.warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("1 of 10 scrapes"), "{w:?}");
    }
}
