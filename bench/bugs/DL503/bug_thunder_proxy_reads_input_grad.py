# source: https://github.com/Lightning-AI/lightning-thunder/issues/1205
# category: DL503
# expect: flag 26, 27
# evidence: tracing a function whose input is torch.randn(3, requires_grad=True) + 1 reads .grad of that non-leaf input: torch warns "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed" and the recorded grad is None
import warnings

import torch


class TensorProxy:
    def __init__(self, name, shape, dtype, requires_grad, grad=None):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.requires_grad = requires_grad
        self.grad = grad

    def __repr__(self):
        return f"TensorProxy({self.name}, shape={tuple(self.shape)}, requires_grad={self.requires_grad})"


def tensorproxy(t, name):
    grad = None
    if t.requires_grad:
        # carry an existing gradient into the trace
        if t.grad is not None:
            grad = TensorProxy(name + "_grad", t.grad.shape, t.grad.dtype, False)
    return TensorProxy(name, t.shape, t.dtype, t.requires_grad, grad)


def jit(fn):
    def wrapped(*args):
        proxies = [tensorproxy(a, f"t{i}") if isinstance(a, torch.Tensor) else a for i, a in enumerate(args)]
        wrapped.last_trace = proxies
        return fn(*args)
    wrapped.last_trace = None
    return wrapped


def foo(x):
    return x


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(3, requires_grad=True) + 1
    (x * 2).sum().backward()  # x got used in a backward pass: still no .grad, it is not a leaf
    jfoo = jit(foo)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jfoo(x)
    assert out is x
    assert any("not a leaf Tensor is being accessed" in str(w.message) for w in caught)
    assert jfoo.last_trace[0].grad is None
    print("evidence holds: tensorproxy() reads .grad of a non-leaf input: torch warns and the value is always None")
