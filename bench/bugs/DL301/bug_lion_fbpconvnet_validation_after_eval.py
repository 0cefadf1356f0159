# source: https://github.com/CambridgeCIA/LION/issues/115
# category: DL301
# expect: flag 50, 51
# evidence: the training script's validation pass after model.eval() builds a graph for every validation batch: each reconstruction carries a grad_fn whose graph reaches the weights, though no backward follows
import numpy as np
import torch
import torch.nn as nn


class FBPConvNet(nn.Module):
    """U-Net style post-processing of an FBP reconstruction (residual)."""

    def __init__(self, channels=8):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(1, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU())
        self.up = nn.ConvTranspose2d(channels, channels, 2, stride=2)
        self.out = nn.Conv2d(2 * channels, 1, 1)

    def forward(self, x):
        d = self.down(x)
        m = self.up(self.mid(self.pool(d)))
        return x + self.out(torch.cat([d, m], dim=1))


def run_training(dataloader, validation, train_param):
    device = torch.device("cpu")
    model = FBPConvNet().to(device)
    loss_fcn = torch.nn.MSELoss()
    optimiser = torch.optim.Adam(model.parameters(), lr=train_param["learning_rate"], betas=(0.9, 0.99))

    epochs = train_param["epochs"]
    train_loss = np.zeros(epochs)
    valid_loss = np.zeros(epochs)
    min_valid_loss = np.inf

    for epoch in range(epochs):
        model.train()
        for index, (data, target) in enumerate(dataloader):
            optimiser.zero_grad()
            reconstruction = model(data.to(device))
            loss = loss_fcn(reconstruction, target.to(device))
            loss.backward()
            train_loss[epoch] += loss.item()
            optimiser.step()

        # Validation
        model.eval()
        for data, target in validation:
            reconstruction = model(data.to(device))
            loss = loss_fcn(target.to(device), reconstruction)
            valid_loss[epoch] += loss.item()

        print(f"Epoch {epoch+1} - Training loss: {train_loss[epoch]} - Validation loss: {valid_loss[epoch]}")
        if min_valid_loss > valid_loss[epoch]:
            print(f"Validation Loss Decreased({min_valid_loss:.6f}--->{valid_loss[epoch]:.6f}) \t Saving The Model")
            min_valid_loss = valid_loss[epoch]
    return model, valid_loss


if __name__ == "__main__":
    torch.manual_seed(0)
    dataloader = [(torch.randn(2, 1, 16, 16), torch.randn(2, 1, 16, 16)) for _ in range(3)]
    validation = [(torch.randn(2, 1, 16, 16), torch.randn(2, 1, 16, 16)) for _ in range(2)]
    seen = []  # (training mode, output) of every forward of the network

    def record(module, inputs, output):
        seen.append((module.training, output))

    torch.nn.modules.module.register_module_forward_hook(
        lambda module, inputs, output: record(module, inputs, output) if isinstance(module, FBPConvNet) else None)
    model, valid_loss = run_training(dataloader, validation, {"learning_rate": 1e-3, "epochs": 2})
    reconstructions = [out for training, out in seen if not training]
    assert len(reconstructions) == 4
    assert all(r.grad_fn is not None for r in reconstructions)
    # the graph of a validation reconstruction still reaches the model's weights
    grads = torch.autograd.grad(reconstructions[-1].sum(), model.out.weight)
    assert grads[0].abs().sum() > 0
    print("evidence holds: all %d validation reconstructions (model in eval mode) carry a grad_fn back to the weights"
          % len(reconstructions))
