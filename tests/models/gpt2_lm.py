"""GPT-2 from transformers (random weights, built from a small config): language-model loss.

A script for `autograd-tui torch` / `check-order` (tests/engine/test_real_models.py); not a
test module. Nothing is downloaded: the model is built from a config.
"""

import torch
import transformers


def main():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=100,
                                     n_positions=32, bos_token_id=99,
                                     eos_token_id=99)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, config.vocab_size, (2, 8))
    return model(input_ids=ids, labels=ids).loss
