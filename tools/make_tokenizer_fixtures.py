#!/usr/bin/env python3
"""Writes tests/tokenizer/fixtures/<kind>/{tokenizer.json,tokenizer_config.json,cases.jsonl}: small tokenizers of
each kind real checkpoints use, trained with the `tokenizers` library, and its answers on hard strings.

Invariant: cases.jsonl holds what `tokenizers` itself returns (encode with and without special tokens, decode
with and without skipping them, decode of the ids without the first); inputs given as bytes are decoded with
errors='replace' first, the rule mt::Tokenizer applies. Deterministic: a rerun writes the same files.

The chat-family kinds (FAMILIES: gemma, phi3, phi4, phi4_mini, glm4, gpt_oss, internlm2, baichuan2) are for the chat
template fixtures (tools/make_template_fixtures.py): a base kind's model with that family's special tokens, flags
and bos/eos as its real tokenizer files have them; they get no cases.jsonl.
Run by hand from the repository root: python3 tools/make_tokenizer_fixtures.py [kind ...]  (no kind: all of them)
"""
import json
import sys
from collections import Counter
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

OUT = Path("tests/tokenizer/fixtures")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = """
The quick brown fox jumps over the lazy dog. It's a sentence that uses every letter of the alphabet,
and typists have practised with it for more than a hundred years. We'll see whether they've kept it.
Machine learning models are trained on large amounts of text. The text is first split into tokens,
and every token is mapped to an integer id. Training then adjusts billions of parameters so that the
model predicts the next token well. A tokenizer that disagrees with the one used during pre-training
silently corrupts every example, which is why we test it against the reference implementation.
In 2023, the model reached 71.5% accuracy on the benchmark; in 2024 it reached 83.2%, at a cost of
$1,250,000 and 12,345 GPU hours. Version 3.14 was released on 2024-06-01 at 09:30.
I don't know what you're talking about, she said. They'd already left, and he'll come back later.
DON'T PANIC. IT'S FINE. WE'RE READY. Hello World! HELLO WORLD! hello world?
你好，世界！这是一个用来训练分词器的小型语料库。机器学习是人工智能的一个分支，
它让计算机从数据中学习规律。我们今天学习中文和英文混合的文本，以及一些代码。
大型语言模型在数千亿个词元上进行训练，每一个参数都需要更新。中文文本没有空格，
所以分词器必须直接从字符中学习常见的组合，例如“学习”、“模型”、“数据”和“训练”。
北京是中国的首都，上海是最大的城市。春天来了，花开了，天气越来越暖和。
こんにちは、世界。これは日本語の文です。안녕하세요, 세계. 이것은 한국어 문장입니다.
Привет, мир! Это предложение на русском языке. Grüße aus München, schöne Straße, naïve café.
def train_step(model, batch, optimizer):
    loss = model(batch["input_ids"], labels=batch["labels"]).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()

for (int i = 0; i < n; ++i) {
    sum += values[i] * weights[i];
}
if (x != nullptr && x->size() > 0) { return std::move(x); }
SELECT id, name FROM users WHERE age >= 18 ORDER BY name;
<div class="container"><p>Hello &amp; welcome</p></div>
https://example.com/path/to/page?query=value&other=42#section
The 1st, 2nd and 3rd runs took 0.5s, 1.25s and 10.125s respectively.
Emoji are text too: 😀 😃 🎉 👍 ❤️ 🚀 — and so are symbols like © ® ™ € £ ¥ § ¶ • … → ← ≤ ≥ ≠ ∞.
"""


def lines():
    return [line for line in CORPUS.strip().split("\n")] * 3


def frequent_chars(count):
    """The `count` most frequent characters of the corpus once spaces became ▁, ties by code point: a fixed
    alphabet (the trainer's own limit_alphabet breaks ties in hash order, which changes from run to run)."""
    counts = Counter("".join(lines()).replace(" ", "▁"))
    return [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:count]]


def limited_alphabet(count):
    return {"initial_alphabet": frequent_chars(count), "limit_alphabet": count}


def byte_level_bpe(pre_tokenizer, vocab_size, normalizer=None):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines(), trainer)
    return tok


def split_then_byte_level(regex):
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])


def edited(tok, edit):
    """The tokenizer after `edit` changed its JSON form (for fields the Python API does not expose)."""
    data = json.loads(tok.to_str())
    edit(data)
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False))


