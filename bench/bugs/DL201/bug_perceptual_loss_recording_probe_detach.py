# source: https://github.com/myscience/open-genie/issues/6
# category: DL201
# expect: flag 22
# evidence: the tokenizer's gradients are identical whether the perceptual loss is weighted 1 or 0, although its value is positive
from collections import defaultdict
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F


class RecordingProbe:
    def __init__(self):
        self._data = defaultdict(list)

    @property
    def features(self):
        return self._data

    def __call__(self, module, _input, output, name=None):
        self._data[name].append(output.detach())

    def clean(self):
        self._data = defaultdict(list)


class PerceptualLoss(nn.Module):
    def __init__(self, feat_layers=("features.1", "features.3"), num_frames=2):
        super().__init__()
        self.model = nn.Module()
        self.model.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.model.eval()
        self.model.requires_grad_(False)
        self.num_frames = num_frames
        self.recorder = RecordingProbe()
        for name, module in self.model.named_modules():
            if name in feat_layers:
                module.register_forward_hook(partial(self.recorder, name=name))

    def forward(self, rec_video, inp_video):
        b, c, t, h, w = inp_video.shape
        idx = torch.randperm(t)[: self.num_frames]
        fake_frames = rec_video[:, :, idx].transpose(1, 2).reshape(-1, c, h, w)
        real_frames = inp_video[:, :, idx].transpose(1, 2).reshape(-1, c, h, w)

        self.model.features(real_frames)
        real_feat = self.recorder.features
        self.recorder.clean()
        self.model.features(fake_frames)
        fake_feat = self.recorder.features
        self.recorder.clean()

        losses = [F.mse_loss(fake_feat[k][0], real_feat[k][0]) for k in real_feat]
        return torch.stack(losses).sum()


class VideoTokenizer(nn.Module):
    def __init__(self, d_codebook=4, perc_weight=1.0):
        super().__init__()
        self.enc = nn.Conv3d(3, d_codebook, kernel_size=(1, 2, 2), stride=(1, 2, 2))
        self.dec = nn.ConvTranspose3d(d_codebook, 3, kernel_size=(1, 2, 2), stride=(1, 2, 2))
        self.perc_crit = PerceptualLoss()
        self.perc_weight = perc_weight

    def forward(self, video):
        return torch.sigmoid(self.dec(torch.tanh(self.enc(video))))

    def compute_loss(self, video):
        rec_video = self(video)
        rec_loss = F.mse_loss(rec_video, video)
        perc_loss = self.perc_crit(rec_video, video)
        return rec_loss + self.perc_weight * perc_loss, perc_loss


def train_step(model, optimizer, video):
    loss, perc_loss = model.compute_loss(video)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item(), perc_loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    tokenizer = VideoTokenizer()
    optimizer = torch.optim.AdamW([p for p in tokenizer.parameters() if p.requires_grad], lr=1e-3)
    video = torch.rand(2, 3, 4, 8, 8)
    params = list(tokenizer.enc.parameters()) + list(tokenizer.dec.parameters())

    torch.manual_seed(1)
    tokenizer.perc_weight = 1.0
    loss_on, perc = tokenizer.compute_loss(video)
    g_on = torch.autograd.grad(loss_on, params)
    torch.manual_seed(1)
    tokenizer.perc_weight = 0.0
    loss_off, _ = tokenizer.compute_loss(video)
    g_off = torch.autograd.grad(loss_off, params)
    assert perc.item() > 0
    assert all(torch.equal(a, b) for a, b in zip(g_on, g_off))
    tokenizer.perc_weight = 1.0
    train_step(tokenizer, optimizer, video)
    print("evidence holds: the probe stores detached features, so the perceptual loss never reaches the tokenizer")
