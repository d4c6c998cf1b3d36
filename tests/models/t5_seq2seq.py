"""T5 from transformers (random weights, small config): an encoder-decoder, the
sequence-to-sequence loss, relative position buckets, cross-attention, float64.

A script for `autograd-tui torch` / `check-order` (tests/engine/test_real_models.py); not a
test module. Nothing is downloaded: the model is built from a config.
"""

import torch
import transformers


def main():
    torch.manual_seed(0)
    config = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                   num_decoder_layers=2, num_heads=4, decoder_start_token_id=0,
                                   pad_token_id=0)
    model = transformers.T5ForConditionalGeneration(config).double()
    src = torch.randint(1, 64, (2, 9))
    tgt = torch.randint(1, 64, (2, 5))
    return model(input_ids=src, labels=tgt).loss
