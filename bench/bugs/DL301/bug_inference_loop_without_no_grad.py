# source: http://www.kouhan.cn/en/article/00034093
# category: DL301
# expect: flag 34, 35
# evidence: the per-image inference loop (batch size 1) runs the detector with autograd on and keeps every output, so each stored result carries a grad_fn and its whole graph of saved activations stays alive; torch.cuda.empty_cache() cannot free it.
import torch
import torch.nn as nn

torch.manual_seed(0)


class TinyDetector(nn.Module):
    """Stand-in for the SSD-style detector of the report (300x300 inputs, here 3x32x32)."""

    def __init__(self, num_classes=4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.head = nn.Linear(8 * 4 * 4, num_classes + 4)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def load_images(n=25):
    return [torch.rand(3, 32, 32) for _ in range(n)]


def run_inference(model, images):
    model.eval()
    results = []
    for img in images:
        output = model(img.unsqueeze(0))  # batch size 1
        results.append(output)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return results


if __name__ == "__main__":
    model = TinyDetector()
    results = run_inference(model, load_images())
    assert len(results) == 25
    assert all(r.grad_fn is not None and r.requires_grad for r in results)
    # the retained graph reaches back to the conv activations of every single image
    assert all(r.grad_fn.next_functions for r in results)
    print("evidence holds: all 25 stored inference outputs carry grad_fn, keeping their graphs alive")
