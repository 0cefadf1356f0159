# source: https://github.com/nianticlabs/monodepth2/issues/24
# category: DL302
# expect: flag 100, 103
# evidence: training batches update the weights, but the modified val() backpropagates losses computed inside its torch.no_grad() block and raises "element 0 of tensors does not require grad"
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class ResnetEncoder(nn.Module):
    def __init__(self):
        super(ResnetEncoder, self).__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)

    def forward(self, x):
        f1 = F.relu(self.conv1(x))
        f2 = F.relu(self.conv2(f1))
        return [f1, f2]


class DepthDecoder(nn.Module):
    def __init__(self):
        super(DepthDecoder, self).__init__()
        self.up = nn.Conv2d(16, 8, 3, padding=1)
        self.dispconv = nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, features):
        x = F.interpolate(F.relu(self.up(features[-1])), scale_factor=2) + features[0]
        disp = torch.sigmoid(self.dispconv(x))
        return {("disp", 0): F.interpolate(disp, scale_factor=2)}


class Trainer:
    def __init__(self, options, train_loader, val_loader):
        self.opt = options
        self.models = {"encoder": ResnetEncoder(), "depth": DepthDecoder()}
        self.parameters_to_train = []
        for m in self.models.values():
            self.parameters_to_train += list(m.parameters())
        self.model_optimizer = optim.Adam(self.parameters_to_train, self.opt.learning_rate)
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.val_iter = iter(self.val_loader)
        self.step = 0
        self.history = []

    def set_train(self):
        for m in self.models.values():
            m.train()

    def set_eval(self):
        for m in self.models.values():
            m.eval()

    def process_batch(self, inputs):
        features = self.models["encoder"](inputs[("color_aug", 0, 0)])
        outputs = self.models["depth"](features)
        losses = self.compute_losses(inputs, outputs)
        return outputs, losses

    def compute_losses(self, inputs, outputs):
        disp = outputs[("disp", 0)]
        target = inputs[("color", 0, 0)]
        # stand-in for the photometric term: the disparity must explain the target's brightness
        reprojection = (disp - target.mean(1, keepdim=True)).abs().mean()
        grad_x = (disp[:, :, :, :-1] - disp[:, :, :, 1:]).abs().mean()
        losses = {"loss": reprojection + self.opt.disparity_smoothness * grad_x}
        return losses

    def log(self, mode, inputs, outputs, losses):
        self.history.append((mode, self.step, losses["loss"].item()))

    def run_epoch(self):
        self.set_train()
        for batch_idx, inputs in enumerate(self.train_loader):
            outputs, losses = self.process_batch(inputs)

            self.model_optimizer.zero_grad()
            losses["loss"].backward()
            self.model_optimizer.step()

            if batch_idx % self.opt.log_frequency == 0:
                self.log("train", inputs, outputs, losses)
                self.val()
            self.step += 1

    def val(self):
        """Validate the model on a single minibatch (changed to also take a step on it)."""
        self.set_eval()
        try:
            inputs = next(self.val_iter)
        except StopIteration:
            self.val_iter = iter(self.val_loader)
            inputs = next(self.val_iter)

        with torch.no_grad():
            outputs, losses = self.process_batch(inputs)
            self.model_optimizer.zero_grad()
            losses["loss"].backward()
            self.model_optimizer.step()
            self.log("val", inputs, outputs, losses)
            del inputs, outputs, losses

        self.set_train()


def make_loader(n):
    batches = []
    for _ in range(n):
        img = torch.rand(2, 3, 16, 16)
        batches.append({("color", 0, 0): img, ("color_aug", 0, 0): img})
    return batches


if __name__ == "__main__":
    torch.manual_seed(0)
    opts = SimpleNamespace(learning_rate=1e-3, disparity_smoothness=1e-3, log_frequency=2)
    trainer = Trainer(opts, make_loader(3), make_loader(2))

    before = [p.detach().clone() for p in trainer.parameters_to_train]
    try:
        trainer.run_epoch()
        raised = None
    except RuntimeError as e:
        raised = str(e)

    assert raised is not None and "element 0 of tensors does not require grad" in raised, raised
    # the first training batch did step (so the training path is fine) before val() was reached
    assert any(not torch.equal(b, p) for b, p in zip(before, trainer.parameters_to_train))
    assert trainer.history == [("train", 0, trainer.history[0][2])]
    print("evidence holds: the training step updates the weights; backward on the validation losses built under no_grad raises")
