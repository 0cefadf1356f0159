# source: https://github.com/Tsinghua-MARS-Lab/DenseTNT/issues/11
# category: DL205
# expect: flag 64
# evidence: with 'point_sub_graph' the only use of goals_2D_mlps is the complete-trajectory branch, and target_feature.detach_() cuts it: goals_2D_mlps gets grad None and never changes although it is optimised.
from types import SimpleNamespace
from typing import Dict, List

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, Tensor

args = SimpleNamespace(hidden_size=16, future_frame_num=6, other_params={'complete_traj': True, 'point_sub_graph': True})


class MLP(nn.Module):
    def __init__(self, hidden_size, out_features=None):
        super().__init__()
        out_features = hidden_size if out_features is None else out_features
        self.linear = nn.Linear(hidden_size, out_features)
        self.layer_norm = nn.LayerNorm(out_features)

    def forward(self, hidden_states):
        return F.relu(self.layer_norm(self.linear(hidden_states)))


class CrossAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(hidden_size, hidden_size) for _ in range(3))

    def forward(self, hidden_states_query, hidden_states_key):
        att = torch.softmax(self.q(hidden_states_query) @ self.k(hidden_states_key).transpose(-1, -2), dim=-1)
        return att @ self.v(hidden_states_key)


class Decoder(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.future_frame_num = args.future_frame_num
        self.goals_2D_mlps = nn.Sequential(MLP(2, hidden_size), MLP(hidden_size), MLP(hidden_size))
        self.goals_2D_point_sub_graph = nn.Sequential(MLP(2, hidden_size), MLP(hidden_size))
        self.goals_2D_decoder = nn.Sequential(MLP(hidden_size * 2), nn.Linear(hidden_size * 2, 1))
        if 'complete_traj' in args.other_params:
            self.complete_traj_cross_attention = CrossAttention(hidden_size)
            self.complete_traj_decoder = nn.Sequential(MLP(hidden_size * 3), nn.Linear(hidden_size * 3, self.future_frame_num * 2))

    def get_scores(self, goals_2D_tensor: Tensor, hidden_states_i: Tensor):
        if 'point_sub_graph' in args.other_params:
            goals_2D_hidden = self.goals_2D_point_sub_graph(goals_2D_tensor)
        else:
            goals_2D_hidden = self.goals_2D_mlps(goals_2D_tensor)
        n = goals_2D_hidden.shape[0]
        logits = self.goals_2D_decoder(torch.cat([goals_2D_hidden, hidden_states_i.expand(n, -1)], dim=-1)).squeeze(-1)
        return F.log_softmax(logits, dim=-1)

    def goals_2D_per_example_calc_loss(self, i: int, goals_2D: np.ndarray, mapping: List[Dict], inputs: Tensor,
                                       inputs_lengths: List[int], hidden_states: Tensor, device, loss: Tensor,
                                       gt_points: np.ndarray, scores: Tensor, labels_is_valid: List[np.ndarray]):
        final_idx = mapping[i].get('final_idx', -1)
        if 'complete_traj' in args.other_params:
            target_feature = self.goals_2D_mlps(torch.tensor(gt_points[final_idx], dtype=torch.float, device=device))
            if True:
                target_feature.detach_()
                hidden_attention = self.complete_traj_cross_attention(
                    target_feature.unsqueeze(0).unsqueeze(0),
                    inputs[i][:inputs_lengths[i]].detach().unsqueeze(0)).squeeze(0).squeeze(0)
                predict_traj = self.complete_traj_decoder(
                    torch.cat([hidden_states[i, 0, :].detach(), target_feature, hidden_attention], dim=-1)).view([self.future_frame_num, 2])
            loss[i] += (F.smooth_l1_loss(predict_traj, torch.tensor(gt_points, dtype=torch.float, device=device), reduction='none')
                        * torch.tensor(labels_is_valid[i], dtype=torch.float, device=device).view(self.future_frame_num, 1)).mean()
        loss[i] += F.nll_loss(scores.unsqueeze(0), torch.tensor([mapping[i]['goals_2D_labels']], device=device))

    def forward(self, mapping, batch_size, inputs, inputs_lengths, hidden_states, device, labels, labels_is_valid):
        loss = torch.zeros(batch_size, device=device)
        for i in range(batch_size):
            goals_2D = mapping[i]['goals_2D']
            goals_2D_tensor = torch.tensor(goals_2D, device=device, dtype=torch.float)
            scores = self.get_scores(goals_2D_tensor, hidden_states[i, 0, :])
            self.goals_2D_per_example_calc_loss(i, goals_2D, mapping, inputs, inputs_lengths, hidden_states, device,
                                                loss, labels[i], scores, labels_is_valid)
        return loss.mean()


class VectorNetLike(nn.Module):
    def __init__(self, hidden_size=16):
        super().__init__()
        self.encoder = MLP(4, hidden_size)
        self.decoder = Decoder(hidden_size)

    def forward(self, mapping, polylines, labels, labels_is_valid, device='cpu'):
        inputs = self.encoder(polylines)                     # (B, N, H)
        hidden_states = inputs.max(dim=1, keepdim=True)[0]
        inputs_lengths = [inputs.shape[1]] * inputs.shape[0]
        return self.decoder(mapping, len(mapping), inputs, inputs_lengths, hidden_states, device, labels, labels_is_valid)


if __name__ == "__main__":
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = VectorNetLike()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = 2
    mapping = [{'goals_2D': rng.normal(size=(10, 2)), 'goals_2D_labels': int(rng.integers(10))} for _ in range(batch)]
    labels = rng.normal(size=(batch, args.future_frame_num, 2))
    labels_is_valid = [np.ones(args.future_frame_num) for _ in range(batch)]
    polylines = torch.randn(batch, 5, 4)

    mlps_before = [p.detach().clone() for p in model.decoder.goals_2D_mlps.parameters()]
    traj_before = [p.detach().clone() for p in model.decoder.complete_traj_decoder.parameters()]
    for step in range(3):
        loss = model(mapping, polylines, labels, labels_is_valid)
        optimizer.zero_grad()
        loss.backward()
        assert all(p.grad is None for p in model.decoder.goals_2D_mlps.parameters())
        optimizer.step()
    with torch.no_grad():
        assert all(torch.equal(a, p) for a, p in zip(mlps_before, model.decoder.goals_2D_mlps.parameters()))
        assert any(not torch.equal(a, p) for a, p in zip(traj_before, model.decoder.complete_traj_decoder.parameters()))
    print("evidence holds: target_feature.detach_() leaves goals_2D_mlps without gradient; it never trains while the trajectory decoder does")
