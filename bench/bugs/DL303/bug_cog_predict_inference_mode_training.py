# source: https://github.com/replicate/cog/issues/1681
# category: DL303
# expect: flag 40, 46
# evidence: predict() fits the model under @torch.inference_mode(); with the loss forced to requires_grad the error goes away, but every parameter's grad stays None, the weights never change and the loss never decreases
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasePredictor:
    def setup(self):
        pass


class Fitter(nn.Module):
    """Per-request model: optimised on the request's own data inside predict()."""

    def __init__(self, in_dim=3, hidden=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, coords):
        return self.net(coords)


class Predictor(BasePredictor):
    def setup(self):
        torch.manual_seed(0)
        self.model = Fitter()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)
        self.losses = []

    def fit_step(self, coords, target):
        pred = self.model(coords)
        loss = F.mse_loss(pred, target)
        if not loss.requires_grad:
            loss.requires_grad_(True)  # the reporter's workaround for "does not require grad"
        return loss

    @torch.inference_mode()
    def predict(self, coords: torch.Tensor, target: torch.Tensor, steps: int = 20) -> torch.Tensor:
        self.model.train()
        for _ in range(steps):
            self.optimizer.zero_grad()
            loss = self.fit_step(coords, target)
            loss.backward()
            self.optimizer.step()
            self.losses.append(loss.item())
        self.model.eval()
        return self.model(coords)


if __name__ == "__main__":
    torch.manual_seed(0)
    coords = torch.randn(32, 3)
    target = coords.sum(dim=1, keepdim=True).sin()

    predictor = Predictor()
    predictor.setup()
    w0 = [p.detach().clone() for p in predictor.model.parameters()]
    predictor.predict(coords, target, steps=20)

    assert all(p.grad is None for p in predictor.model.parameters())
    assert all(torch.equal(a, p) for a, p in zip(w0, predictor.model.parameters()))
    assert max(predictor.losses) - min(predictor.losses) < 1e-6  # the loss never moves

    # the same predict body without the decorator does learn
    fresh = Predictor()
    fresh.setup()
    Predictor.predict.__wrapped__(fresh, coords, target, steps=20)
    assert fresh.losses[-1] < fresh.losses[0]
    print("evidence holds: under inference_mode the forced-requires_grad loss trains nothing; the undecorated body learns")
