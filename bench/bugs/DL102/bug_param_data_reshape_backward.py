# source: https://github.com/pytorch/pytorch/issues/193981
# category: DL102
# expect: flag 29
# evidence: after `self.param.data = torch.randn(size=[5, 2])` between epochs the forward gives [7, 5] outputs but the backward raises "PermuteBackward0 returned an invalid gradient at index 0 - got [5, 2] but expected shape compatible with [3, 2]" although grad was reset to None; a new module around a fresh [5, 2] Parameter trains
import torch


class ReshapeReportModel(torch.nn.Module):
    """A bias-free linear map whose number of outputs is changed during training."""

    def __init__(self, param=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if param is None:
            self.param = torch.nn.Parameter(torch.randn(size=[3, 2]))
        else:
            self.param = torch.nn.Parameter(param)
        assert self.param.requires_grad

    def forward(self, input):
        output = input @ self.param.T
        return output

    def zero_grad_(self):
        # the report drops the gradient by hand, there is no optimizer step
        self.param.grad = None

    def grow_outputs(self, n_out):
        # swap the storage for one with a different number of rows
        self.param.data = torch.randn(size=[n_out, self.param.shape[1]])


def train(model, epochs, batch=7, n_in=2, grow_at=None, new_width=5):
    shapes = []
    for epoch in range(epochs):
        if epoch == grow_at:
            model.zero_grad_()
            model.grow_outputs(new_width)
        output = model(torch.randn(size=[batch, n_in]))
        shapes.append(tuple(output.shape))
        output.backward(gradient=torch.randn_like(output))
    return shapes


if __name__ == "__main__":
    torch.manual_seed(0)
    batch = 7

    # without the re-bind two epochs train fine
    assert train(ReshapeReportModel(), epochs=2, batch=batch) == [(batch, 3), (batch, 3)]

    # the parameter is re-bound to five rows before epoch 1
    model = ReshapeReportModel()
    try:
        train(model, epochs=2, batch=batch, grow_at=1)
    except RuntimeError as err:
        msg = str(err)
        assert "returned an invalid gradient at index 0 - got [5, 2] but expected shape compatible with [3, 2]" in msg, msg
    else:
        raise AssertionError("backward after the .data re-bind should fail")
    assert model.param.shape == torch.Size([5, 2])
    assert model(torch.randn(batch, 2)).shape == torch.Size([batch, 5])
    assert model.param.grad is None

    # the report's workaround: a new module built around a fresh Parameter of the new shape
    fresh = ReshapeReportModel(model.param.detach().clone())
    assert train(fresh, epochs=2, batch=batch) == [(batch, 5), (batch, 5)]
    assert fresh.param.grad.shape == torch.Size([5, 2])
    print("evidence holds: after `param.data = <5x2>` the epoch-1 backward raises the invalid-gradient error; a fresh [5, 2] Parameter trains")
