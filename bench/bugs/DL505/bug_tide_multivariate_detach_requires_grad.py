# source: https://github.com/sktime/pytorch-forecasting/pull/2208
# category: DL505
# expect: flag 67
# evidence: for multivariate targets TiDEModel.forward re-wraps each prediction as clone().detach().requires_grad_(True): backward runs without error, but no gradient reaches the encoder/decoder and the optimizer never changes them.
import torch
from torch import nn


class _TideModule(nn.Module):
    def __init__(self, input_dim, hidden, future_len, output_dim, static_dim):
        super().__init__()
        self.output_dim = output_dim
        self.future_len = future_len
        self.encoder = nn.Sequential(nn.Linear(input_dim + static_dim, hidden), nn.ReLU())
        self.decoder = nn.Linear(hidden, future_len * output_dim)

    def forward(self, x_in):
        input_vector, decoder_x_t, x_s = x_in
        h = self.encoder(torch.cat([input_vector.flatten(1), x_s], dim=1))
        out = self.decoder(h)
        return out.view(-1, self.future_len, self.output_dim)


class MultiLoss(nn.Module):
    def __init__(self, metrics):
        super().__init__()
        self.metrics = nn.ModuleList(metrics)

    def forward(self, y_pred, y_actual):
        return sum(m(p, y_actual[..., i]) for i, (m, p) in enumerate(zip(self.metrics, y_pred)))


class BaseModel(nn.Module):
    def transform_output(self, prediction, target_scale):
        if isinstance(prediction, list):
            return [p * s[:, 1:2] + s[:, 0:1] for p, s in zip(prediction, target_scale)]
        return prediction * target_scale[:, 1:2].unsqueeze(-1) + target_scale[:, 0:1].unsqueeze(-1)

    def to_network_output(self, **results):
        return dict(results)

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self(x)
        loss = self.loss(out["prediction"], y)
        return loss


class TiDEModel(BaseModel):
    def __init__(self, encoder_length=6, prediction_length=3, n_targets=2, hidden=16, static_dim=2):
        super().__init__()
        self.output_dim = n_targets
        self.static_size = static_dim
        self.model = _TideModule(encoder_length * n_targets, hidden, prediction_length, n_targets, static_dim)
        self.loss = MultiLoss([nn.L1Loss() for _ in range(n_targets)])

    def forward(self, x):
        input_vector = x["encoder_cont"]
        decoder_x_t = None
        x_s = x["static"] if self.static_size > 0 else None
        x_in = (input_vector, decoder_x_t, x_s)
        prediction = self.model(x_in)

        if self.output_dim > 1:  # for multivariate targets
            # from (batch size, seq len, output_dim) to (output_dim, batch size, seq len)
            prediction = prediction.permute(2, 0, 1)
            prediction = [i.clone().detach().requires_grad_(True) for i in prediction]

        prediction = self.transform_output(prediction, target_scale=x["target_scale"])
        return self.to_network_output(prediction=prediction)


def make_batch(bs=4, enc_len=6, pred_len=3, n_targets=2):
    x = {
        "encoder_cont": torch.randn(bs, enc_len, n_targets),
        "static": torch.randn(bs, 2),
        "target_scale": [torch.tensor([[0.0, 1.0]]).repeat(bs, 1) for _ in range(n_targets)],
    }
    y = torch.randn(bs, pred_len, n_targets)
    return x, y


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TiDEModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    losses = []
    for batch_idx in range(5):
        batch = make_batch()
        loss = model.training_step(batch, batch_idx)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    assert loss.requires_grad and loss.grad_fn is not None
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    print("evidence holds: 5 steps ran without error (loss grad_fn=%s) but every encoder/decoder "
          "parameter has grad None and is unchanged" % type(loss.grad_fn).__name__)
