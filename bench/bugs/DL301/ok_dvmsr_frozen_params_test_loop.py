# source: https://github.com/nathan66666/DVMSR/issues/5
# category: DL301
# expect: clean
# evidence: the test loop has no no_grad, but select_model() freezes every parameter (requires_grad=False), so the SR outputs carry no graph (requires_grad False, grad_fn None).
import argparse
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F


class VimSR(nn.Module):
    """Tiny x4 super-resolution net standing in for the challenge model."""

    def __init__(self, scale=4):
        super().__init__()
        self.head = nn.Conv2d(3, 8, 3, padding=1)
        self.body = nn.Conv2d(8, 3 * scale * scale, 3, padding=1)
        self.up = nn.PixelShuffle(scale)

    def forward(self, x):
        return self.up(self.body(F.relu(self.head(x))))


def select_model(args, device):
    model_id = args.model_id
    if model_id == 7:
        name, data_range = f"{model_id:02}_VimSR_baseline", 1.0
        model = VimSR()
    else:
        raise NotImplementedError(f"Model {model_id} is not implemented.")
    model.eval()
    tile = None
    for k, v in model.named_parameters():
        v.requires_grad = False
    model = model.to(device)
    return model, name, data_range, tile


def forward(img_lq, model, tile=None, tile_overlap=4, scale=4):
    if tile is None:
        output = model(img_lq)
    else:
        b, c, h, w = img_lq.size()
        tile = min(tile, h, w)
        stride = tile - tile_overlap
        h_idx_list = list(range(0, h - tile, stride)) + [h - tile]
        w_idx_list = list(range(0, w - tile, stride)) + [w - tile]
        E = torch.zeros(b, c, h * scale, w * scale).type_as(img_lq)
        W = torch.zeros_like(E)
        for h_idx in h_idx_list:
            for w_idx in w_idx_list:
                in_patch = img_lq[..., h_idx:h_idx + tile, w_idx:w_idx + tile]
                out_patch = model(in_patch)
                out_patch_mask = torch.ones_like(out_patch)
                E[..., h_idx * scale:(h_idx + tile) * scale, w_idx * scale:(w_idx + tile) * scale].add_(out_patch)
                W[..., h_idx * scale:(h_idx + tile) * scale, w_idx * scale:(w_idx + tile) * scale].add_(out_patch_mask)
        output = E.div_(W)
    return output


def calculate_psnr(img_sr, img_hr):
    mse = ((img_sr - img_hr) ** 2).mean().item()
    return 10 * torch.log10(torch.tensor(1.0 / max(mse, 1e-10))).item()


def run(model, model_name, data_range, tile, logger, device, data_path, mode="valid"):
    results = {f"{mode}_psnr": [], f"{mode}_outputs_with_graph": 0}
    for i, (img_lr, img_hr) in enumerate(data_path):
        img_lr = img_lr.to(device)
        img_sr = forward(img_lr, model, tile)
        if img_sr.requires_grad or img_sr.grad_fn is not None:
            results[f"{mode}_outputs_with_graph"] += 1
        psnr = calculate_psnr(img_sr.clamp(0, 1), img_hr)
        results[f"{mode}_psnr"].append(psnr)
        logger.info("{:d} - PSNR: {:.2f} dB".format(i, psnr))
    return results


if __name__ == "__main__":
    torch.manual_seed(0)
    parser = argparse.ArgumentParser("NTIRE2024-EfficientSR")
    parser.add_argument("--model_id", default=7, type=int)
    args = parser.parse_args([])
    logging.basicConfig(level=logging.WARNING)
    logger = logging.getLogger("NTIRE2024-EfficientSR")
    device = torch.device("cpu")

    model, model_name, data_range, tile = select_model(args, device)
    data_path = [(torch.rand(1, 3, 12, 12), torch.rand(1, 3, 48, 48)) for _ in range(3)]
    valid_results = run(model, model_name, data_range, tile, logger, device, data_path, mode="valid")
    tiled = run(model, model_name, data_range, 8, logger, device, data_path, mode="tiled")

    assert torch.is_grad_enabled()
    assert valid_results["valid_outputs_with_graph"] == 0
    assert tiled["tiled_outputs_with_graph"] == 0
    assert all(not p.requires_grad for p in model.parameters())
    print("evidence holds: grad mode stayed on, yet all %d SR outputs (whole and tiled) have no graph "
          "because every parameter was frozen in select_model()" % (2 * len(data_path)))
