# source: https://github.com/taozh2017/HiNet/issues/11
# category: DL301
# expect: flag 89, 97
# evidence: during LatentSynthModel.test() every generator output carries a grad_fn (autograd graph kept for each test batch) although test() never calls backward.
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Multi_modal_generator(nn.Module):
    def __init__(self, in_ch, out_ch, ngf):
        super(Multi_modal_generator, self).__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(in_ch, ngf, 3, padding=1), nn.LeakyReLU(0.2))
        self.enc2 = nn.Sequential(nn.Conv2d(in_ch, ngf, 3, padding=1), nn.LeakyReLU(0.2))
        self.fusion = nn.Sequential(nn.Conv2d(2 * ngf, ngf, 3, padding=1), nn.ReLU())
        self.dec_fake = nn.Conv2d(ngf, out_ch, 3, padding=1)
        self.dec1 = nn.Conv2d(ngf, out_ch, 3, padding=1)
        self.dec2 = nn.Conv2d(ngf, out_ch, 3, padding=1)

    def forward(self, x):
        f1 = self.enc1(x[:, 0:1])
        f2 = self.enc2(x[:, 1:2])
        fused = self.fusion(torch.cat([f1, f2], dim=1))
        return torch.tanh(self.dec_fake(fused)), torch.tanh(self.dec1(f1)), torch.tanh(self.dec2(f2))


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.model = nn.Sequential(nn.Conv2d(1, 4, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                   nn.Conv2d(4, 1, 3, padding=1))

    def forward(self, img):
        return self.model(img)


def model_task(inputs, task_id):
    # inputs: three modalities, each [batch, slices, H, W] -> [batch*slices, 1, H, W]
    x = [m.reshape(-1, 1, m.shape[2], m.shape[3]) for m in inputs]
    if task_id == 1:
        return [x[0], x[1], x[2]]
    return [x[1], x[2], x[0]]


def prediction_syn_results(pred_out, x_out):
    pred = pred_out.detach().cpu().numpy()
    gt = x_out.cpu().numpy()
    mse = float(np.mean((pred - gt) ** 2))
    psnr = float(10 * np.log10(4.0 / (mse + 1e-8)))
    ssim = float(1.0 - np.abs(pred.mean() - gt.mean()))
    return {'MSE': mse, 'SSIM': ssim, 'PSNR': psnr}


class Opt:
    use_gpu = False
    task_id = 1
    batch_size = 2
    save_path = 'unused'


def MultiModalityData_load(opt, train=False, test=True):
    g = torch.Generator().manual_seed(1)
    mods = [torch.rand(6, 2, 12, 12, generator=g) * 2 - 1 for _ in range(3)]
    return TensorDataset(*mods)


class LatentSynthModel():

    def __init__(self, opt):
        self.opt = opt
        self.generator = Multi_modal_generator(1, 1, 8)
        self.discrimator = Discriminator()
        # stands in for the generator_<epoch>.pkl files written by train()
        self.checkpoints = {}

    def save_checkpoint(self, epoch):
        self.checkpoints[epoch] = {k: v.clone() for k, v in self.generator.state_dict().items()}

    def test(self, ind_epoch):

        self.generator.load_state_dict(self.checkpoints[ind_epoch], strict=False)

        # Load data
        te_data = MultiModalityData_load(self.opt, train=False, test=True)
        te_loader = DataLoader(te_data, batch_size=self.opt.batch_size, shuffle=False)

        pred_eva_set = []
        for ii, inputs in enumerate(te_loader):
            # define diferent synthesis tasks
            [x_in1, x_in2, x_out] = model_task(inputs, self.opt.task_id)
            x_fusion = torch.cat([x_in1, x_in2], dim=1)

            if self.opt.use_gpu:
                x_fusion = x_fusion.cuda()

            pred_out, pred_out1, pred_out2 = self.generator(x_fusion)

            errors = prediction_syn_results(pred_out, x_out)

            print(errors)

            pred_eva_set.append([errors['MSE'], errors['SSIM'], errors['PSNR']])

        mean_values = [ind_epoch, np.array(pred_eva_set)[:, 0].mean(), np.array(pred_eva_set)[:, 1].mean(),
                       np.array(pred_eva_set)[:, 2].mean()]

        return mean_values


if __name__ == "__main__":
    torch.manual_seed(0)
    opt = Opt()
    synth = LatentSynthModel(opt)
    synth.save_checkpoint(21)

    seen = []

    def record(module, inp, out):
        seen.append(out[0].grad_fn is not None)

    h = synth.generator.register_forward_hook(record)
    mean_values = synth.test(21)
    h.remove()
    assert len(seen) == 3 and all(seen), seen
    print("evidence holds: all %d test-batch generator outputs carry a grad_fn; test() builds graphs it never uses" % len(seen))
