#!/usr/bin/env python3
"""Writes the built-in text demo: data/alpaca_en_demo.json and data/alpaca_zh_demo.json (alpaca format, a few hundred
instruction/response pairs each, written for MegaTrain from templates: arithmetic word problems, unit conversions,
sorting, capital cities, simple rewrites), and configs/models/demo/: a byte-level BPE tokenizer trained on them with
the `tokenizers` library (ChatML specials, vocabulary 2048) and a tiny Llama-shaped config.json.

Invariant: deterministic (fixed seeds; the same files on every run). Every answer is correct for its question.
Run by hand from the repository root: python3 tools/make_alpaca_demo.py
"""
import json
import random
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

DATA = Path("data")
MODEL = Path("configs/models/demo")
PER_TASK = 80
VOCAB = 2048
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen2's pre-tokenizer split (letters, single digits, punctuation runs, newlines, spaces).
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CAPITALS = [  # (English country, capital, Chinese country, capital)
    ("France", "Paris", "法国", "巴黎"), ("Germany", "Berlin", "德国", "柏林"), ("Italy", "Rome", "意大利", "罗马"),
    ("Spain", "Madrid", "西班牙", "马德里"), ("Japan", "Tokyo", "日本", "东京"), ("China", "Beijing", "中国", "北京"),
    ("Egypt", "Cairo", "埃及", "开罗"), ("Kenya", "Nairobi", "肯尼亚", "内罗毕"), ("Canada", "Ottawa", "加拿大", "渥太华"),
    ("Brazil", "Brasilia", "巴西", "巴西利亚"), ("Argentina", "Buenos Aires", "阿根廷", "布宜诺斯艾利斯"),
    ("Australia", "Canberra", "澳大利亚", "堪培拉"), ("India", "New Delhi", "印度", "新德里"),
    ("Russia", "Moscow", "俄罗斯", "莫斯科"), ("Mexico", "Mexico City", "墨西哥", "墨西哥城"),
    ("Portugal", "Lisbon", "葡萄牙", "里斯本"), ("Greece", "Athens", "希腊", "雅典"), ("Norway", "Oslo", "挪威", "奥斯陆"),
    ("Sweden", "Stockholm", "瑞典", "斯德哥尔摩"), ("Finland", "Helsinki", "芬兰", "赫尔辛基"),
    ("Poland", "Warsaw", "波兰", "华沙"), ("Austria", "Vienna", "奥地利", "维也纳"), ("Peru", "Lima", "秘鲁", "利马"),
    ("Thailand", "Bangkok", "泰国", "曼谷"), ("Vietnam", "Hanoi", "越南", "河内"),
    ("South Korea", "Seoul", "韩国", "首尔"), ("Turkey", "Ankara", "土耳其", "安卡拉"),
    ("Ireland", "Dublin", "爱尔兰", "都柏林"), ("Chile", "Santiago", "智利", "圣地亚哥"),
    ("Morocco", "Rabat", "摩洛哥", "拉巴特"),
]
NAMES_EN = ["Tom", "Anna", "Lucas", "Mia", "Omar", "Sara", "Ken", "Lily", "David", "Nora"]
NAMES_ZH = ["小明", "小红", "小刚", "小丽", "小华", "小芳", "小强", "小雪", "小军", "小梅"]
ITEMS = [("apples", "个苹果"), ("pencils", "支铅笔"), ("books", "本书"), ("stickers", "张贴纸"), ("marbles", "颗弹珠"),
         ("cookies", "块饼干")]
UNITS = [  # (from, to, factor, English names, Chinese names)
    ("kilometers", "meters", 1000, "千米", "米"), ("kilograms", "grams", 1000, "千克", "克"),
    ("hours", "minutes", 60, "小时", "分钟"), ("liters", "milliliters", 1000, "升", "毫升"),
    ("minutes", "seconds", 60, "分钟", "秒"), ("meters", "centimeters", 100, "米", "厘米"),
]
WORDS = ["apple", "river", "cloud", "garden", "window", "pencil", "tiger", "orange", "music", "bread", "lamp", "ocean"]
PAST = [("I walk to school.", "I walked to school."), ("She plays the piano.", "She played the piano."),
        ("We cook dinner together.", "We cooked dinner together."), ("They watch a movie.", "They watched a movie."),
        ("He opens the door.", "He opened the door."), ("The dog jumps over the fence.", "The dog jumped over the fence."),
        ("I clean my room.", "I cleaned my room."), ("You help your friend.", "You helped your friend."),
        ("The baby smiles.", "The baby smiled."), ("We visit our grandparents.", "We visited our grandparents.")]
