"""BERT from transformers (random weights, two layers, built from a config): sequence
classification loss.

A script for `autograd-tui torch` / `check-order` (tests/engine/test_real_models.py); not a
test module. Nothing is downloaded: the model is built from a config.
"""

import torch
import transformers


def main():
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=128,
                                     max_position_embeddings=32, num_labels=3)
    model = transformers.BertForSequenceClassification(config)
    ids = torch.randint(0, config.vocab_size, (2, 8))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0  # padding in the second sequence
    labels = torch.tensor([0, 2])
    return model(input_ids=ids, attention_mask=mask, labels=labels).loss
