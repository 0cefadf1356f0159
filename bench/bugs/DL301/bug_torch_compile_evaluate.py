# source: https://github.com/pytorch/tutorials/pull/2496
# category: DL301
# expect: flag 57, 67
# evidence: every output returned by evaluate(model, inp) in the inference benchmark carries a grad_fn, i.e. autograd records a full backward graph for a pure inference timing loop.
import time

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


# Returns the result of running `fn()` and the time it took for `fn()` to run,
# in seconds. (The tutorial uses CUDA events; this CPU copy uses perf_counter.)
def timed(fn):
    start = time.perf_counter()
    result = fn()
    end = time.perf_counter()
    return result, end - start


# Generates random input and targets data for the model, where `b` is
# batch size.
def generate_data(b):
    return (
        torch.randn(b, 3, 16, 16).to(torch.float32),
        torch.randint(10, (b,)),
    )


N_ITERS = 5


class DenseNetLike(nn.Module):
    """Small stand-in for torchvision.models.densenet121()."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        )
        self.classifier = nn.Linear(8, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.classifier(x)


def init_model():
    return DenseNetLike().to(torch.float32)


def evaluate(mod, inp):
    return mod(inp)


model = init_model()

inp = generate_data(16)[0]
print("eager:", timed(lambda: evaluate(model, inp))[1])

eager_results = []
eager_times = []
for i in range(N_ITERS):
    inp = generate_data(16)[0]
    result, eager_time = timed(lambda: evaluate(model, inp))
    eager_results.append(result.grad_fn is not None)
    eager_times.append(eager_time)
    print(f"eager eval time {i}: {eager_time}")

print("~" * 10)
eager_med = np.median(eager_times)
print(f"(eval) eager median: {eager_med}")


if __name__ == "__main__":
    assert result.requires_grad and result.grad_fn is not None
    assert len(eager_results) == N_ITERS and all(eager_results)
    print("evidence holds: evaluate() outputs carry", type(result.grad_fn).__name__,
          "- a backward graph is built on every benchmark iteration")
