# source: https://github.com/mahmoudnafifi/CIE_XYZ_NET/issues/2
# category: DL301
# expect: flag 55, 60, 65, 68
# evidence: the demo sets ciexyzNet.eval() and converts every image with grad enabled: the XYZ and re-rendered sRGB outputs carry grad_fns and autograd saves the activations of both sub-networks for each image
import logging

import numpy as np
import torch
import torch.nn as nn


class CIEXYZNet(nn.Module):
    """sRGB -> XYZ -> sRGB with a local (conv) and a global (matrix) branch, tiny version."""

    def __init__(self, device='cpu'):
        super(CIEXYZNet, self).__init__()
        self.device = device
        self.srgb2xyz_local_net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
        self.srgb2xyz_globa_net = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 9))
        self.xyz2srgb_local_net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
        self.xyz2srgb_globa_net = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 9))

    @staticmethod
    def _apply_matrix(x, m):
        return torch.einsum('bij,bjhw->bihw', m.view(-1, 3, 3), x)

    def forward_srgb2xyz(self, x):
        l_xyz = x - self.srgb2xyz_local_net(x)
        return self._apply_matrix(l_xyz, self.srgb2xyz_globa_net(l_xyz))

    def forward_xyz2srgb(self, x):
        g = self._apply_matrix(x, self.xyz2srgb_globa_net(x))
        return g + self.xyz2srgb_local_net(g)

    def forward(self, x):
        xyz = self.forward_srgb2xyz(x)
        return xyz, self.forward_xyz2srgb(xyz)


def from_image_to_tensor(img):
    return torch.from_numpy(img.transpose((2, 0, 1)).copy()).unsqueeze(0) / 255.0


def from_tensor_to_image(tensor, device='cpu'):
    return tensor.squeeze(0).cpu().detach().numpy().transpose((1, 2, 0))


def outOfGamutClipping(img):
    return np.clip(img, 0, 1)


def run_demo(ciexyzNet, imgfiles, task='srgb-2-xyz-2-srgb', device=torch.device('cpu')):
    ciexyzNet.eval()
    results = {}
    for filename, in_img in imgfiles:
        logging.info(f'Processing image {filename}')
        in_img_tensor = from_image_to_tensor(in_img).to(device=device, dtype=torch.float32)

        if task.lower() == 'srgb-2-xyz-2-srgb':
            output_XYZ, output_sRGB = ciexyzNet(in_img_tensor)
            output_XYZ = outOfGamutClipping(from_tensor_to_image(output_XYZ, device=device))
            output_sRGB = outOfGamutClipping(from_tensor_to_image(output_sRGB, device=device))
            results[filename] = (output_XYZ * 65536).astype(np.uint16), (output_sRGB * 255).astype(np.uint8)
        elif task.lower() == 'srgb-2-xyz':
            output_XYZ = ciexyzNet.forward_srgb2xyz(in_img_tensor)
            results[filename] = outOfGamutClipping(from_tensor_to_image(output_XYZ, device=device))
        else:
            output_sRGB = ciexyzNet.forward_xyz2srgb(in_img_tensor)
            results[filename] = outOfGamutClipping(from_tensor_to_image(output_sRGB, device=device))
    return results


if __name__ == "__main__":
    torch.manual_seed(0)
    rng = np.random.RandomState(0)
    imgfiles = [("../images/%d.png" % i, rng.randint(0, 256, (16, 16, 3)).astype(np.uint8)) for i in range(3)]
    ciexyzNet = CIEXYZNet()
    outputs = []
    ciexyzNet.register_forward_hook(lambda mod, inp, out: outputs.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        results = run_demo(ciexyzNet, imgfiles)
    assert len(results) == 3 and not ciexyzNet.training
    assert len(outputs) == 3 and all(xyz.grad_fn is not None and srgb.grad_fn is not None for xyz, srgb in outputs)
    assert sum(saved) > 0
    print("evidence holds: %d demo images each produced XYZ/sRGB outputs with grad_fns; %d bytes saved for backward"
          % (len(outputs), sum(saved)))
