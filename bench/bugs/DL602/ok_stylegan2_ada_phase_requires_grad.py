# source: https://github.com/NVlabs/stylegan2-ada-pytorch/blob/main/training/loss.py
# category: DL602
# expect: clean
# evidence: the Dmain phase feeds the live generator output to D without detach, but G was built with requires_grad_(False) and only the phase's own module is switched on, so no gradient and no graph reach G; both nets train
from types import SimpleNamespace

import torch
import torch.nn as nn


class Loss:
    def accumulate_gradients(self, phase, real_img, real_c, gen_z, gen_c, sync, gain):
        raise NotImplementedError()


class StyleGAN2Loss(Loss):
    def __init__(self, device, G_mapping, G_synthesis, D):
        super().__init__()
        self.device = device
        self.G_mapping = G_mapping
        self.G_synthesis = G_synthesis
        self.D = D

    def run_G(self, z, c, sync):
        ws = self.G_mapping(torch.cat([z, c], dim=1))
        img = self.G_synthesis(ws)
        return img, ws

    def run_D(self, img, c, sync):
        return self.D(torch.cat([img.flatten(1), c], dim=1))

    def accumulate_gradients(self, phase, real_img, real_c, gen_z, gen_c, sync, gain):
        assert phase in ['Gmain', 'Dmain']
        do_Gmain = (phase == 'Gmain')
        do_Dmain = (phase == 'Dmain')
        do_Dr1 = False  # no R1 regularization phase in this reduced setup

        # Gmain: maximize logits for generated images.
        if do_Gmain:
            gen_img, _gen_ws = self.run_G(gen_z, gen_c, sync=sync)
            gen_logits = self.run_D(gen_img, gen_c, sync=False)
            loss_Gmain = torch.nn.functional.softplus(-gen_logits)
            loss_Gmain.mean().mul(gain).backward()

        # Dmain: minimize logits for generated images.
        if do_Dmain:
            gen_img, _gen_ws = self.run_G(gen_z, gen_c, sync=False)
            gen_logits = self.run_D(gen_img, gen_c, sync=False)
            loss_Dgen = torch.nn.functional.softplus(gen_logits)
            loss_Dgen.mean().mul(gain).backward()

        # Dmain: maximize logits for real images.
        if do_Dmain:
            real_img_tmp = real_img.detach().requires_grad_(do_Dr1)
            real_logits = self.run_D(real_img_tmp, real_c, sync=sync)
            loss_Dreal = torch.nn.functional.softplus(-real_logits)
            loss_Dreal.mean().mul(gain).backward()


def build_networks(z_dim=4, c_dim=2, img_dim=12):
    G_mapping = nn.Sequential(nn.Linear(z_dim + c_dim, 8), nn.LeakyReLU(0.2))
    G_synthesis = nn.Sequential(nn.Linear(8, img_dim), nn.Tanh())
    D = nn.Sequential(nn.Linear(img_dim + c_dim, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    return G_mapping, G_synthesis, D


def training_loop(batches, G_mapping, G_synthesis, D, z_dim=4):
    device = torch.device('cpu')
    G_mapping = G_mapping.train().requires_grad_(False)
    G_synthesis = G_synthesis.train().requires_grad_(False)
    D = D.train().requires_grad_(False)
    G = nn.ModuleDict({'mapping': G_mapping, 'synthesis': G_synthesis})
    loss = StyleGAN2Loss(device=device, G_mapping=G_mapping, G_synthesis=G_synthesis, D=D)

    phases = []
    for name, module, lr in [('G', G, 2e-3), ('D', D, 2e-3)]:
        opt = torch.optim.Adam(module.parameters(), lr=lr, betas=(0.0, 0.99), eps=1e-8)
        phases += [SimpleNamespace(name=name + 'main', module=module, opt=opt, interval=1)]

    for batch_idx, (phase_real_img, phase_real_c) in enumerate(batches):
        all_gen_z = torch.randn(len(phases), phase_real_img.shape[0], z_dim)
        all_gen_c = phase_real_c[torch.randint(phase_real_c.shape[0], (len(phases), phase_real_c.shape[0]))]
        for phase, phase_gen_z, phase_gen_c in zip(phases, all_gen_z, all_gen_c):
            if batch_idx % phase.interval != 0:
                continue
            phase.opt.zero_grad(set_to_none=True)
            phase.module.requires_grad_(True)
            loss.accumulate_gradients(phase=phase.name, real_img=phase_real_img, real_c=phase_real_c,
                                      gen_z=phase_gen_z, gen_c=phase_gen_c, sync=True, gain=phase.interval)
            phase.module.requires_grad_(False)
            for param in phase.module.parameters():
                if param.grad is not None:
                    torch.nan_to_num(param.grad, nan=0, posinf=1e5, neginf=-1e5, out=param.grad)
            phase.opt.step()
    return G, D


if __name__ == "__main__":
    torch.manual_seed(0)
    batches = [(torch.rand(4, 12) * 2 - 1, torch.eye(2)[torch.randint(0, 2, (4,))]) for _ in range(3)]
    G_mapping, G_synthesis, D = build_networks()

    d_input_has_graph = []
    D.register_forward_pre_hook(lambda m, inp: d_input_has_graph.append(inp[0].requires_grad))
    g_arrivals, d_arrivals = [], []
    G_mapping[0].weight.register_hook(lambda g: g_arrivals.append(1))
    D[0].weight.register_hook(lambda g: d_arrivals.append(1))
    g0 = G_mapping[0].weight.detach().clone()
    d0 = D[0].weight.detach().clone()

    training_loop(batches, G_mapping, G_synthesis, D)

    # per batch: Gmain (live fake, G on) then Dmain on the generated batch (G off: no graph) and the real batch
    assert d_input_has_graph == [True, False, False] * len(batches)
    assert len(g_arrivals) == len(batches)  # only loss_Gmain reaches G
    assert len(d_arrivals) == 2 * len(batches)  # loss_Dgen and loss_Dreal reach D; loss_Gmain does not
    assert not torch.equal(g0, G_mapping[0].weight) and not torch.equal(d0, D[0].weight)
    print("evidence holds: in the D phase the generated images carry no graph back to the frozen G; both nets train")
