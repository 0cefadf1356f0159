# source: https://github.com/ultralytics/yolov5/blob/master/utils/torch_utils.py
# category: DL304
# expect: clean
# evidence: the grad-mode object built by (torch.inference_mode if ... else torch.no_grad)() is applied to run() as a decorator: every validation forward runs in inference mode, and training between validations still learns
import torch
import torch.nn as nn
import torch.nn.functional as F


def check_version(current="0.0.0", minimum="0.0.0"):
    parse = lambda v: tuple(int(p) for p in v.split("+")[0].split(".")[:2])
    return parse(current) >= parse(minimum)


def smart_inference_mode(torch_1_9=check_version(torch.__version__, "1.9.0")):
    """Applies torch.inference_mode() decorator if torch>=1.9.0 else torch.no_grad() decorator."""

    def decorate(fn):
        """Applies torch.inference_mode() or torch.no_grad() to a function based on PyTorch version."""
        return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)

    return decorate


class DetectionModel(nn.Module):
    def __init__(self, nc=3, na=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.detect = nn.Linear(8, na * (5 + nc))
        self.na, self.no = na, 5 + nc

    def forward(self, im, augment=False):
        return self.detect(self.backbone(im)).view(-1, self.na, self.no)


def compute_loss(preds, targets):
    return F.mse_loss(preds[..., 4].sigmoid(), targets)


def non_max_suppression(prediction, conf_thres=0.001):
    return [p[p[:, 4].sigmoid() > conf_thres] for p in prediction]


@smart_inference_mode()
def run(data, batch_size=32, model=None, dataloader=None, conf_thres=0.001):
    model.eval()
    loss = torch.zeros(1)
    stats, seen = [], 0
    for batch_i, (im, targets) in enumerate(dataloader):
        preds = model(im)
        loss += compute_loss(preds, targets)
        preds = non_max_suppression(preds, conf_thres)
        for si, pred in enumerate(preds):
            seen += 1
            stats.append(pred)
    return (loss / len(dataloader)).item(), stats


def train(epochs, model, train_loader, val_loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.937, nesterov=True)
    results = []
    for epoch in range(epochs):
        model.train()
        for i, (imgs, targets) in enumerate(train_loader):
            pred = model(imgs)
            loss = compute_loss(pred, targets)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        results.append(run({"nc": 3}, batch_size=4, model=model, dataloader=val_loader))
    return results


if __name__ == "__main__":
    torch.manual_seed(0)
    model = DetectionModel()
    modes = []
    model.register_forward_hook(lambda m, i, o: modes.append((m.training, torch.is_inference_mode_enabled())))
    loader = [(torch.randn(4, 3, 16, 16), torch.rand(4, 4).round()) for _ in range(3)]
    results = train(3, model, loader, loader)
    assert all(inf for training, inf in modes if not training) and any(not t for t, _ in modes)
    assert not any(inf for training, inf in modes if training)
    assert all(p.is_inference() for _, stats in results for p in stats)
    assert results[-1][0] < results[0][0]
    print("evidence holds: validation ran in inference mode; val loss %.4f -> %.4f" % (results[0][0], results[-1][0]))
