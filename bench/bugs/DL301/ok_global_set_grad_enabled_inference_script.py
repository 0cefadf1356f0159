# source: https://github.com/pytorch/pytorch/issues/40973
# category: DL301
# expect: clean
# evidence: the module-level inference loop has no `with torch.no_grad()`, but the script switched autograd off globally with torch.set_grad_enabled(False) first, so no output carries a graph.
import os

import numpy as np
import torch
from torch import nn

current_path = os.path.dirname(os.path.abspath(__file__))
testset_folder = os.path.join(current_path, '../datasets/widerface/validation/images')

# the list file is read from disk in the report; a fixed list stands in for it here
test_dataset = ['0--Parade/img_%d.jpg' % k for k in range(4)]

torch.manual_seed(0)
torch.set_grad_enabled(False)
model = nn.Sequential(
    nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10),
)
model.eval()

device = torch.device('cpu')
model = model.to(device)

rng = np.random.RandomState(0)
graph_flags = []
for i, filename in enumerate(test_dataset):
    print('{}/{}'.format(i, len(test_dataset)))
    img_path = os.path.join(testset_folder, filename)
    img_raw = rng.randint(0, 255, size=(24 + 4 * i, 32, 3)).astype(np.uint8)  # cv2.imread(img_path)
    img = np.float32(img_raw)
    img = img.transpose(2, 0, 1)
    img = torch.from_numpy(img).unsqueeze(0)
    img = img.to(device)
    out = model(img)
    graph_flags.append((out.requires_grad, out.grad_fn is None))


if __name__ == "__main__":
    assert len(graph_flags) == len(test_dataset)
    assert all(not req and no_fn for req, no_fn in graph_flags), graph_flags
    assert not torch.is_grad_enabled()
    assert all(p.requires_grad for p in model.parameters())
    print("evidence holds: parameters still require grad, but with set_grad_enabled(False) none of the "
          "%d inference outputs carries a graph" % len(graph_flags))
