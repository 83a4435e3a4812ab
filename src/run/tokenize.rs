//! The served model's own token counts, from the server's `/tokenize`
//! (vLLM, SGLang and llama.cpp serve it), for building prompts of exact
//! length when no tokenizer file is at hand. Used while the run is prepared
//! only: each count is a request, answered on a thread of its own (the
//! prompt builders count synchronously), and remembered.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};

use crate::client::{Client, ClientConfig};
use crate::tokenizer::{Builtin, TokenCounter, VOCAB};

type Ask = (String, mpsc::Sender<Option<usize>>);

pub struct ServerTokenizer {
    model: String,
    shown: String,
    ask: Mutex<mpsc::Sender<Ask>>,
    memo: Mutex<HashMap<String, usize>>,
    /// Calls made and time spent so far, against
    /// [`crate::bounds::TOKENIZE_CALLS`] and [`crate::bounds::TOKENIZE_TIME`].
    spent: Mutex<Spent>,
}

#[derive(Debug, Default)]
struct Spent {
    calls: usize,
    time: std::time::Duration,
    /// The budget ran out (said once).
    out: bool,
}

impl Spent {
    /// Whether another call is within the budget; says once when not.
    fn may_call(&mut self, shown: &str) -> bool {
        if self.out {
            return false;
        }
        if self.calls < crate::bounds::TOKENIZE_CALLS && self.time < crate::bounds::TOKENIZE_TIME {
            return true;
        }
        self.out = true;
        crate::term::note(&format!(
            "llmsweep: {} /tokenize: {} calls in {:.1} s, the most spent on it before the load ({} calls, {} s): the built-in counter counts the rest",
            crate::safe::line(shown),
            self.calls,
            self.time.as_secs_f64(),
            crate::bounds::TOKENIZE_CALLS,
            crate::bounds::TOKENIZE_TIME.as_secs()
        ));
        false
    }
}

impl std::fmt::Debug for ServerTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ServerTokenizer({})", self.name())
    }
}

impl ServerTokenizer {
    /// Starts the counting thread, with a client of its own (its
    /// connections belong to its own runtime, none to the run's).
    pub fn start(cfg: &ClientConfig, model: &str, shown: &str) -> Result<Self> {
        let (ask, asks) = mpsc::channel::<Ask>();
        let cfg = cfg.clone();
        let m = model.to_string();
        std::thread::Builder::new()
            .name("tokenize".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                let _in = rt.enter();
                let Ok(client) = Client::new(&cfg, Arc::new(Builtin)) else {
                    return;
                };
                while let Ok((text, reply)) = asks.recv() {
                    let n = rt.block_on(client.tokenize(&m, &text)).ok().flatten();
                    let _ = reply.send(n);
                }
            })
            .context("cannot start the /tokenize thread")?;
        Ok(ServerTokenizer {
            model: model.to_string(),
            shown: shown.to_string(),
            ask: Mutex::new(ask),
            memo: Mutex::new(HashMap::new()),
            spent: Mutex::new(Spent::default()),
        })
    }

    /// The server's count of `text`, None when it did not answer.
    fn ask(&self, text: &str) -> Option<usize> {
        if let Some(n) = self.memo.lock().ok()?.get(text) {
            return Some(*n);
        }
        if !self.spent.lock().ok()?.may_call(&self.shown) {
            return None;
        }
        let t0 = std::time::Instant::now();
        let (reply, answer) = mpsc::channel();
        self.ask.lock().ok()?.send((text.to_string(), reply)).ok()?;
        let n = answer.recv().ok();
        if let Ok(mut s) = self.spent.lock() {
            s.calls += 1;
            s.time += t0.elapsed();
        }
        let n = n??;
        if let Ok(mut m) = self.memo.lock() {
            m.insert(text.to_string(), n);
        }
        Some(n)
    }
}

impl TokenCounter for ServerTokenizer {
    fn count(&self, text: &str) -> usize {
        // A server that stops answering: the built-in count (the sample
        // check of synthetic prompts then says the lengths are not proven).
        self.ask(text)
            .unwrap_or_else(|| crate::tokenizer::count_tokens(text))
    }

    fn name(&self) -> String {
        format!("{} /tokenize ({})", self.shown, self.model)
    }

    fn one_token_pieces(&self) -> Vec<String> {
        // One request for the whole vocabulary: when it counts one token a
        // word, each word is one token, also beside the next.
        let all: Vec<String> = VOCAB.iter().map(|w| format!(" {w}")).collect();
        if self.ask(&all.concat()) == Some(all.len()) {
            return all;
        }
        let pieces = crate::tokenizer::single_pieces(self);
        // Cut short by the budget: the rest was the built-in counter's
        // guess, so the prompts are built in its pieces, as it says.
        if self.spent.lock().map_or(true, |s| s.out) {
            return Builtin.one_token_pieces();
        }
        pieces
    }
}
