# source: https://github.com/Gorilla-Lab-SCUT/tango/issues/6
# category: DL301
# expect: flag 63, 64
# evidence: test() loads the model, calls model.eval(), and renders every view through model.render_single_image with grad enabled: the material network's outputs for every view carry grad_fns and autograd saves the network's activations per view, which exhausts GPU memory over 100 views
import numpy as np
import torch
import torch.nn as nn


class SVBRDFNetwork(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(3, width), nn.ReLU(), nn.Linear(width, 5))

    def forward(self, points):
        out = torch.sigmoid(self.mlp(points))
        return out[..., :3], out[..., 3:4], out[..., 4:5]  # diffuse, roughness, specular


class NeuralStyleField(nn.Module):
    def __init__(self, width=16, resolution=8):
        super().__init__()
        self.resolution = resolution
        self.svbrdf_network = SVBRDFNetwork(width)
        self.normal_net = nn.Sequential(nn.Linear(3, width), nn.ReLU(), nn.Linear(width, 3))

    def render_single_image(self, scene, azim, elev):
        # rays hit the (unit-sphere) scene at points that depend on the camera angles
        r = self.resolution
        u, v = torch.meshgrid(torch.linspace(-1, 1, r), torch.linspace(-1, 1, r), indexing='ij')
        points = torch.stack([u * torch.cos(azim), v * torch.cos(elev), torch.sin(azim) * torch.ones_like(u)], -1)
        normal1 = nn.functional.normalize(points + scene, dim=-1)
        normal2 = nn.functional.normalize(normal1 + self.normal_net(points), dim=-1)
        diffuse, roughness, specular = self.svbrdf_network(points)
        shading = (normal2[..., 2:3].clamp(min=0) + specular * (1 - roughness))
        rendered_images = diffuse * shading
        as_img = lambda t: t.permute(2, 0, 1).unsqueeze(0)
        return (as_img(rendered_images), as_img(normal1), as_img(normal2), as_img(roughness),
                as_img(diffuse), as_img(specular))


SAVED_IMAGES = {}


@torch.no_grad()
def save_image(tensor, fp):
    """Stand-in for torchvision.utils.save_image (which is itself decorated with no_grad)."""
    SAVED_IMAGES[fp] = tensor.mul(255).add_(0.5).clamp_(0, 255).to(torch.uint8).cpu().numpy()


def test(args, state_dict, scene):
    torch.manual_seed(args['seed'])
    np.random.seed(args['seed'])
    dir = args['output_dir']

    model = NeuralStyleField(width=args['width'])
    model.load_state_dict(state_dict)
    model.eval()

    view_num = 100 if args['render_gif'] else 1
    azim = torch.linspace(0, 2 * np.pi + 0, view_num)
    elev = torch.tensor(args['frontview_center'][1])
    for i in range(view_num):
        rendered_images, normal1, normal2, roughness, diffuse, specular = model.render_single_image(scene=scene,
                                                                                                  azim=azim[i],
                                                                                                  elev=elev)
        save_image(rendered_images, f'{dir}/rgb/iter_test_rgb_{i:03d}.jpg')
        save_image(normal1, f'{dir}/normal1/iter_test_normal1_{i:03d}.jpg')
        save_image(roughness, f'{dir}/roughness/iter_test_roughness_{i:03d}.jpg')
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    args = {'seed': 0, 'output_dir': 'round2/alpha5', 'width': 16, 'render_gif': True, 'frontview_center': [0., 0.]}
    state_dict = NeuralStyleField(width=16).state_dict()
    renders = []  # what the material network returns during the renders

    def record(module, inputs, output):
        if isinstance(module, SVBRDFNetwork):
            renders.append(output[0])

    torch.nn.modules.module.register_module_forward_hook(record)
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model = test(args, state_dict, scene=torch.zeros(3))
    assert not model.training and len(SAVED_IMAGES) == 300
    assert len(renders) == 100 and all(r.grad_fn is not None for r in renders)
    assert sum(saved) > 0
    print("evidence holds: the material outputs of all %d evaluation renders carry grad_fns; autograd saved %d bytes for a backward that never runs"
          % (len(renders), sum(saved)))
