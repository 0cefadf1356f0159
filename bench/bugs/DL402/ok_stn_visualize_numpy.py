# source: https://github.com/pytorch/tutorials/blob/main/intermediate_source/spatial_transformer_tutorial.py
# category: DL402
# expect: clean
# evidence: visualize_stn computes model.stn(data) inside torch.no_grad(), so the transformed tensor does not require grad and convert_image_np's inp.numpy() works.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cpu")


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

        # Spatial transformer localization-network
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True)
        )

        # Regressor for the 3 * 2 affine matrix
        self.fc_loc = nn.Sequential(
            nn.Linear(10 * 3 * 3, 32),
            nn.ReLU(True),
            nn.Linear(32, 3 * 2)
        )

        # Initialize the weights/bias with identity transformation
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    # Spatial transformer network forward function
    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)

        grid = F.affine_grid(theta, x.size())
        x = F.grid_sample(x, grid)

        return x

    def forward(self, x):
        # transform the input
        x = self.stn(x)

        # Perform the usual forward pass
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def make_grid(tensor, nrow=8, padding=2):
    # minimal stand-in for torchvision.utils.make_grid: tile a batch horizontally
    tiles = [F.pad(t, (padding, padding, padding, padding)) for t in tensor]
    grid = torch.cat(tiles, dim=2)
    return grid.expand(3, -1, -1)


def convert_image_np(inp):
    """Convert a Tensor to numpy image."""
    inp = inp.numpy().transpose((1, 2, 0))
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    inp = std * inp + mean
    inp = np.clip(inp, 0, 1)
    return inp


def visualize_stn():
    with torch.no_grad():
        # Get a batch of training data
        data = next(iter(test_loader))[0].to(device)

        input_tensor = data.cpu()
        transformed_input_tensor = model.stn(data).cpu()

        in_grid = convert_image_np(
            make_grid(input_tensor))

        out_grid = convert_image_np(
            make_grid(transformed_input_tensor))

    return in_grid, out_grid


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net().to(device)
    test_loader = [(torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,)))]

    in_grid, out_grid = visualize_stn()

    assert isinstance(out_grid, np.ndarray) and out_grid.shape == in_grid.shape
    assert model.fc_loc[2].bias.requires_grad
    print("evidence holds: model.stn output produced under no_grad converted to numpy without error, grid shape", out_grid.shape)