def string_merges(data):
    data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]


def make_qwen2():
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = byte_level_bpe(split_then_byte_level(QWEN2_REGEX), 900, normalizers.NFC())
    tok.add_special_tokens(specials)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    return tok, config, specials


def make_llama3():
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tok = byte_level_bpe(split_then_byte_level(LLAMA3_REGEX), 900)

    def whole_words_without_merges(data):
        # Words in the vocab that merges cannot build: only ignore_merges produces them.
        data["model"]["ignore_merges"] = True
        vocab = data["model"]["vocab"]
        for word in ["Ġxyzzy", "Ġplugh", "ä½łå¥½ä¸ĸçķĮ"]:
            vocab[word] = len(vocab)

    tok = edited(tok, whole_words_without_merges)
    tok.add_special_tokens(specials)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
    return tok, config, specials


def make_gpt2():
    specials = ["<|endoftext|>"]
    tok = byte_level_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), 700)
    tok.add_special_tokens(specials)
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True),
                            AddedToken("[SEP]", rstrip=True, special=True)])
    tok.add_tokens([AddedToken("hello world", single_word=True, normalized=True),
                    AddedToken("Qwerty", normalized=False),
                    AddedToken("Qwertyuiop", normalized=False)])
    tok = edited(tok, string_merges)
    config = {"bos_token": {"__type": "AddedToken", "content": "<|endoftext|>", "lstrip": False, "normalized": True,
                            "rstrip": False, "single_word": False},
              "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
    return tok, config, specials + ["<mask>", "[SEP]", "Qwerty", "hello world"]


def sentencepiece_bpe(vocab_size):
    """A Llama-2-style model: <unk> <s> </s>, the 256 <0xNN> byte tokens, then merges learned on ▁-words."""
    trainer_tok = Tokenizer(models.BPE())
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False, **limited_alphabet(120))
    trainer_tok.train_from_iterator(lines(), trainer)
    trained = json.loads(trainer_tok.to_str())["model"]
    head = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    vocab = {t: i for i, t in enumerate(head)}
    for token, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(m) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                       special_tokens=[("<s>", 1)])
    return tok


def make_llama2():
    tok = sentencepiece_bpe(900)
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_tokens([AddedToken("<unused0>", normalized=True)])
    tok = edited(tok, string_merges)
    config = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": None, "unk_token": "<unk>"}
    return tok, config, ["<s>", "</s>", "<unk>", "<unused0>"]


def make_mistral():
    tok = sentencepiece_bpe(900)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.add_special_tokens(["[INST]", "[/INST]"])
    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    return tok, config, ["<s>", "</s>", "[INST]", "[/INST]"]


