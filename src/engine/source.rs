//! Where each request's prompt comes from: single prompts taken in order
//! across the run, or conversations and their turns; with a model mix, the
//! model each request goes to.

use std::collections::HashMap;
use std::sync::Arc;

use super::conversation::{Tracker, TurnRef};
use crate::client::{Prompt, RequestRecord};
use crate::data::conversation::Conversation;

pub(super) struct RequestSource {
    pub(super) prompts: Arc<[Prompt]>,
    /// Requests sent so far in the whole run: the next prompt to use. Prompts
    /// are taken in order across stages, so a stage does not resend the
    /// previous stage's prompts (a server's prefix cache would flatter TTFT).
    pub(super) next_prompt: u64,
    /// The run has said that its prompts ran out.
    pub(super) prompts_ran_out: bool,
    /// Multi-turn data: the conversations, taken in order across the run
    /// (`next_conv`), and each unreported stage's tracker.
    pub(super) conversations: Option<Arc<[Conversation]>>,
    pub(super) next_conv: u64,
    pub(super) trackers: HashMap<usize, Tracker>,
    /// The stage that is sending now (its conversations go on).
    pub(super) sending: Option<usize>,
    /// Conversations' histories hold the server's answers as received.
    pub(super) replies_received: bool,
    /// Several models (`--model a=70%,b=30%`): each request's model.
    pub(super) models: Option<Arc<crate::data::mix::ModelMix>>,
}

impl RequestSource {
    pub(super) fn new(prompts: Arc<[Prompt]>) -> Self {
        RequestSource {
            prompts,
            next_prompt: 0,
            prompts_ran_out: false,
            conversations: None,
            next_conv: 0,
            trackers: HashMap::new(),
            sending: None,
            replies_received: false,
            models: None,
        }
    }

    /// A conversation's turn: its messages so far (with the answers as
    /// received, if kept).
    pub(super) fn turn_prompt(&self, stage: usize, turn: Option<TurnRef>) -> Option<Prompt> {
        let (t, c) = (turn?, self.conversations.as_ref()?);
        let p = crate::data::conversation::turn_of(c, t.conv, t.turn);
        let got = self
            .trackers
            .get(&stage)
            .map(|tr| tr.received(t.conv))
            .filter(|r| self.replies_received && t.turn > 0 && r.len() == t.turn);
        let conv = c.get((t.conv % c.len().max(1) as u64) as usize);
        match (p, got, conv) {
            (Some(p), Some(got), Some(conv)) => {
                Some(crate::data::conversation::with_received(&p, conv, got).unwrap_or(p))
            }
            (p, _, _) => p,
        }
    }

    /// The run's next prompt; when they run out, says so once (the line,
    /// and whether it is only a note), with what reuse does to them.
    pub(super) fn next_single_prompt(&mut self) -> (Prompt, Option<(String, bool)>) {
        let mut said = None;
        let prompt = crate::data::for_request(&self.prompts, self.next_prompt);
        if self.next_prompt >= self.prompts.len() as u64 && !self.prompts_ran_out {
            self.prompts_ran_out = true;
            let tagged = self.prompts.iter().filter(|p| p.respell.is_none()).count();
            let untaggable = self.prompts.iter().all(|p| p.tag_at.is_none());
            let how = if untaggable {
                "sent again as they are (nothing in them can be made new: --extra-body replaced the text)".to_string()
            } else if tagged == 0 {
                "each respelled at its start so the server has not seen it; token counts unchanged"
                    .to_string()
            } else {
                format!(
                    "each made new to the server by a tag at its start (#<n>, a few tokens more for {tagged} of them)"
                )
            };
            let line = format!(
                "the data's {} prompts ran out at request {}: later requests reuse them, {how}",
                self.prompts.len(),
                self.next_prompt + 1
            );
            // Respelled prompts cost nothing (same tokens, new to the
            // server): a note, not a warning on every default run.
            said = Some((line, tagged == 0));
        }
        self.next_prompt += 1;
        (prompt, said)
    }

    /// A conversation's turn ended: its tracker schedules the next turn if
    /// its stage still sends.
    pub(super) fn track(&mut self, stage: usize, turn: Option<TurnRef>, record: &RequestRecord) {
        let (Some(t), Some(convs)) = (turn, &self.conversations) else {
            return;
        };
        let n = convs.len().max(1) as u64;
        let Some(conv) = convs.get((t.conv % n) as usize) else {
            return;
        };
        let (turns, think) = (conv.turns.len(), conv.think);
        let sending = self.sending == Some(stage);
        if let Some(tr) = self.trackers.get_mut(&stage) {
            tr.on_done(t, record, turns, think, sending);
        }
    }

    /// Starts the run's next conversation in stage `stage`; when they run
    /// out, a warning, once.
    pub(super) fn start_conversation(&mut self, stage: usize) -> (Option<TurnRef>, Option<String>) {
        let mut warning = None;
        let Some(convs) = self.conversations.as_ref() else {
            return (None, None);
        };
        let n = convs.len() as u64;
        let c = self.next_conv;
        self.next_conv += 1;
        if c == n && !self.prompts_ran_out {
            self.prompts_ran_out = true;
            let respelled = convs
                .iter()
                .all(|c| c.turns.iter().all(|t| t.respell.is_some()));
            let how = if respelled {
                "each respelled where its first message begins (the same in every turn), token counts unchanged"
            } else {
                "each made new to the server by a tag where its first message begins (#<n>, the same in every turn, a few tokens more)"
            };
            warning = Some(format!(
                "the data's {n} conversations ran out at conversation {}: later ones reuse them, {how}",
                n + 1
            ));
        }
        (
            Some(self.trackers.entry(stage).or_default().start(c)),
            warning,
        )
    }
}
