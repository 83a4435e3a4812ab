"""The tokenizer of the tiny random-weight models that scripts/real-vllm.sh, real-vlm.sh and
real-audio.sh write: BPE over Metaspace ("▁word"), holding the specials, printable ASCII,
"▁"+char, and every prefix of "▁word" for llmsweep's synthetic words (src/tokenizer.rs VOCAB)
and some plain English, so each " word" is one server token, as for llmsweep."""
import re

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

ENGLISH = ("user system assistant hello hi please write tell me about short long story poem "
           "explain why what how a i am your my yes thank thanks question help make say runs past")


def tiny_bpe(rs, specials, pieces=("\u2581", "\n"), more_words=()):
    """(tokenizer, vocab, words) for the VOCAB of `rs` (src/tokenizer.rs), `specials` first, then
    the single `pieces`; `more_words` beside the plain English."""
    words = re.findall(r'"([^"]+)"', re.search(r"VOCAB: &\[&str\] = &\[(.*?)\];", open(rs).read(), re.S).group(1))
    words += ENGLISH.split() + list(more_words)
    vocab, merges = {}, []

    def add(piece, merge=None):
        if piece not in vocab:
            vocab[piece] = len(vocab)
            if merge:
                merges.append(merge)

    for s in list(specials) + list(pieces):
        add(s)
    for c in map(chr, range(33, 127)):
        add(c)
        add("\u2581" + c, ("\u2581", c))
    for w in words:  # merges only ever extend a "▁" prefix by one character
        p = "\u2581" + w
        for i in range(2, len(p) + 1):
            add(p[:i], (p[:i - 1], p[i - 1]))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok, vocab, words
