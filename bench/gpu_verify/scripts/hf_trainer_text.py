"""Fine-tune a BERT-shaped classifier with the Hugging Face Trainer on text tokenized on the fly in the
dataset (a word-piece-like hashing tokenizer in Python); the model is built from a config (no download)."""

import random

import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

WORDS = [f"w{i}" for i in range(5000)]


class TextClassification(Dataset):
    def __init__(self, length, max_length, vocab_size):
        self.length, self.max_length, self.vocab_size = length, max_length, vocab_size

    def __len__(self):
        return self.length

    def tokenize(self, text):
        ids = [101]
        for word in text.split():
            for piece in (word[:3], word[3:]):  # word pieces
                if piece:
                    ids.append(hash(piece) % (self.vocab_size - 1000) + 1000)
        ids = ids[: self.max_length - 1] + [102]
        return ids + [0] * (self.max_length - len(ids))

    def __getitem__(self, index):
        rng = random.Random(index)
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(200, 400)))
        ids = self.tokenize(text)
        return {
            "input_ids": torch.tensor(ids),
            "attention_mask": torch.tensor([int(i != 0) for i in ids]),
            "labels": torch.tensor(rng.randint(0, 1)),
        }


def main():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=512, num_hidden_layers=6, num_attention_heads=8,
                        intermediate_size=2048, num_labels=2)
    model = BertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir="hf_out",
        per_device_train_batch_size=64,
        max_steps=400,
        learning_rate=5e-5,
        logging_steps=20,
        save_strategy="no",
        report_to=[],
    )
    trainer = Trainer(model=model, args=args, train_dataset=TextClassification(100_000, 256, config.vocab_size))
    trainer.train()


if __name__ == "__main__":
    main()
