"""Instruction fine-tuning with the HF Trainer (the Alpaca-style layout): a prompt
template, one tokenizer call per example, labels copied from the input ids, a padding
collator. The tokenizer and the model are built locally (a word-level vocabulary and a
one-layer GPT-2 config): nothing is downloaded."""

import argparse
import copy

import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from torch.utils.data import Dataset
from transformers import (
    DataCollatorForSeq2Seq,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

PROMPT = "### Instruction: {instruction} ### Response: {output}"

EXAMPLES = [
    {"instruction": "name a colour", "output": "blue"},
    {"instruction": "name a fruit that is yellow", "output": "a banana is yellow"},
    {"instruction": "add two and two", "output": "two and two is four"},
    {"instruction": "say hello", "output": "hello"},
    {"instruction": "name an animal that can fly", "output": "a bird can fly and so can a bat"},
    {"instruction": "what colour is the sky", "output": "the sky is blue"},
    {"instruction": "count to three", "output": "one two three"},
    {"instruction": "name a fruit", "output": "an apple"},
] * 4

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--model_max_length", type=int, default=32)
parser.add_argument("--output_dir", default="finetune-output")
args = parser.parse_args()


def build_tokenizer():
    words = sorted({w for ex in EXAMPLES for w in PROMPT.format(**ex).split()})
    vocab = {"[PAD]": 0, "[UNK]": 1, "[EOS]": 2}
    for word in words:
        vocab[word] = len(vocab)
    backend = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        pad_token="[PAD]",
        eos_token="[EOS]",
        model_max_length=args.model_max_length,
    )


class SupervisedDataset(Dataset):
    """Dataset for supervised fine-tuning."""

    def __init__(self, examples, tokenizer):
        super().__init__()
        self.items = []
        for example in examples:
            text = PROMPT.format(**example) + " " + tokenizer.eos_token
            tokenized = tokenizer(text, padding="longest", truncation=True, max_length=tokenizer.model_max_length)
            tokenized["labels"] = copy.deepcopy(tokenized["input_ids"])
            self.items.append(dict(tokenized))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class PrintLoss(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            print(f"step {state.global_step} loss {logs['loss']:.6f}")


def train():
    torch.manual_seed(args.seed)
    tokenizer = build_tokenizer()
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=64,
        n_embd=32,
        n_layer=1,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = GPT2LMHeadModel(config)

    train_dataset = SupervisedDataset(EXAMPLES, tokenizer)
    data_collator = DataCollatorForSeq2Seq(tokenizer, model=model, padding=True, label_pad_token_id=-100)

    training_args = TrainingArguments(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=4,
        learning_rate=5e-3,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        fp16=torch.cuda.is_available(),
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        data_collator=data_collator,
        processing_class=tokenizer,
        callbacks=[PrintLoss()],
    )
    trainer.train()
    print("device", next(trainer.model.parameters()).device)


if __name__ == "__main__":
    train()
