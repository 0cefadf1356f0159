# source: https://github.com/LoreGoetschalckx/GANalyze/issues/7
# category: DL601
# expect: flag 69, 90, 91
# evidence: the learned direction is updated with the sum of the gradients of every batch seen so far, never the current batch alone
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.optimizer import register_optimizer_step_pre_hook


class OneDirection(nn.Module):
    """Learns one latent direction; a step of size alpha moves z along it."""

    def __init__(self, dim_z, vocab_size, **kwargs):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, dim_z) * 0.1)
        self.criterion = nn.MSELoss()

    def transform(self, z, y, step_sizes):
        return z + step_sizes * self.w

    def compute_loss(self, current, target, batch_start, losses):
        loss = self.criterion(current, target)
        losses.append((batch_start, loss.item()))
        return loss


class TinyGenerator(nn.Module):
    def __init__(self, dim_z, vocab_size):
        super().__init__()
        self.fc = nn.Linear(dim_z + vocab_size, 3 * 4 * 4)

    def forward(self, z, y_onehot):
        return torch.tanh(self.fc(torch.cat([z, y_onehot], 1))).view(-1, 3, 4, 4)


class TinyAssessor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3 * 4 * 4, 1)

    def forward(self, x):
        return self.fc(x.flatten(1)).squeeze(1)


def one_hot(y, vocab_size):
    return torch.nn.functional.one_hot(y, vocab_size).float()


def denorm(x):
    return (x + 1) / 2


def train(transformation, generator, assessor, zs, ys, vocab_size, batch_size=4,
          train_alpha_a=-0.5, train_alpha_b=0.5):
    for p in generator.parameters():
        p.requires_grad = False
    generator.eval()
    for p in assessor.parameters():
        p.requires_grad = False
    assessor.eval()

    optimizer = optim.Adam(transformation.parameters(), lr=0.0002)
    loss_log = []
    num_samples, dim_z = zs.shape

    # loop over data batches
    for batch_start in range(0, num_samples, batch_size):
        s = slice(batch_start, min(num_samples, batch_start + batch_size))
        z = torch.from_numpy(zs[s]).float()
        y = torch.from_numpy(ys[s])
        step_sizes = (train_alpha_b - train_alpha_a) * np.random.random(size=(batch_size)) + train_alpha_a
        step_sizes_broadcast = np.repeat(step_sizes, dim_z).reshape([batch_size, dim_z])
        step_sizes_broadcast = torch.from_numpy(step_sizes_broadcast).float()

        # ganalyze steps
        gan_images = denorm(generator(z, one_hot(y, vocab_size)))
        out_scores = assessor(gan_images).float()
        target_scores = out_scores + torch.from_numpy(step_sizes).float()

        z_transformed = transformation.transform(z, one_hot(y, vocab_size), step_sizes_broadcast)
        gan_images_transformed = denorm(generator(z_transformed, one_hot(y, vocab_size)))
        out_scores_transformed = assessor(gan_images_transformed).float()

        # compute loss
        loss = transformation.compute_loss(out_scores_transformed, target_scores, batch_start, loss_log)

        # backwards
        loss.backward()
        optimizer.step()
    return optimizer, loss_log


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    dim_z, vocab_size = 6, 5
    zs = np.random.randn(24, dim_z).astype(np.float32)
    ys = np.random.randint(0, vocab_size, size=24)

    transformation = OneDirection(dim_z, vocab_size)
    fresh, seen = [], []
    transformation.w.register_hook(lambda g: fresh.append(g.detach().clone()))
    handle = register_optimizer_step_pre_hook(
        lambda opt, a, kw: seen.append(transformation.w.grad.detach().clone()))
    train(transformation, TinyGenerator(dim_z, vocab_size), TinyAssessor(), zs, ys, vocab_size)
    handle.remove()

    assert len(fresh) == len(seen) == 6
    for k in range(len(seen)):
        assert torch.allclose(seen[k], torch.stack(fresh[: k + 1]).sum(0), atol=1e-7)
    assert not torch.allclose(seen[-1], fresh[-1], atol=1e-7)
    print("evidence holds: each Adam step of the direction used the accumulated gradient of all batches so far")
