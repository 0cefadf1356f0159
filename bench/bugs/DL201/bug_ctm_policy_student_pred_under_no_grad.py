# source: https://github.com/Aaditya-Prasad/consistency-policy/issues/4
# category: DL201
# expect: flag 62, 64
# evidence: the student's gradients are identical with the CTM loss weighted 1 or 0: the CTM term has no grad_fn, only the DSM term trains the student
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


def Huber_Loss(pred, target, delta=0.0, weights=1.0):
    adj_diff = torch.sqrt((pred - target) ** 2 + delta ** 2) - delta
    return (adj_diff * weights).mean()


class NoiseScheduler:
    def __init__(self, time_min=0.002, time_max=80.0):
        self.time_min, self.time_max = time_min, time_max

    def sample_times(self, n):
        return torch.rand(n) * (self.time_max - self.time_min) + self.time_min


class ConditionalUnet(nn.Module):
    def __init__(self, action_dim=2, cond_dim=4, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(action_dim + 2 + cond_dim, hidden), nn.Mish(), nn.Linear(hidden, action_dim))

    def forward(self, x, t, s, global_cond):
        return self.net(torch.cat([x, t[:, None], s[:, None], global_cond], dim=-1))


class CTMPPolicy(nn.Module):
    def __init__(self, losses=None, delta=0.0):
        super().__init__()
        self.model = ConditionalUnet()
        self.model_ema = copy.deepcopy(self.model)
        self.model_ema.requires_grad_(False)
        self.noise_scheduler = NoiseScheduler()
        self.losses = losses or {"ctm": 1.0, "dsm": 1.0}
        self.delta = delta

    def _forward(self, model, x, times, stops, global_cond=None):
        c_skip = (stops / times)[:, None]
        return c_skip * x + (1 - c_skip) * model(x, times, stops, global_cond)

    def compute_loss(self, trajectory, global_cond):
        B = trajectory.shape[0]
        noise = torch.randn_like(trajectory)
        times = self.noise_scheduler.sample_times(B)
        stops = times * torch.rand(B)
        u_times = times - (times - stops) * 0.1
        noise_traj = trajectory + noise * times[:, None]
        u_noise_traj = trajectory + noise * u_times[:, None]
        total_loss = {}

        pred = self._forward(self.model, noise_traj, times, stops, global_cond=global_cond)
        with torch.no_grad():
            target = self._forward(self.model_ema, u_noise_traj, u_times, stops, global_cond=global_cond)

        with torch.no_grad():
            start = torch.tensor([self.noise_scheduler.time_min]).expand(times.shape)
            pred = self._forward(self.model_ema, pred, stops, start, global_cond=global_cond)
            target = self._forward(self.model_ema, target, stops, start, global_cond=global_cond)

        loss = Huber_Loss(pred, target, delta=self.delta)
        total_loss["ctm"] = loss * self.losses["ctm"]

        dsm_pred = self._forward(self.model, noise_traj, times, times * 0 + self.noise_scheduler.time_min, global_cond=global_cond)
        total_loss["dsm"] = F.mse_loss(dsm_pred, trajectory) * self.losses["dsm"]
        return sum(total_loss.values()), total_loss


if __name__ == "__main__":
    torch.manual_seed(0)
    policy = CTMPPolicy()
    trajectory, cond = torch.randn(8, 2), torch.randn(8, 4)
    params = list(policy.model.parameters())
    torch.manual_seed(0)
    loss_on, parts = policy.compute_loss(trajectory, cond)
    g_on = torch.autograd.grad(loss_on, params)
    policy.losses["ctm"] = 0.0
    torch.manual_seed(0)
    loss_off, _ = policy.compute_loss(trajectory, cond)
    g_off = torch.autograd.grad(loss_off, params)
    assert parts["ctm"].grad_fn is None and parts["ctm"].item() > 0
    assert all(torch.equal(a, b) for a, b in zip(g_on, g_off))
    policy.losses["ctm"] = 1.0
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-4)
    loss, _ = policy.compute_loss(trajectory, cond)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print("evidence holds: the student's CTM prediction is pushed through model_ema under no_grad, so the CTM loss trains nothing")
