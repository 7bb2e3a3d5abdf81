"""XLA101 dynamic-padding: each batch is padded to its own longest sentence.

`tokenizer(batch, padding=True)` makes every batch a new shape, and on torch_xla every
new input shape is a new graph to compile. Expect `xlalint check` to flag the tokenizer
call; `xlalint run --compare --unsafe-fixes examples/dynamic_padding.py` runs it as is
and with `padding="max_length", max_length=32, truncation=True` (max-length from
examples/xlalint.toml): the original compiles a new graph for most steps (14 in 24), the
fixed copy compiles one and reuses it.

Runs on CPU with PJRT_DEVICE=CPU. The tokenizer is built here from a word list (no
download).
"""

import random

import torch
import torch_xla
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from torch.utils.data import DataLoader
from transformers import PreTrainedTokenizerFast

WORD_LIST = """
the a model graph tensor device compile step batch loss small large fast slow
train data word sentence token layer weight update cache shape pad length
"""
WORDS = WORD_LIST.split()
STEPS = 24
BATCH_SIZE = 8


def build_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"[PAD]": 0, "[UNK]": 1, **{word: i + 2 for i, word in enumerate(WORDS)}}
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]")


def make_dataset(count: int, rng: random.Random) -> list[tuple[str, int]]:
    """Sentences of 3 to 30 words, mostly short as in real text; the label says whether
    "fast" occurs in it."""
    examples = []
    for _ in range(count):
        length = min(30, 3 + int(rng.expovariate(1 / 5)))
        words = [rng.choice(WORDS) for _ in range(length)]
        examples.append((" ".join(words), int("fast" in words)))
    return examples


class BagOfWords(torch.nn.Module):
    def __init__(self, vocab_size: int, dim: int = 32) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, dim)
        self.head = torch.nn.Linear(dim, 2)

    def forward(self, input_ids, attention_mask):
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled)


def main() -> None:
    random.seed(0)
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    dataset = make_dataset(STEPS * BATCH_SIZE, random.Random(0))

    def collate(batch):
        texts, labels = zip(*batch)
        encoded = tokenizer(list(texts), padding=True, return_tensors="pt")
        return encoded["input_ids"], encoded["attention_mask"], torch.tensor(labels)

    loader = DataLoader(dataset, batch_size=BATCH_SIZE, collate_fn=collate, drop_last=True)
    device = torch_xla.device()
    model = BagOfWords(len(tokenizer)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = torch.nn.CrossEntropyLoss()

    for input_ids, attention_mask, labels in loader:
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        labels = labels.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(input_ids, attention_mask), labels)
        loss.backward()
        optimizer.step()
        torch_xla.sync()

    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
