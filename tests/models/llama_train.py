"""Llama from transformers (random weights, small config: grouped-query attention, RoPE,
RMSNorm, SiLU MLP) trained as a student would: AdamW with weight decay, two steps with
zero_grad, clip_grad_norm_ and gradient checkpointing (non-reentrant) on, then the third
step's loss.

A script for `autograd-tui torch` / `check-order` (tests/engine/test_real_models.py); not a
test module. Nothing is downloaded: the model is built from a config.
"""

import torch
import transformers


def main():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=32)
    model = transformers.LlamaForCausalLM(config)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    for _ in range(2):
        ids = torch.randint(0, 64, (2, 10))
        opt.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    opt.zero_grad()
    ids = torch.randint(0, 64, (2, 10))
    return model(input_ids=ids, labels=ids).loss
