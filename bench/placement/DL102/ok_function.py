# source: placement matrix
# category: DL102
# expect: clean
# evidence: train() syncs the frozen copy with load_state_dict, which copies values into its own storage, so it lags one adam step behind the live net at the end.
import copy
import torch
import torch.nn as nn


class QHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def forward(self, obs):
        return self.body(obs)


def train(live, frozen, adam, batches, every):
    for i, (obs, act, rew, nxt) in enumerate(batches):
        if i % every == 0:
            frozen.load_state_dict(live.state_dict())
        with torch.no_grad():
            goal = rew + 0.99 * frozen(nxt).max(dim=1).values
        pred = live(obs).gather(1, act.unsqueeze(1)).squeeze(1)
        adam.zero_grad()
        nn.functional.smooth_l1_loss(pred, goal).backward()
        adam.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    live = QHead()
    frozen = copy.deepcopy(live).requires_grad_(False)
    data = [(torch.randn(8, 4), torch.randint(0, 2, (8,)), torch.randn(8), torch.randn(8, 4)) for _ in range(5)]
    train(live, frozen, torch.optim.Adam(live.parameters(), lr=0.01), data, every=3)
    # last sync at i == 3, then i == 4 stepped only `live`: `frozen` should lag behind
    assert all(f.data_ptr() != l.data_ptr() for f, l in zip(frozen.parameters(), live.parameters()))
    assert not any(torch.equal(f, l) for f, l in zip(frozen.parameters(), live.parameters()))
    print("evidence holds: the frozen copy keeps its own storage and lags behind the live net")