NEGATE_ZH = [("我", "喜欢", "苹果"), ("他", "会", "游泳"), ("我们", "想", "看电影"), ("她", "喝", "咖啡"),
             ("小猫", "吃", "鱼"), ("他们", "去", "公园"), ("老师", "在", "教室"), ("我", "知道", "答案"),
             ("妈妈", "做", "晚饭"), ("弟弟", "玩", "游戏")]


def fmt(x):
    return str(int(x)) if x == int(x) else str(x)


def english(rng):
    tasks = []
    for _ in range(PER_TASK):
        name, (item, _) = rng.choice(NAMES_EN), rng.choice(ITEMS)
        a, b = rng.randint(2, 60), rng.randint(2, 40)
        kind = rng.randrange(4)
        if kind == 0:
            q = f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?"
            r = f"{name} has {a} + {b} = {a + b} {item} now."
        elif kind == 1:
            a += b
            q = f"{name} has {a} {item} and gives away {b}. How many {item} are left?"
            r = f"{a} - {b} = {a - b}, so {name} has {a - b} {item} left."
        elif kind == 2:
            a, b = rng.randint(2, 12), rng.randint(2, 12)
            q = f"There are {a} boxes with {b} {item} in each box. How many {item} are there in total?"
            r = f"{a} x {b} = {a * b}, so there are {a * b} {item} in total."
        else:
            b, per = rng.randint(2, 9), rng.randint(2, 12)
            q = f"{name} shares {b * per} {item} equally among {b} friends. How many {item} does each friend get?"
            r = f"{b * per} / {b} = {per}, so each friend gets {per} {item}."
        tasks.append({"instruction": q, "input": "", "output": r})
    for _ in range(PER_TASK):
        src, dst, factor, _, _ = rng.choice(UNITS)
        value = rng.choice([rng.randint(2, 20), rng.randint(1, 40) / 2 + 1])
        tasks.append({"instruction": f"Convert {fmt(value)} {src} to {dst}.", "input": "",
                      "output": f"{fmt(value)} {src} is {fmt(value * factor)} {dst}, because 1 {src[:-1]} is "
                                f"{factor} {dst}."})
    for _ in range(PER_TASK):
        if rng.random() < 0.6:
            values = rng.sample(range(1, 100), rng.randint(3, 7))
            order = rng.choice(["ascending", "descending"])
            answer = sorted(values, reverse=order == "descending")
            tasks.append({"instruction": f"Sort the following numbers in {order} order.",
                          "input": ", ".join(map(str, values)), "output": ", ".join(map(str, answer))})
        else:
            words = rng.sample(WORDS, rng.randint(3, 6))
            tasks.append({"instruction": "Sort these words alphabetically.", "input": ", ".join(words),
                          "output": ", ".join(sorted(words))})
    for _ in range(PER_TASK):
        country, capital, _, _ = rng.choice(CAPITALS)
        q = rng.choice([f"What is the capital of {country}?", f"Name the capital city of {country}.",
                        f"Which city is the capital of {country}?"])
        tasks.append({"instruction": q, "input": "", "output": f"The capital of {country} is {capital}."})
    for _ in range(PER_TASK):
        present, past = rng.choice(PAST)
        kind = rng.randrange(3)
        if kind == 0:
            tasks.append({"instruction": "Rewrite the sentence in the past tense.", "input": present, "output": past})
        elif kind == 1:
            tasks.append({"instruction": "Rewrite the sentence in capital letters.", "input": present,
                          "output": present.upper()})
        else:
            tasks.append({"instruction": "Rewrite the sentence without the final period.", "input": past,
                          "output": past[:-1]})
    return tasks


