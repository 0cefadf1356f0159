# source: https://github.com/nerfstudio-project/gsplat/issues/390
# category: DL503
# expect: flag 61
# evidence: with absgrad off, info["means2d"].grad is None after loss.backward() (means2d is a projected, non-leaf tensor), so the densification statistics crash with an AttributeError
import torch
import torch.nn.functional as F


def rasterization(means, scales, colors, viewmat, K, width, height, absgrad=False):
    """Tiny stand-in for gsplat.rasterization: projects 3D gaussians and splats their colors."""
    cam = means @ viewmat[:3, :3].T + viewmat[:3, 3]
    uv = cam @ K.T
    means2d = uv[:, :2] / uv[:, 2:3]
    if absgrad:
        def _store_absgrad(grad):
            means2d.absgrad = grad.abs()
        means2d.register_hook(_store_absgrad)
    ys, xs = torch.meshgrid(torch.arange(height, dtype=means.dtype), torch.arange(width, dtype=means.dtype),
                            indexing="ij")
    pix = torch.stack([xs, ys], dim=-1).reshape(-1, 1, 2)
    d2 = ((pix - means2d.unsqueeze(0)) ** 2).sum(-1)
    alpha = torch.exp(-0.5 * d2 / scales.exp().pow(2).unsqueeze(0))
    render = (alpha.unsqueeze(-1) * colors.unsqueeze(0)).sum(1).reshape(height, width, 3)
    info = {"means2d": means2d, "width": width, "height": height}
    return render, info


class Runner:
    def __init__(self, n=20, width=8, height=8, absgrad=False):
        self.splats = torch.nn.ParameterDict({
            "means": torch.nn.Parameter(torch.randn(n, 3) * 0.5 + torch.tensor([0.0, 0.0, 4.0])),
            "scales": torch.nn.Parameter(torch.zeros(n)),
            "colors": torch.nn.Parameter(torch.rand(n, 3)),
        })
        self.optimizer = torch.optim.Adam(self.splats.parameters(), lr=1e-2)
        self.width, self.height = width, height
        self.absgrad = absgrad
        self.state = {"grad2d": torch.zeros(n), "count": torch.zeros(n)}
        self.viewmat = torch.eye(4)
        self.K = torch.tensor([[8.0, 0.0, 4.0], [0.0, 8.0, 4.0], [0.0, 0.0, 1.0]])

    def rasterize_splats(self):
        return rasterization(self.splats["means"], self.splats["scales"], self.splats["colors"],
                             self.viewmat, self.K, self.width, self.height, absgrad=self.absgrad)

    def train(self, gt_images, max_steps=2):
        for step in range(max_steps):
            gt = gt_images[step % len(gt_images)]
            renders, info = self.rasterize_splats()
            loss = F.l1_loss(renders, gt)
            self.optimizer.zero_grad()
            loss.backward()
            self.update_state(info)
            self.optimizer.step()
        return self.state

    def update_state(self, info):
        if self.absgrad:
            grads = info["means2d"].absgrad.clone()
        else:
            grads = info["means2d"].grad.clone()
        grads[..., 0] *= info["width"] / 2.0
        grads[..., 1] *= info["height"] / 2.0
        self.state["grad2d"] += grads.norm(dim=-1)
        self.state["count"] += 1


if __name__ == "__main__":
    torch.manual_seed(0)
    gt_images = [torch.rand(8, 8, 3) for _ in range(2)]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        state = Runner(absgrad=True).train(gt_images)  # the absgrad path works
        assert state["grad2d"].sum() > 0
        try:
            Runner(absgrad=False).train(gt_images)
            raised = None
        except AttributeError as e:
            raised = str(e)
    assert raised == "'NoneType' object has no attribute 'clone'", raised
    print("evidence holds: info['means2d'].grad is None without retain_grad(); update_state() crashes")
