"""A PyTorch transformer encoder: attention, LayerNorm, MLP, residuals; N repeated blocks."""

from autograd_tui.scenarios import Param
from autograd_tui.scenarios._torch import REQUIRES, program_of  # noqa: F401

NAME = "torch-attention"
TITLE = "A PyTorch attention block"
SUMMARY = "hand-written multi-head attention + MLP blocks (nn.Module per block), float64"
THREADS = ("cpu (owner)",)
PARAMS = {"layers": Param(1, "how many blocks (each adds about 60 nodes)"),
          "seq": Param(6, "tokens per sequence"), "d_model": Param(16, "model width")}
NOTES = """
### An attention block

```
class Block(nn.Module):        # pre-norm: x + attn(ln1(x)), then x + mlp(ln2(x))
    q, k, v = qkv(ln1(x)).chunk(3, -1)        # split into heads: view + transpose
    p = softmax(q @ k.transpose(-2, -1) / sqrt(d_head) + causal_mask)
    x = x + proj(p @ v)
    x = x + fc2(gelu(fc1(ln2(x))))
```

**What to watch.**
1. The nodes group by module (`blocks.0.attn`, `blocks.0.mlp`, ...); with
   `layers=N` the N blocks fold into one group in the graph pane.
2. `SplitBackward0` (from `chunk`) gathers three gradients (q, k, v) before it runs:
   watch it in `not_ready`.
3. Each residual `AddBackward0` feeds two paths; the earlier block runs only after both
   have delivered.

**Ask a student:** in what order do the q, k and v branches run, and why (look at their
sequence numbers)?

**Source:** `Engine::evaluate_function` and `CompareNodeTaskTime` in
`torch/csrc/autograd/engine.cpp` and `engine.h`.
"""


def main(layers: int = 1, seq: int = 6, d_model: int = 16, batch: int = 2):
    import math

    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape
            h = self.heads
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in (q, k, v))
            mask = torch.full((t, t), float("-inf"), dtype=x.dtype).triu(1)
            p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // h) + mask, dim=-1)
            return self.proj((p @ v).transpose(1, 2).reshape(b, t, d))

    class MLP(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

        def forward(self, x):
            return self.fc2(nn.functional.gelu(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(d), Attention(d, 2)
            self.ln2, self.mlp = nn.LayerNorm(d), MLP(d)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block(d_model) for _ in range(layers))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    torch.manual_seed(0)
    model = Encoder().double()
    x = torch.randn(batch, seq, d_model, dtype=torch.float64)
    target = torch.randn(batch, seq, d_model, dtype=torch.float64)
    return nn.functional.mse_loss(model(x), target)


def program(layers: int, seq: int, d_model: int) -> dict:
    if layers < 1 or seq < 1 or d_model < 2 or d_model % 2:
        from autograd_tui.scenarios import ScenarioError

        raise ScenarioError("layers and seq must be at least 1, d_model even and at least 2",
                            usage=True)
    return program_of(lambda: main(layers, seq, d_model))()