def chinese(rng):
    tasks = []
    for _ in range(PER_TASK):
        name, (_, item) = rng.choice(NAMES_ZH), rng.choice(ITEMS)
        a, b = rng.randint(2, 60), rng.randint(2, 40)
        kind = rng.randrange(4)
        if kind == 0:
            q, r = f"{name}有{a}{item}，又得到了{b}{item}。{name}现在一共有多少{item}？", \
                f"{name}现在一共有{a} + {b} = {a + b}{item}。"
        elif kind == 1:
            a += b
            q, r = f"{name}有{a}{item}，送给别人{b}{item}。还剩多少{item}？", f"{a} - {b} = {a - b}，还剩{a - b}{item}。"
        elif kind == 2:
            a, b = rng.randint(2, 12), rng.randint(2, 12)
            q, r = f"有{a}个盒子，每个盒子里有{b}{item}。一共有多少{item}？", f"{a} x {b} = {a * b}，一共有{a * b}{item}。"
        else:
            b, per = rng.randint(2, 9), rng.randint(2, 12)
            q = f"{name}把{b * per}{item}平均分给{b}个朋友。每个朋友分到多少{item}？"
            r = f"{b * per} / {b} = {per}，每个朋友分到{per}{item}。"
        tasks.append({"instruction": q, "input": "", "output": r})
    for _ in range(PER_TASK):
        _, _, factor, src, dst = rng.choice(UNITS)
        value = rng.choice([rng.randint(1, 20), rng.randint(1, 40) / 2])
        tasks.append({"instruction": f"把{fmt(value)}{src}换算成{dst}。", "input": "",
                      "output": f"{fmt(value)}{src}等于{fmt(value * factor)}{dst}，因为1{src}等于{factor}{dst}。"})
    for _ in range(PER_TASK):
        values = rng.sample(range(1, 100), rng.randint(3, 7))
        descending = rng.random() < 0.5
        answer = sorted(values, reverse=descending)
        tasks.append({"instruction": "把下面的数字从大到小排序。" if descending else "把下面的数字从小到大排序。",
                      "input": "，".join(map(str, values)), "output": "，".join(map(str, answer))})
    for _ in range(PER_TASK):
        _, _, country, capital = rng.choice(CAPITALS)
        q = rng.choice([f"{country}的首都是哪里？", f"请说出{country}的首都。", f"哪个城市是{country}的首都？"])
        tasks.append({"instruction": q, "input": "", "output": f"{country}的首都是{capital}。"})
    for _ in range(PER_TASK):
        subject, verb, obj = rng.choice(NEGATE_ZH)
        sentence = f"{subject}{verb}{obj}。"
        kind = rng.randrange(3)
        if kind == 0:
            tasks.append({"instruction": "把下面的句子改成否定句。", "input": sentence,
                          "output": f"{subject}不{verb}{obj}。"})
        elif kind == 1:
            tasks.append({"instruction": "把下面的句子改成疑问句。", "input": sentence, "output": f"{subject}{verb}{obj}吗？"})
        else:
            tasks.append({"instruction": "在下面的句子前面加上“今天”。", "input": sentence, "output": f"今天{sentence}"})
    return tasks


def unique(tasks, rng):
    seen, out = set(), []
    for t in tasks:
        key = (t["instruction"], t["input"])
        if key not in seen:
            seen.add(key)
            out.append(t)
    rng.shuffle(out)
    return out


def chatml(task):
    """The example as the chatml template writes it, so the merges cover the template's words too."""
    prompt = "\n".join(part for part in (task["instruction"], task["input"]) if part)
    return f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n{task['output']}<|im_end|>\n"


def write_tokenizer(texts):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(MODEL / "tokenizer.json"))
    config = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "model_max_length": 512, "tokenizer_class": "PreTrainedTokenizerFast"}
    (MODEL / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return tokenizer


def main():
    rng = random.Random(2024)
    data = {"alpaca_en_demo.json": unique(english(rng), rng), "alpaca_zh_demo.json": unique(chinese(rng), rng)}
    texts = []
    for name, tasks in data.items():
        (DATA / name).write_text(json.dumps(tasks, ensure_ascii=False, indent=2) + "\n")
        texts += [chatml(t) for t in tasks]
        print(f"{DATA / name}: {len(tasks)} examples")
    MODEL.mkdir(parents=True, exist_ok=True)
    tokenizer = write_tokenizer(texts)
    vocab = tokenizer.get_vocab_size()
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab, "hidden_size": 128,
              "intermediate_size": 384, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "initializer_range": 0.02,
              "tie_word_embeddings": False, "bos_token_id": None, "eos_token_id": tokenizer.token_to_id("<|im_end|>"),
              "pad_token_id": tokenizer.token_to_id("<|endoftext|>"), "torch_dtype": "float32"}
    (MODEL / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"{MODEL}: tokenizer of {vocab} tokens, config.json")


if __name__ == "__main__":
    main()
