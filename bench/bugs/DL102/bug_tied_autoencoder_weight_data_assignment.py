# source: https://github.com/pytorch/xla/issues/2719
# category: DL102
# expect: flag 37
# evidence: decoder.weight is "tied" to encoder.weight by assigning .data; once the model is moved/converted (a float64 cast stands in for the move to the XLA device) the two parameters no longer share storage, an edit to encoder.weight no longer shows in decoder.weight, and after training steps decoder.weight != encoder.weight.t().
"""Notebook-style script from the report: a tied linear autoencoder, tied by .data assignment."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class AutoEncoder(nn.Module):
    def __init__(self, n_features=10, n_hidden=5):
        super().__init__()
        self.encoder = nn.Linear(n_features, n_hidden, bias=False)
        self.decoder = nn.Linear(n_hidden, n_features, bias=False)

    def forward(self, x):
        return self.decoder(torch.tanh(self.encoder(x)))


def train_loop(model, optimizer, batches):
    model.train()
    for x in batches:
        optimizer.zero_grad()
        recon = model(x)
        loss = F.mse_loss(recon, x)
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = AutoEncoder()

    # tie the decoder to the encoder
    model.decoder.weight.data = model.encoder.weight.data.t()
    assert model.decoder.weight.data_ptr() == model.encoder.weight.data_ptr()

    # move the model for training (XLA device in the report; a dtype move does the same to the tie)
    model_xla = model.to(torch.float64)
    with torch.no_grad():
        model_xla.encoder.weight[0, 0] = 0.1111
        print(model_xla.encoder.weight[0, :3], model_xla.decoder.weight[0, :3])
        tie_seen = model_xla.decoder.weight[0, 0].item() == 0.1111

    optimizer = torch.optim.SGD(model_xla.parameters(), lr=0.1)
    batches = [torch.randn(8, 10, dtype=torch.float64) for _ in range(5)]
    final_loss = train_loop(model_xla, optimizer, batches)

    with torch.no_grad():
        assert model_xla.decoder.weight.data_ptr() != model_xla.encoder.weight.data_ptr()
        assert not tie_seen
        gap = (model_xla.decoder.weight - model_xla.encoder.weight.t()).abs().max().item()
    assert gap > 1e-3, gap
    print("evidence holds: the .data tie did not survive the move; decoder and encoder.T differ by", round(gap, 4))
