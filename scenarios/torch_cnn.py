"""A small PyTorch CNN whose conv layer is used twice (shared weights), with a residual add."""

from autograd_tui.scenarios._torch import REQUIRES, program_of  # noqa: F401

NAME = "torch-cnn"
TITLE = "A PyTorch CNN with a shared layer"
SUMMARY = "one Conv2d used twice (shared weights) + residual add + Linear; cross-entropy"
THREADS = ("cpu (owner)",)
NOTES = """
### A CNN with a shared layer

```
h = relu(conv(x))
h = h + relu(conv(h))          # the same conv again: its weight's AccumulateGrad gets two edges
logits = fc(pool(h).flatten(1))
loss = cross_entropy(logits, labels)
```

**What to watch.**
1. The conv weight's `AccumulateGrad` has two dependencies (one per
   `ConvolutionBackward0`): it waits in `not_ready` until both gradients have arrived,
   and its `buffer_accumulate` shows `first` then `add`.
2. The residual `AddBackward0` sends the same gradient down two edges.

**Ask a student:** PyTorch sums the two gradients for the shared weight before
`AccumulateGrad` runs once.  What would change if it ran `AccumulateGrad` twice?

**Source:** `Engine::evaluate_function` (the `not_ready_` map) in
`torch/csrc/autograd/engine.cpp`; `InputBuffer::add`; `accumulateGrad` in
`functions/accumulate_grad.h`.
"""


def main():
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(3 * 3 * 3, 4)

        def forward(self, x):
            h = torch.relu(self.conv(x))
            h = h + torch.relu(self.conv(h))
            return self.fc(self.pool(h).flatten(1))

    torch.manual_seed(0)
    net = Net().double()
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    return nn.functional.cross_entropy(net(x), torch.tensor([1, 3]))


program = program_of(main)