def make_splits():
    """Components real files use less often: every Split behavior, Digits, a Regex Replace, Metaspace in its older
    JSON form (add_prefix_space, no prepend_scheme), unk not fused, a template with a suffix."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\t+"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("::", behavior="removed"),
        pre_tokenizers.Split(Regex(r"[.!?]"), behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[$#]"), behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"[,;]"), behavior="contiguous", invert=True),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
    ])
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]"], show_progress=False, **limited_alphabet(60))
    tok.train_from_iterator(lines(), trainer)
    tok.add_special_tokens(["[CLS]", "[SEP]"])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="always")])

    def legacy_metaspace(data):
        for part in (data["pre_tokenizer"]["pretokenizers"][-1], data["decoder"]["decoders"][0]):
            del part["prepend_scheme"], part["split"]
            part["add_prefix_space"] = True

    data = json.loads(tok.to_str())
    legacy_metaspace(data)
    text = json.dumps(data, ensure_ascii=False)  # saved as is: Tokenizer.to_str() would write the newer form
    config = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "[UNK]"}
    return Tokenizer.from_str(text), config, ["[CLS]", "[SEP]", "[UNK]"], text


def make_prefix_space():
    """Byte-level with add_prefix_space (as GPT-2-derived files such as RoBERTa's have) after Digits."""
    tok = byte_level_bpe(pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                                  pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)]),
                         500)
    tok.add_special_tokens(["<s>", "</s>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return tok, {"bos_token": "<s>", "eos_token": "</s>"}, ["<s>", "</s>"]


def family(base, tokens, config):
    """`base`'s tokenizer without its added tokens (ids the model's vocab has keep their ids), then `tokens`
    (content or AddedToken; strings become special tokens that are not normalized) as added tokens, in order."""
    tok, *_ = base()
    tok = edited(tok, lambda data: data.update(added_tokens=[]))
    for token in tokens:
        if isinstance(token, str):
            token = AddedToken(token, normalized=False, special=True)
        (tok.add_special_tokens if token.special else tok.add_tokens)([token])
    return tok, config, [t if isinstance(t, str) else t.content for t in tokens]


def stripping(content, lstrip=False, rstrip=False, special=True):
    return AddedToken(content, lstrip=lstrip, rstrip=rstrip, normalized=False, special=special)


# A family's chat tokens on a small model: byte-level (qwen2's) for the byte-level BPE families, SentencePiece-style
# (llama2's) for Phi-3, InternLM2 and Baichuan2. Flags and bos/eos follow each family's tokenizer_config.json.
FAMILIES = {
    "gemma": lambda: family(make_qwen2, ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"],
                            {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}),
    # Phi-3 / Phi-3.5: the chat tokens strip whitespace on their right (rstrip), </s> is not special.
    "phi3": lambda: family(make_llama2, ["<unk>", "<s>", stripping("</s>", rstrip=True, special=False),
                                         "<|endoftext|>", stripping("<|assistant|>", rstrip=True),
                                         stripping("<|system|>", rstrip=True), stripping("<|end|>", rstrip=True),
                                         stripping("<|user|>", rstrip=True)],
                           {"bos_token": "<s>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                            "unk_token": "<unk>"}),
    # Phi-4: its special tokens strip whitespace on both sides.
    "phi4": lambda: family(make_qwen2, [stripping(t, lstrip=True, rstrip=True) for t in
                                        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_sep|>"]],
                           {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}),
    "phi4_mini": lambda: family(make_qwen2, ["<|endoftext|>", "<|assistant|>", "<|end|>", "<|user|>", "<|system|>",
                                             "<|tool|>", "<|/tool|>", "<|tool_call|>", "<|/tool_call|>",
                                             "<|tool_response|>"],
                                {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                 "pad_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}),
    "glm4": lambda: family(make_qwen2, ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>",
                                        "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"],
                           {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}),
    # GPT-OSS (o200k_harmony): the harmony format's tokens; <|return|> ends an answer (its eos_token).
    "gpt_oss": lambda: family(make_qwen2, ["<|endoftext|>", "<|start|>", "<|message|>", "<|end|>", "<|channel|>",
                                           "<|return|>", "<|call|>", "<|constrain|>"],
                              {"eos_token": "<|return|>", "pad_token": "<|endoftext|>"}),
    "internlm2": lambda: family(make_llama2, ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>",
                                              "<|action_start|>", "<|action_end|>", "<|interpreter|>", "<|plugin|>"],
                                {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "</s>", "unk_token": "<unk>"}),
    # Llama 4: llama3's byte-level model with Llama 4's header and end-of-turn tokens.
    "llama4": lambda: family(make_llama3, ["<|begin_of_text|>", "<|end_of_text|>", "<|header_start|>", "<|header_end|>",
                                           "<|eot|>", "<|eom|>"],
                             {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot|>"}),
    "baichuan2": lambda: family(make_llama2, ["<unk>", "<s>", "</s>", "<reserved_106>", "<reserved_107>"],
                                {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<unk>", "unk_token": "<unk>"}),
}


GENERAL_CASES = [
    "", "Hello, world!", " ", "   ", "  leading spaces", "trailing spaces   ", "a  b   c    d     e",
    "\t\ttabs\tinside\t", "line1\nline2\n\nline4\n", "crlf\r\nline\r\n", "\r\n\r\n", "\n\n\n  \n", " \n \t \r\n x",
    "I'm sure you'll see they've done it, we'd say it's fine", "DON'T SHOUT, IT'S RUDE! YOU'RE WE'LL THEY'VE",
    "'S 'T 'RE 'VE 'M 'LL 'D it'S", "1234567890", "3.14159 2,718,281 -42 1e10", "0000000000000000000001",
    "x=12345678901234567890;", "१२३ ٣٤٥ ①②③ ½", "你好，世界！这是一个测试。", "中文English混合mixed文本123",
    "机器学习是人工智能的一个分支", "こんにちは世界 カタカナ", "안녕하세요 세계", "I ❤️ emoji 😀😃",
    "👨‍👩‍👧‍👦 family", "👍🏽 skin tone", "🇩🇪🇯🇵 flags", "e\u0301 vs \u00e9", "A\u030a vs \u00c5ström ﬁ ligature",
    "\u1112\u1161\u11ab jamo", "a\u0308\u0301\u0323 stacked", "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }", "<div class=\"x\">&amp;</div>",
    "https://example.com/path?q=1&r=2#frag", "\u00a0nbsp\u00a0 ", "zero\u200bwidth", "\u3000ideographic space",
    "\u0085nel\u0085", "\ufeffBOM", "\u2028line sep\u2029", "supercalifragilisticexpialidocious", "a" * 100,
    "ab" * 50, "Ünïcödé ÀÉÎÕÜ straße", "Привет мир", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "ไทย ภาษา",
    "▁ already has metaspace ▁▁", "<0x41> looks like a byte token", "<unk> <s> </s> [INST]", "$$$ %%% ^^^ ~~~",
    "... !!!??? ---", " xyzzy plugh 你好世界", "你好世界", "a::b::c $5.00 #tag, x;y;;z.",
    "Hello World! HELLO WORLD! hello world?",
    "The quick brown fox jumps over the lazy dog. It's a sentence that uses every letter of the alphabet, "
    "and 你好，世界！这是一个用来训练分词器的小型语料库。\n\tIn 2024 it reached 83.2%.",
]
INVALID_UTF8_CASES = [b"abc\xff\xfedef", b"\xe4\xb8", b"\xe4\xb8a\xed\xa0\x80z", b"\xc0\xaf", b"\xf0\x9f\x98",
                      b"ok\x80\x80\x80end", b"\xf4\x90\x80\x80!", b"\xe0\x80\x80 \xf0\x90\x80"]


def special_cases(specials):
    s0 = specials[0]
    cases = [f"{s0}hello", f"hello{s0}", f"a {s0} b", f"{s0}{s0}", f"{s0}\n", f" {s0} ", f"x{s0[:-1]}",
             " ".join(specials), "".join(specials) + "end", f"{s0}  two spaces"]
    for s in specials[1:]:
        cases += [f"a{s}b", f"a {s} b", f"  {s}  ", f"{s}"]
    return cases


def record(tok, raw):
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    ids = tok.encode(text, add_special_tokens=False).ids
    ids_special = tok.encode(text, add_special_tokens=True).ids
    case = {"text": text}
    if isinstance(raw, bytes):
        case["bytes_hex"] = raw.hex()
    case.update({
        "ids": ids, "ids_special": ids_special,
        "decoded": tok.decode(ids, skip_special_tokens=False),
        "decoded_skip": tok.decode(ids_special, skip_special_tokens=True),
        "decoded_tail": tok.decode(ids[1:], skip_special_tokens=False),  # may start inside a character
    })
    return case


def main():
    # kind: (maker, whether to record every case or a subset that keeps the fixture small, or None for no cases)
    makers = {"qwen2": (make_qwen2, True), "llama3": (make_llama3, True), "gpt2": (make_gpt2, True),
              "llama2": (make_llama2, True), "mistral": (make_mistral, True), "splits": (make_splits, False),
              "prefix_space": (make_prefix_space, False)}
    makers.update({kind: (make, None) for kind, make in FAMILIES.items()})
    kinds = sys.argv[1:] or list(makers)
    for kind in kinds:
        make, all_cases = makers[kind]
        tok, config, specials, *text = make()  # a maker may give the file's text, else the tokenizer writes it
        folder = OUT / kind
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tokenizer.json").write_text(text[0] if text else tok.to_str())
        (folder / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1) + "\n")
        if all_cases is not None:
            cases = GENERAL_CASES + INVALID_UTF8_CASES if all_cases else GENERAL_CASES[::2] + INVALID_UTF8_CASES[:3]
            with open(folder / "cases.jsonl", "w", encoding="utf-8") as f:
                for raw in cases + special_cases(specials):
                    f.write(json.dumps(record(tok, raw), ensure_ascii=False) + "\n")
        print(f"{kind}: vocab {tok.get_vocab_size()}, {folder}")


if __name__ == "__main__":
    main()
