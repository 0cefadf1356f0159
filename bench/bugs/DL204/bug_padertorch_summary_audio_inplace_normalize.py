# source: https://github.com/fgnt/padertorch/pull/16
# category: DL204
# expect: flag 23, 33, 34
# evidence: pt.summary.audio normalises the detached numpy view of the model output in place, so the MSE backward reads the rescaled samples and the gradient silently differs from the one without the summary.
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def to_numpy(array, detach=False):
    """padertorch.utils.to_numpy"""
    if isinstance(array, torch.Tensor):
        if detach:
            array = array.detach()
        array = array.cpu()
        return array.numpy()
    return np.asarray(array)


def audio(signal, sampling_rate: int = 16000, batch_first=False, normalize=True):
    """padertorch.summary.audio: prepare a signal for tensorboard."""
    signal = to_numpy(signal, detach=True)
    assert signal.ndim in [1, 2], signal.shape
    if signal.ndim == 2:
        if batch_first:
            signal = signal[0]
        else:
            signal = signal[:, 0]
    if normalize:
        denominator = np.max(np.abs(signal))
        if denominator > 0:
            signal /= denominator
            signal *= 0.95
    return signal, sampling_rate


class MaskEstimator(nn.Module):
    def __init__(self, frame=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(frame, 32), nn.ReLU(), nn.Linear(32, frame), nn.Sigmoid())

    def forward(self, example):
        noisy = example['noisy']                         # (T, B)
        mask = self.net(noisy.t()).t()
        return {'enhanced': mask * noisy}

    def review(self, example, outputs, with_summary=True):
        enhanced = outputs['enhanced']
        loss = F.mse_loss(enhanced, example['clean'])
        review = dict(loss=loss)
        if with_summary:
            review['audios'] = dict(enhanced=audio(enhanced, sampling_rate=8000))
        return review


def train_step(model, optimizer, example, with_summary=True):
    optimizer.zero_grad()
    outputs = model(example)
    review = model.review(example, outputs, with_summary=with_summary)
    review['loss'].backward()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    optimizer.step()
    return grads


if __name__ == "__main__":
    torch.manual_seed(0)
    clean = torch.randn(16, 4) * 0.1
    example = {'clean': clean, 'noisy': clean + 0.05 * torch.randn(16, 4)}

    model = MaskEstimator()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    grads_with_summary = train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), example, with_summary=True)

    model.load_state_dict(state)
    grads_plain = train_step(model, torch.optim.SGD(model.parameters(), lr=0.1), example, with_summary=False)

    with torch.no_grad():
        diff = max((a - b).abs().max().item() for a, b in zip(grads_with_summary, grads_plain))
    print("max |grad difference| caused by the tensorboard summary:", diff)
    assert diff > 1e-4, diff
    print("evidence holds: the in-place numpy normalisation of the detached output changed the gradient without any error")
