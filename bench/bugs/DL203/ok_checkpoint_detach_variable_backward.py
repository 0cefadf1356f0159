# source: https://github.com/pytorch/pytorch/blob/main/torch/utils/checkpoint.py
# category: DL203
# expect: clean
# evidence: the re-run forward starts from detached inputs, torch.autograd.backward on it works, and the gradients match the plain model
import torch
import torch.nn as nn


def detach_variable(inputs):
    if isinstance(inputs, tuple):
        out = []
        for inp in inputs:
            if not isinstance(inp, torch.Tensor):
                out.append(inp)
                continue
            x = inp.detach()
            x.requires_grad = inp.requires_grad
            out.append(x)
        return tuple(out)
    raise RuntimeError("Only tuple of tensors is supported. Got Unsupported input type: ", type(inputs).__name__)


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, *args):
        ctx.run_function = run_function
        ctx.save_for_backward(*args)
        with torch.no_grad():
            outputs = run_function(*args)
        return outputs

    @staticmethod
    def backward(ctx, *args):
        inputs = ctx.saved_tensors
        detached_inputs = detach_variable(tuple(inputs))
        with torch.enable_grad():
            outputs = ctx.run_function(*detached_inputs)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        outputs_with_grad = []
        args_with_grad = []
        for i in range(len(outputs)):
            if torch.is_tensor(outputs[i]) and outputs[i].requires_grad:
                outputs_with_grad.append(outputs[i])
                args_with_grad.append(args[i])
        torch.autograd.backward(outputs_with_grad, args_with_grad)
        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else None for inp in detached_inputs)
        return (None,) + grads


def checkpoint(function, *args):
    return CheckpointFunction.apply(function, *args)


class Net(nn.Module):
    def __init__(self, use_checkpoint):
        super().__init__()
        self.use_checkpoint = use_checkpoint
        self.inp = nn.Linear(6, 8)
        self.block = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh())
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        h = self.inp(x)
        h = checkpoint(self.block, h) if self.use_checkpoint else self.block(h)
        return self.out(h)


if __name__ == "__main__":
    torch.manual_seed(0)
    plain, ckpt = Net(False), Net(True)
    ckpt.load_state_dict(plain.state_dict())
    x, y = torch.randn(5, 6), torch.randn(5, 1)
    for net in (plain, ckpt):
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
    for (name, p), q in zip(plain.named_parameters(), ckpt.parameters()):
        assert q.grad is not None and torch.allclose(p.grad, q.grad, atol=1e-6), name
    print("evidence holds: backward through the recomputation of detached inputs gives the same gradients")
